################################################################################
#
# ssdbench
#
################################################################################

# The release name comes from git describe (see external.mk), so a new
# commit gives a new build directory and the package is rebuilt.
SSDBENCH_VERSION = $(SSDBENCH_RELEASE)
SSDBENCH_SITE = $(BR2_EXTERNAL_SSDBENCH_PATH)/webui
SSDBENCH_SITE_METHOD = local
SSDBENCH_SETUP_TYPE = setuptools
SSDBENCH_LICENSE = GPL-2.0+
# webui/LICENSE; the LICENSE at the top of the tree links to it.
SSDBENCH_LICENSE_FILES = LICENSE
SSDBENCH_DEPENDENCIES = uplot
# Only the package itself goes into the image, not its tests or local
# build leftovers; uPlot comes from the uplot package, hash-checked.
SSDBENCH_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS = \
	--exclude /tests --exclude /bench --exclude /build \
	--exclude '*.egg-info' --exclude __pycache__ --exclude .pytest_cache \
	--exclude /ssdbench/static/vendor
# The Python build can read the release name from the environment. It must
# not fetch uPlot itself (webui/setup.py): the uplot package installs it.
SSDBENCH_ENV = SSDBENCH_VERSION=$(SSDBENCH_VERSION) SSDBENCH_UPLOT=external

$(eval $(python-package))
