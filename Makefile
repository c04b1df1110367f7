# ssdbench: the developer entry points. See docs/development.md.
PYTHON ?= python3
PYTEST ?= $(PYTHON) -m pytest
# The release name, the one source for the image name, /etc/ssdbench-release
# and the package version: git describe.
VERSION ?= $(shell git -C $(CURDIR) describe --tags --always --dirty 2>/dev/null || echo unknown)
VERSION := $(VERSION)
# uPlot draws the charts. It is served from the app's own static files, never from a CDN,
# and not committed: webui/fetch_uplot.py fetches it from the npm registry at a pinned version
# and checks it against its hash (a wheel build does the same).
VENDOR = webui/ssdbench/static/vendor

.PHONY: help setup assets fio lint test test-vm test-boot test-boot-sb bench bench-vm lab vm-image demo screenshots
LAB_HOST ?= 127.0.0.1
LAB_PORT ?= 8090

help:
	@echo "make setup   install the ssdbench package (editable) with its test dependencies"
	@echo "make assets  fetch the pinned uPlot into $(VENDOR)"
	@echo "make fio     build the image's fio (Debian's fio 3.41 source with board/ssdbench/patches/fio/) into $(FIO_DIR)/; the tests and benchmarks run it"
	@echo "make lint    ruff on webui/, shellcheck on the shell scripts of board/, overlay/ and .ci/"
	@echo "make test    run every test (needs root: loop devices, real fio)"
	@echo "make screenshots  make the docs' screenshots (docs/screenshots) again in chromium"
	@echo "make bench   measure the harness against plain fio, the host's cost of the data, the gaps of a trace's replay, result ingestion, the web, the lab's uploads and pages, the appliance's pages, the same figures on a free, a slow and a busy host, how far quick's figures repeat, then make bench-vm (about 100 minutes)"
	@echo "make bench-vm  how far smoke's figures repeat on the VM's NVMe drive, x5 against plain fio, its pages' p95, and whether reading the temperature once a second slows a QD32 read on its AHCI and NVMe drives (about 40 minutes)"
	@echo "make lab     a local lab (results server) on its own PostgreSQL in build/lab, on port 8090"
	@echo "make vm-image  build the VM test image from Debian packages and the image's BusyBox: $(VM_DIR)/"
	@echo "make demo    boot the appliance in QEMU, the web UI on http://localhost:8080"
	@echo "make test-vm boot the VM and test it from the host (part of make test)"
	@echo "make test-boot  assemble the release stick's layout from Debian stand-ins, boot it with BIOS and UEFI (part of make test)"
	@echo "make test-boot-sb  boot that stick with Secure Boot on: key enrolled, MokManager, refused signatures"
	@echo "make image   build the USB stick image with Buildroot: output/images/ssdbench-$(VERSION).img"
	@echo "make br-check  check the Buildroot tree (needs BUILDROOT_DIR=/path/to/buildroot)"

setup:
	$(PYTHON) -m pip install -q -e 'webui[test,lab]'

assets: $(VENDOR)/uPlot.LICENSE

$(VENDOR)/uPlot.LICENSE: webui/fetch_uplot.py
	rm -f $(VENDOR)/uPlot.*
	$(PYTHON) webui/fetch_uplot.py $(VENDOR)

# The image's fio on this host: Debian's source of the fio that Buildroot builds, with our patches
# (scramble_buffers=hash, board/ssdbench/patches/fio/). Built again only when a patch or the script changes. The
# tests and benchmarks find it first on their PATH (FIO_PATH).
FIO_DIR = build/fio
FIO_PATH = PATH=$(CURDIR)/$(FIO_DIR)/bin:$$PATH

fio: $(FIO_DIR)/bin/fio

$(FIO_DIR)/bin/fio: board/fio/build.sh $(wildcard board/ssdbench/patches/fio/*.patch)
	@.ci/timed fio board/fio/build.sh $(FIO_DIR)

# Every shell script of the image builders, the boot flow and CI, found by its #! line.
SHELL_SCRIPTS = $(shell grep -rlE '^\#! ?/(usr/)?bin/(env )?(ba|da)?sh' board overlay .ci | sort)

lint:
	cd webui && $(PYTHON) -m ruff check . && $(PYTHON) -m ruff format --check .
	shellcheck $(SHELL_SCRIPTS)

# Lint and br-check, then two lanes side by side: the host's tests (pytest), and the VM's (test-vm, then
# test-boot, then the host's tests of LATE_TESTS). The host's wait mostly on idles, loop devices and child
# processes, the VM's on QEMU's emulation, so together they take little more than the longer lane alone;
# LATE_TESTS (each a test file that needs nothing from the others) move from the first lane to the second
# so that both end at about the same time: on a fresh clone, pytest's lane took 35 minutes beside the VM's 24;
# with the lab's trust tests late as well, 31 beside 36. Here, busy, pytest's lane took 33 minutes beside 21 of
# test-vm alone: the benchmarks' short modes (about 4 minutes) went late. The API's contract came back to the host's
# lane, which makes the session's smoke run, bundle and repeat set its every_kind is built on anyway, where late it
# made them again (200 s); the testbeds bench and the imported traces (160 s) went late instead: measured, the host's
# lane 1,820 s beside the VM's 1,922 s before. Make prints each lane's output whole as it ends (--output-sync); each
# phase's time goes to build/phases.txt (.ci/timed), which .ci/run prints at the end.
test: assets
	@rm -f build/phases.txt
	@.ci/timed lint $(MAKE) --no-print-directory lint
	@.ci/timed br-check $(MAKE) --no-print-directory br-check
	@echo "pytest and the VM tests run side by side: each one's output comes whole as it ends"
	@$(MAKE) --no-print-directory -j2 --output-sync=recurse test-host-lane test-vm-lane

LATE_TESTS = tests/test_packaging.py tests/test_bench.py tests/test_bench_testbeds.py tests/test_user_traces.py

.PHONY: test-host-lane test-vm-lane
# make fio (about 30 s of CPU) starts both lanes, made once: the host's tests run it, and the VM image holds it.
test-host-lane: fio
	@.ci/timed pytest sh -c 'cd webui && $(FIO_PATH) $(PYTEST) -q --durations=40 $(addprefix --ignore=,$(LATE_TESTS))'

test-vm-lane: fio
	@.ci/timed test-vm $(MAKE) --no-print-directory test-vm
	@.ci/timed test-boot $(MAKE) --no-print-directory test-boot
	@.ci/timed pytest-late sh -c 'cd webui && $(FIO_PATH) $(PYTEST) -q $(LATE_TESTS)'

# The docs' screenshots, made again from the report pages' browser test.
screenshots: assets
	cd webui && SSDBENCH_SCREENSHOTS=$(CURDIR)/docs/screenshots $(PYTEST) -q tests/browser/test_report_pages.py

bench: assets fio
	cd webui && $(FIO_PATH) $(PYTHON) bench/bench_engine.py
	cd webui && $(FIO_PATH) $(PYTHON) bench/bench_host_cost.py
	cd webui && $(FIO_PATH) $(PYTHON) bench/bench_playback.py
	cd webui && $(FIO_PATH) $(PYTHON) bench/bench_testbeds.py
	cd webui && $(FIO_PATH) $(PYTHON) bench/bench_web.py
	cd webui && $(FIO_PATH) $(PYTHON) bench/bench_lab.py
	cd webui && $(FIO_PATH) $(PYTHON) bench/bench_lab_pages.py
	cd webui && $(PYTHON) bench/bench_pages.py
	cd webui && $(FIO_PATH) $(PYTHON) bench/bench_repeat.py
	@$(MAKE) --no-print-directory bench-vm

# A local lab on a real PostgreSQL of its own in build/lab (Debian's postgresql package), on port 8090.
lab:
	cd webui && $(PYTHON) -m ssdbench.cli lab local $(CURDIR)/build/lab --host $(LAB_HOST) --port $(LAB_PORT)

# The VM test image: Debian 13 packages, the image's own BusyBox, the same
# overlay/ and webui/ as the Buildroot image (board/vm/). The base (packages),
# BusyBox and the image (overlay, package, release) are rebuilt separately,
# each only when its inputs change.
VM_DIR = build/vm
# The VM's fio: make fio's (the image's 3.41 with its patches, static), which
# build-image.sh puts in place of Debian's (trixie's 3.39). Empty: Debian's.
VM_FIO ?= $(FIO_DIR)/bin/fio
VM_BASE_INPUTS = board/vm/build-base.sh board/vm/packages board/vm/rootfs/etc/modules
VM_IMAGE_INPUTS = board/vm/build-image.sh board/ssdbench/post-build.sh board/ssdbench/ssdbench.conf $(VENDOR)/uPlot.LICENSE \
	$(VM_DIR)/version $(VM_DIR)/busybox $(VM_FIO) $(shell find overlay board/vm/rootfs webui/ssdbench -type f -not -path '*/__pycache__/*')

vm-image: $(VM_DIR)/stick.img

$(VM_DIR)/base.tar: $(VM_BASE_INPUTS)
	@mkdir -p $(@D)
	board/vm/build-base.sh $@

# The appliance's BusyBox, from Debian's source with board/ssdbench/busybox.config.
$(VM_DIR)/busybox: board/vm/build-busybox.sh board/ssdbench/busybox.config
	@mkdir -p $(@D)
	board/vm/build-busybox.sh $@

# vmlinuz, initrd.img and versions.txt are made with stick.img, which is written last.
$(VM_DIR)/stick.img: $(VM_DIR)/base.tar $(VM_IMAGE_INPUTS)
	board/vm/build-image.sh $(VM_DIR)/base.tar $(VM_DIR)/busybox $(VM_DIR) $(VERSION) $(VM_FIO)
	@ls -l $(VM_DIR)/vmlinuz $(VM_DIR)/initrd.img $(VM_DIR)/stick.img

# The release name is in the image: a new one rebuilds it.
$(VM_DIR)/version: FORCE
	@mkdir -p $(@D)
	@echo '$(VERSION)' | cmp -s - $@ || echo '$(VERSION)' > $@

demo: $(VM_DIR)/demo/stick.img
	board/vm/demo.sh $(VM_DIR)

# The demo's stick keeps its results from one demo to the next, until a new image replaces it.
$(VM_DIR)/demo/stick.img: $(VM_DIR)/stick.img
	mkdir -p $(@D)
	cp --sparse=always $< $@

test-vm: $(VM_DIR)/stick.img
	cd webui && $(PYTEST) -q -s --durations=0 vmtests/test_vm.py

# The power-cut test of make test-vm, with smoke x5 as a repeatability bench in its last boot (make test runs
# the bench's short mode on the host): how far smoke's figures repeat on the VM's NVMe, in build/vm-cov-smoke.txt.
# Then a boot of its own for the temperature bench (bench/bench_temperature_poll.py in the VM): QD32 random read
# on the AHCI and NVMe drives with and without a temperature read once a second, in build/vm-temperature-poll.txt.
bench-vm: $(VM_DIR)/stick.img
	cd webui && SSDBENCH_VM_REPEAT=5 $(PYTEST) -q -s vmtests/test_vm.py -k power_cut
	cd webui && $(PYTEST) -q -s vmtests/test_temperature_poll.py

# The boot test: the release stick, assembled by board/ssdbench/post-image.sh
# from its genimage.cfg and grub.cfg, out of Debian stand-ins for what
# Buildroot builds (board/boottest/): the VM image's Debian kernel and its
# initrd, Debian's GRUB. Booted with SeaBIOS and with OVMF.
BOOT_DIR = build/boot

$(BOOT_DIR)/stick.img: $(VM_DIR)/stick.img board/boottest/build-stick.sh \
		board/boottest/support/scripts/genimage.sh board/ssdbench/post-image.sh \
		board/ssdbench/genimage.cfg board/ssdbench/grub.cfg configs/ssdbench_x86_64_defconfig \
		board/ssdbench/signing-key.sh board/ssdbench/sbat.csv
	board/boottest/build-stick.sh $(VM_DIR) $(BOOT_DIR) $(VERSION)

# With them, the two cheap cases of the Secure Boot test (test-boot-sb): the stick's EFI files, and MokManager
# opening at a first boot with Secure Boot on (14 s: the firmware and shim only).
BOOT_SB_CHEAP = vmtests/test_boot_sb.py::test_the_stick_lays_out_shim_mokmanager_grub_and_the_certificate_and_no_key \
	vmtests/test_boot_sb.py::test_with_an_empty_moklist_mokmanager_opens_and_nothing_boots

test-boot: $(BOOT_DIR)/stick.img
	cd webui && $(PYTEST) -q -s vmtests/test_boot.py $(BOOT_SB_CHEAP)

# The same stick booted with Secure Boot on (OVMF with Microsoft's keys): shim, MokManager, GRUB and the kernel
# signed by the build's key. Not part of make test (TCG emulates Secure Boot's firmware slowly); the MokManager
# screen goes to docs/screenshots/.
test-boot-sb: $(BOOT_DIR)/stick.img
	cd webui && SSDBENCH_SCREENSHOTS=$(CURDIR)/docs/screenshots $(PYTEST) -q -s vmtests/test_boot_sb.py

.PHONY: FORCE
FORCE:

include buildroot.mk
