################################################################################
#
# shim-signed
#
################################################################################

# Debian 12's shim and MokManager, signed by Microsoft: binaries from
# Debian's archive, checked by shim-signed.hash. Building shim ourselves
# would need Microsoft to sign it; Debian's also carries Debian's own
# key, which trusts nothing that Buildroot builds.
SHIM_SIGNED_VERSION = 1.51~1+deb12u1+16.1-2~deb12u1
SHIM_SIGNED_SITE = https://deb.debian.org/debian/pool/main/s/shim-signed
SHIM_SIGNED_SOURCE = shim-signed_$(SHIM_SIGNED_VERSION)_amd64.deb
SHIM_SIGNED_HELPERS_SOURCE = shim-helpers-amd64-signed_1+16.1+2~deb12u1_amd64.deb
SHIM_SIGNED_EXTRA_DOWNLOADS = \
	https://deb.debian.org/debian/pool/main/s/shim-helpers-amd64-signed/$(SHIM_SIGNED_HELPERS_SOURCE)
SHIM_SIGNED_LICENSE = BSD-2-Clause
SHIM_SIGNED_LICENSE_FILES = \
	usr/share/doc/shim-signed/copyright \
	usr/share/doc/shim-helpers-amd64-signed/copyright
SHIM_SIGNED_INSTALL_TARGET = NO
SHIM_SIGNED_INSTALL_IMAGES = YES

# A .deb is an ar archive; its files are in data.tar.xz.
define SHIM_SIGNED_EXTRACT_CMDS
	for deb in $(SHIM_SIGNED_DL_DIR)/$(SHIM_SIGNED_SOURCE) \
		$(SHIM_SIGNED_DL_DIR)/$(SHIM_SIGNED_HELPERS_SOURCE); do \
		(cd $(@D) && ar x $$deb data.tar.xz && \
			tar -xJf data.tar.xz && rm data.tar.xz) || exit 1; \
	done
endef

define SHIM_SIGNED_INSTALL_IMAGES_CMDS
	$(INSTALL) -D -m 0644 $(@D)/usr/lib/shim/shimx64.efi.signed \
		$(BINARIES_DIR)/shim/shimx64.efi.signed
	$(INSTALL) -D -m 0644 $(@D)/usr/lib/shim/mmx64.efi.signed \
		$(BINARIES_DIR)/shim/mmx64.efi.signed
endef

$(eval $(generic-package))
