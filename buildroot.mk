# buildroot.mk: the release USB stick image (make image) and the checks of
# the Buildroot tree (make br-check). Included by the Makefile; docs/development.md
# says how to use them ("Build the image").

# Buildroot, pinned to the newest 2026.05.x release.
BUILDROOT_VERSION ?= 2026.05.1
BUILDROOT_TARBALL = buildroot-$(BUILDROOT_VERSION).tar.xz
BUILDROOT_URL = https://buildroot.org/downloads/$(BUILDROOT_TARBALL)
# sha256 of that release tarball. make image refuses a download that does
# not match it. Not computed here (this machine cannot reach buildroot.org):
# it is the value public build locks record for buildroot-2026.05.1.tar.xz,
# one of them checked against the release's signed announcement
# ($(BUILDROOT_URL).sign). When bumping BUILDROOT_VERSION, take the new one
# from that .sign file.
BUILDROOT_SHA256 ?= ae7f706f087b9ae9083a10a587368dfbf53103c28bf81c2d690198dc4090cb58

# A Buildroot source tree to use instead of the downloaded release, e.g. a
# git export of the same tag. make br-check needs one.
BUILDROOT_DIR ?=
# A kernel source (a tree, or its .tar.xz) for make br-check's merge of
# linux.fragment: by default Debian's newest linux-source package, which
# .ci/run installs. The image builds Linux 6.18; make image checks its
# merged configuration too.
LINUX_SOURCE ?= $(lastword $(sort $(wildcard /usr/src/linux-source-*.tar.xz)))

# Buildroot's output directory; the image is $(BR_OUTPUT)/images/ssdbench-<version>.img
BR_OUTPUT ?= $(CURDIR)/output
BR_DEFCONFIG = ssdbench_x86_64_defconfig
BR_RELEASE_DIR = $(BR_OUTPUT)/buildroot-$(BUILDROOT_VERSION)
BR_TREE = $(if $(BUILDROOT_DIR),$(BUILDROOT_DIR),$(BR_RELEASE_DIR))

# Buildroot gets a make environment of its own: none of our command-line
# variables (VERSION, PYTHON, ...) may reach its packages' makefiles.
BR_MAKE = env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u VERSION -u PYTHON -u PYTEST \
	$(MAKE) -C $(BR_TREE) O=$(BR_OUTPUT)

.PHONY: image br-check

image: $(if $(BUILDROOT_DIR),,$(BR_RELEASE_DIR)/Makefile)
	$(BR_MAKE) BR2_EXTERNAL=$(CURDIR) $(BR_DEFCONFIG)
	SSDBENCH_SIGNING_DIR=$(CURDIR)/build/signing $(BR_MAKE) SSDBENCH_RELEASE=$(VERSION)
	@ls -l $(BR_OUTPUT)/images/ssdbench-*.img

$(BR_OUTPUT)/$(BUILDROOT_TARBALL):
	@test -n "$(BUILDROOT_SHA256)" || \
		{ echo "BUILDROOT_SHA256 is not set: the Buildroot download cannot be checked" >&2; exit 1; }
	mkdir -p $(@D)
	wget -nv -O $@.part $(BUILDROOT_URL) || { rm -f $@.part; exit 1; }
	@echo "$(BUILDROOT_SHA256)  $@.part" | sha256sum -c --quiet - || \
		{ echo "$(BUILDROOT_TARBALL): sha256 mismatch, expected BUILDROOT_SHA256=$(BUILDROOT_SHA256)" >&2; \
		  rm -f $@.part; exit 1; }
	mv $@.part $@

$(BR_RELEASE_DIR)/Makefile: $(BR_OUTPUT)/$(BUILDROOT_TARBALL)
	rm -rf $(BR_RELEASE_DIR)
	tar -xf $< -C $(BR_OUTPUT)
	touch $@

br-check:
	@BUILDROOT_DIR="$(BUILDROOT_DIR)" BUILDROOT_VERSION="$(BUILDROOT_VERSION)" \
		board/ssdbench/br-check.sh
	@if [ -n "$(LINUX_SOURCE)" ]; then \
		board/ssdbench/linux-config-check.sh --merge "$(LINUX_SOURCE)"; \
	else \
		echo "SKIPPED: linux.fragment's merge: no LINUX_SOURCE (apt-get install linux-source-6.12)"; \
	fi
