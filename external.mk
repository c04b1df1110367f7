# The release name has one source: git describe. The top-level Makefile
# computes it and passes it to Buildroot as SSDBENCH_RELEASE (make image);
# a build started by hand in the output directory asks git the same way.
# It is exported so that the post-build and post-image scripts see it.
ifeq ($(SSDBENCH_RELEASE),)
SSDBENCH_RELEASE := $(shell git -C $(BR2_EXTERNAL_SSDBENCH_PATH) describe --tags --always --dirty 2>/dev/null || echo unknown)
endif
export SSDBENCH_RELEASE

# The kernel keeps every line of linux.fragment and builds in every driver
# of linux.required: checked on its merged configuration, before it builds.
define SSDBENCH_LINUX_CONFIG_CHECK
	$(BR2_EXTERNAL_SSDBENCH_PATH)/board/ssdbench/linux-config-check.sh $(LINUX_DIR)/.config
endef
LINUX_PRE_BUILD_HOOKS += SSDBENCH_LINUX_CONFIG_CHECK

# The RTL8126 (5G) and RTL8127 (10G) firmware that r8169 loads: linux-firmware
# ships it, but Buildroot's RTL_8169 option does not list it yet. The files are
# named by a shell glob, so a linux-firmware without them fails the build.
# Added after linux-firmware.mk, whose build command lists the files only
# when it runs.
ifeq ($(BR2_PACKAGE_LINUX_FIRMWARE_RTL_8169),y)
LINUX_FIRMWARE_FILES += rtl_nic/rtl8126a-*.fw rtl_nic/rtl8127a-*.fw
endif

# Shim starts only a GRUB that carries SBAT, its revocation data
# (board/ssdbench/sbat.csv); Buildroot's grub2 has no option for it, so the
# UEFI image is made again with it, as grub2.mk made it, plus --sbat.
# post-image.sh refuses a GRUB without it.
ifeq ($(BR2_TARGET_GRUB2_X86_64_EFI),y)
define SSDBENCH_GRUB2_SBAT
	$(HOST_DIR)/bin/grub-mkimage \
		-d $(GRUB2_DIR)/build-x86_64-efi/grub-core/ \
		-O x86_64-efi \
		-o $(GRUB2_IMAGE_x86_64-efi) \
		-p "$(GRUB2_PREFIX_x86_64-efi)" \
		--sbat $(BR2_EXTERNAL_SSDBENCH_PATH)/board/ssdbench/sbat.csv \
		$(GRUB2_BUILTIN_MODULES_x86_64-efi)
endef
GRUB2_POST_INSTALL_IMAGES_HOOKS += SSDBENCH_GRUB2_SBAT
endif

include $(sort $(wildcard $(BR2_EXTERNAL_SSDBENCH_PATH)/package/*/*.mk))
