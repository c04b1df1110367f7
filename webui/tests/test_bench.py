"""make bench keeps working: its short mode runs here, so that a change in the engine or the web breaks
the tests rather than the benchmark. The figures are checked by make bench itself, on a quiet machine."""

import json
import os
import subprocess
import sys

from conftest import needs_root

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench")


def short_bench(name):
    proc = subprocess.run(
        [sys.executable, os.path.join(BENCH, name), "--short"], capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@needs_root()
def test_the_engine_bench_runs():
    result = short_bench("bench_engine.py")
    assert result["ok"] and result["iops_ratio"] > 0 and result["ingest_s"] > 0


def test_the_host_cost_bench_runs():
    result = short_bench("bench_host_cost.py")
    rows = {r["row"]: r for r in result["rows"]}
    # --short: the rows the suites write with, on make fio's fio (scramble_buffers=hash)
    assert result["ok"] and set(rows) == {"now: incompressible", "now: compressible"}
    assert result["data"]["options"] == "scramble_buffers=hash"
    assert all(us > 0 for r in rows.values() for us in r["us_per_io"].values())
    assert all(set(r["us_per_io"]) == {"4k", "128k", "1m"} for r in rows.values())


@needs_root()
def test_the_playback_bench_runs():
    result = short_bench("bench_playback.py")
    # --short: smoke's trace, played with fio's own handoff (make fio's start_fifo) and measured
    (replay,) = result["replays"]
    assert result["ok"] and replay["handoff"] == "start_fifo, done_fifo" and replay["segments"] > 1
    assert replay["wall_s"] > 0 and replay["ios"] > 0 and replay["longest_gap_s"] >= 0


def test_the_web_bench_runs():
    result = short_bench("bench_web.py")
    assert result["ok"] and all(result[k] > 0 for k in ("report_json_ms", "report_page_ms", "bundle_ms"))


@needs_root()
def test_the_appliance_pages_bench_runs():
    result = short_bench("bench_pages.py")
    assert result["ok"] and len(result["pages"]) == 5 and all(p["p95_ms"] > 0 for p in result["pages"].values())


@needs_root()
def test_the_lab_bench_runs():
    result = short_bench("bench_lab.py")
    assert result["ok"] and result["uploads_per_s"] > 0 and result["p99_ms"] > 0


@needs_root()
def test_the_lab_pages_bench_runs():
    result = short_bench("bench_lab_pages.py")
    assert result["ok"] and result["runs"] == 2000 and all(p["p95_ms"] > 0 for p in result["pages"].values())


@needs_root()
def test_the_repeat_bench_runs():
    result = short_bench("bench_repeat.py")
    assert result["ok"] and result["state"] == "done" and result["times"] == 2
    assert result["figures"] > 0 and result["with_plain"] == result["figures"]
