################################################################################
#
# uplot
#
################################################################################

# Keep in step with VERSION in webui/fetch_uplot.py (make assets, wheels).
UPLOT_VERSION = 1.6.31
# The tarball comes from the npm registry, at the same address as for
# make assets and wheel builds; uplot.hash checks it. No npm is needed.
UPLOT_SITE = https://registry.npmjs.org/uplot/-
UPLOT_SOURCE = uplot-$(UPLOT_VERSION).tgz
UPLOT_LICENSE = MIT
UPLOT_LICENSE_FILES = LICENSE

# The ssdbench package serves these from its static/vendor/ folder. The
# MIT licence asks for its text to go with every copy: it lies beside
# them, under the name make assets gives it.
UPLOT_VENDOR_DIR = $(TARGET_DIR)/usr/lib/python$(PYTHON3_VERSION_MAJOR)/site-packages/ssdbench/static/vendor

define UPLOT_INSTALL_TARGET_CMDS
	$(INSTALL) -D -m 0644 $(@D)/dist/uPlot.iife.min.js \
		$(UPLOT_VENDOR_DIR)/uPlot.iife.min.js
	$(INSTALL) -D -m 0644 $(@D)/dist/uPlot.min.css \
		$(UPLOT_VENDOR_DIR)/uPlot.min.css
	$(INSTALL) -D -m 0644 $(@D)/LICENSE \
		$(UPLOT_VENDOR_DIR)/uPlot.LICENSE
endef

$(eval $(generic-package))
