# ssdbench: the developer entry points. See README.md.
PYTHON ?= python3
PYTEST ?= $(PYTHON) -m pytest
# The release name, the one source for the image name, /etc/ssdbench-release
# and the package version: git describe.
VERSION ?= $(shell git -C $(CURDIR) describe --tags --always --dirty 2>/dev/null || echo unknown)
VERSION := $(VERSION)
# uPlot draws the charts. It is served from the app's own static files, never from a CDN,
# and not committed: fetched from npm at this pinned version and checked against its hash.
UPLOT_VERSION = 1.6.31
UPLOT_SHA256 = 015d4be9095072922bc31d8c63f93bc1b7cd5b27d14d17a1708ff76775f9eb90
VENDOR = webui/ssdbench/static/vendor

.PHONY: help setup assets test bench

help:
	@echo "make setup   install the ssdbench package (editable) with its test dependencies"
	@echo "make assets  fetch the pinned uPlot into $(VENDOR) (needs npm)"
	@echo "make test    run every test (needs root: loop devices, real fio)"
	@echo "make bench   measure the harness against plain fio, and result ingestion"
	@echo "make image   build the USB stick image with Buildroot: output/images/ssdbench-$(VERSION).img"
	@echo "make br-check  check the Buildroot tree (needs BUILDROOT_DIR=/path/to/buildroot)"

setup:
	$(PYTHON) -m pip install -q -e 'webui[test]'

assets: $(VENDOR)/uPlot.iife.min.js

$(VENDOR)/uPlot.iife.min.js:
	rm -rf webui/build/uplot && mkdir -p webui/build/uplot $(VENDOR)
	cd webui/build/uplot && npm pack --silent uplot@$(UPLOT_VERSION) >/dev/null
	echo "$(UPLOT_SHA256)  webui/build/uplot/uplot-$(UPLOT_VERSION).tgz" | sha256sum -c --quiet
	tar -xzf webui/build/uplot/uplot-$(UPLOT_VERSION).tgz -C webui/build/uplot
	cp webui/build/uplot/package/dist/uPlot.min.css $(VENDOR)/
	cp webui/build/uplot/package/dist/uPlot.iife.min.js $(VENDOR)/

test: assets
	@$(MAKE) --no-print-directory br-check
	cd webui && $(PYTEST) -q

bench: assets
	cd webui && $(PYTHON) bench/bench_engine.py
	cd webui && $(PYTHON) bench/bench_web.py

include buildroot.mk
