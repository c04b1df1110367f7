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

include $(sort $(wildcard $(BR2_EXTERNAL_SSDBENCH_PATH)/package/*/*.mk))
