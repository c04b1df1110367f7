# ssdbench: the developer entry points. See README.md.
PYTHON ?= python3
PYTEST ?= $(PYTHON) -m pytest

.PHONY: help setup test bench

help:
	@echo "make setup   install the ssdbench package (editable) with its test dependencies"
	@echo "make test    run every test (needs root: loop devices, real fio)"
	@echo "make bench   measure the harness against plain fio, and result ingestion"

setup:
	$(PYTHON) -m pip install -q -e 'webui[test]'

test:
	cd webui && $(PYTEST) -q

bench:
	cd webui && $(PYTHON) bench/bench_engine.py
