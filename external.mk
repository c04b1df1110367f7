# The release name has one source: git describe. The top-level Makefile
# computes it and passes it to Buildroot as SSDBENCH_RELEASE (make image);
# a build started by hand in the output directory asks git the same way.
# It is exported so that the post-build and post-image scripts see it.
ifeq ($(SSDBENCH_RELEASE),)
SSDBENCH_RELEASE := $(shell git -C $(BR2_EXTERNAL_SSDBENCH_PATH) describe --tags --always --dirty 2>/dev/null || echo unknown)
endif
export SSDBENCH_RELEASE

include $(sort $(wildcard $(BR2_EXTERNAL_SSDBENCH_PATH)/package/*/*.mk))
