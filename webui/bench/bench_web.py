"""make bench, web part: is the report or the live view ever slow?

1. The report of a run with two 2000 s consistency steps (each with the five per-second logs fio
   writes: iops, bw, lat, clat, slat, and its latency histogram), a fill, the four corners, three sweeps,
   transfer-size curves, a trace, a Mixed Burst and a temperature series: the JSON document
   (GET /api/runs/<id>) must take under 200 ms, and so must its page once the run ended (its summary drawn
   on the server), the compare page of it and another run, and the bench page. Its offline report.html
   must stay under 2 MB.
2. The live progress endpoint (GET /api/runs/<id>/progress): under 20 ms.
3. The same run's result bundle (GET /api/runs/<id>/bundle: every CSV, result.json, the offline
   report.html, zipped): under 5 s.
Each figure is the median of repeated requests through Flask's test client on a real SQLite file,
so it is the server's own time. Needs no root. --short (make test) makes each request a few times and
checks that every part works, not the times.
"""

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import namedtuple
from types import SimpleNamespace

from ssdbench.results import offline_report, store
from ssdbench.results.document import run_document
from ssdbench.run.fio_output import Metric, plat_value
from ssdbench.web import create_app

MAX_REPORT_MS = 200
MAX_PROGRESS_MS = 20
MAX_BUNDLE_MS = 5000
MAX_REPORT_HTML_BYTES = 2 * 10**6
BUNDLE_REQUESTS = 5
REPORT_REQUESTS = 30
PROGRESS_REQUESTS = 300
PIN = "000000"
Step = namedtuple("Step", "index id kind title estimate_s job_file")
LOGS = (
    ("iops", "IOPS", 30000.0),
    ("bw", "KiB/s", 120000.0),
    ("lat", "ns", 1.0e6),
    ("clat", "ns", 0.99e6),
    ("slat", "ns", 1.0e4),
)


def per_second(seconds, base):
    """A wobbling once-a-second curve, as a drive's log looks."""
    return [(t * 1000, base * (1 + 0.3 * ((t * 7919) % 13) / 13)) for t in range(seconds)]


def fio_step(key, seconds, direction="write"):
    metrics = [
        Metric(f"{direction}.{name}", 1234.5678, unit, f"/jobs/0/{direction}/{name}")
        for name, unit in (
            ("iops", "IOPS"),
            ("bw", "B/s"),
            ("mb_s", "MB/s"),
            ("lat_mean", "ns"),
            ("lat_max", "ns"),
            ("lat_p99", "ns"),
            ("lat_p99.99", "ns"),
        )
    ]
    series = [
        (f"{direction}.{log}", unit, f"{key}_{log}.1.log:direction=1", per_second(seconds, base))
        for log, unit, base in LOGS
    ]
    # fio's histogram bins that hold IOs: a few hundred of its 1856
    hist = [(float(plat_value(i)), 1.0 + i % 17) for i in range(600, 900)]
    series.append((f"{direction}.clat_hist", "IOs", f"{key}_clat_hist.1.log:direction=1", hist, "ns"))
    return metrics, series


def synthetic_run(data_dir):
    """A standard-sized run written through the store, as the engine would leave it mid-way."""
    db = store.connect(data_dir)
    drive = {"path": "/dev/nvme0n1", "model": "Bench SSD", "serial": "B1", "capacity_bytes": 10**12}
    drive["transport"] = "nvme"
    results = {"seq-fill": fio_step("seq-fill", 900)}
    for key in ("rand-write-4k-qd3-comp", "rand-write-4k-qd3", "rand-write-4k-qd32", "rand-read-4k"):
        results[key] = fio_step(key, 180, "read" if "read" in key else "write")
    for key in ("seq-read-128k", "seq-write-128k"):
        results[key] = fio_step(key, 60, "read" if "read" in key else "write")
    results["xfer"] = (
        [],
        [
            (f"{d}.qd{qd}.mb_s", "MB/s", "fio.json", [(512 << i, 100.0 * i) for i in range(15)], "bytes")
            for d in ("read", "write")
            for qd in (1, 32)
        ],
    )
    results["consistency"] = fio_step("consistency", 2000)
    results["consistency-spare"] = fio_step("consistency-spare", 2000)
    for metrics, _ in (results["consistency"], results["consistency-spare"]):
        metrics.append(Metric("steady.avg_iops", 30000.0, "IOPS", "mean of fio's write.iops log for t >= 1400 s"))
    results["trace-heavy"] = (
        [Metric("all.mb_s", 250.0, "MB/s", "all.bytes / all.busy_s / 1e6"), Metric("all.busy_s", 900.0, "s", "x")],
        [],
    )
    results["burst"] = ([Metric("burst.read.service_s", 2.5, "s", "sum of the bursts")], [])
    for key in ("sweep-clean", "sweep-dirty", "sweep-trimmed"):
        results[key] = (
            [Metric("write.avg_mb_s", 400.0, "MB/s", "mean over 200 zones")],
            [
                (f"{d}.mb_s", "MB/s", "fio.json", [(z * 5 * 10**9, 400.0) for z in range(200)], "offset")
                for d in ("write", "read")
            ],
        )
    steps = [Step(i, key, "fio", key, 60.0, f"[{key}]\n") for i, key in enumerate(results)]
    suite = SimpleNamespace(name="standard", sha256="0" * 64, locked=True)
    run_id = store.create_run(db, drive, suite, steps)
    store.add_series(db, run_id, None, "temperature", "°C", "hwmon", per_second(6000, 40.0))
    for i, (metrics, series) in enumerate(results.values()):
        store.finish_step(
            db, store.start_step(db, run_id, i, f"runs/{run_id}/{i:02d}"), "done", metrics=metrics, series=series
        )
    store.update_progress(db, run_id, len(steps) - 1, 97.5, 60.0, 30000.0, 1.2e8)
    points = db.execute("SELECT count(*) FROM points").fetchone()[0]
    db.close()
    return run_id, points


def median_ms(client, url, count):
    times = []
    for _ in range(count):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return statistics.median(times), len(response.data)


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--short", action="store_true", help="a few requests each: check that it works (make test)")
    short = args.parse_args().short
    report_requests, progress_requests, bundle_requests = (
        (3, 3, 1)
        if short
        else (
            REPORT_REQUESTS,
            PROGRESS_REQUESTS,
            BUNDLE_REQUESTS,
        )
    )
    work = tempfile.mkdtemp(prefix="ssdbench-bench-web-")
    try:
        run_id, points = synthetic_run(work)
        client = create_app({"SSDBENCH_DATA_DIR": work, "SSDBENCH_PIN": PIN}).test_client()
        token = client.get("/api/session").get_json()["csrf_token"]
        assert client.post("/api/login", json={"pin": PIN}, headers={"X-CSRF-Token": token}).status_code == 200
        report_ms, report_bytes = median_ms(client, f"/api/runs/{run_id}", report_requests)
        progress_ms, _ = median_ms(client, f"/api/runs/{run_id}/progress", progress_requests)
        db = store.connect(work)
        store.finish_run(db, run_id, "done")  # the report page, a bundle and the bench are of an ended run
        other, _ = synthetic_run(work)
        store.finish_run(db, other, "done")
        page_ms, _ = median_ms(client, f"/runs/{run_id}", report_requests)
        compare_ms, _ = median_ms(client, f"/compare?runs={run_id},{other}", report_requests)
        bench_ms, _ = median_ms(client, "/bench", report_requests)
        html_bytes = len(offline_report.render(run_document(db, run_id)))
        db.close()
        bundle_ms, bundle_bytes = median_ms(client, f"/api/runs/{run_id}/bundle", bundle_requests)
    finally:
        shutil.rmtree(work)
    print(
        f"report JSON of a run with {points} points ({report_bytes / 1e6:.1f} MB), median of {report_requests}: "
        f"{report_ms:.1f} ms (must be < {MAX_REPORT_MS} ms)"
    )
    print(f"report page, median of {report_requests}: {page_ms:.1f} ms (must be < {MAX_REPORT_MS} ms)")
    print(
        f"compare page of two such runs: {compare_ms:.1f} ms, bench page: {bench_ms:.1f} ms (each < {MAX_REPORT_MS} ms)"
    )
    print(f"offline report.html: {html_bytes / 1e6:.2f} MB (must be < {MAX_REPORT_HTML_BYTES / 1e6:.0f} MB)")
    print(f"live progress, median of {progress_requests}: {progress_ms:.2f} ms (must be < {MAX_PROGRESS_MS} ms)")
    print(
        f"result bundle ({bundle_bytes / 1e6:.1f} MB zip), median of {bundle_requests}: {bundle_ms:.0f} ms "
        f"(must be < {MAX_BUNDLE_MS} ms)"
    )
    ok = short or (
        report_ms < MAX_REPORT_MS
        and page_ms < MAX_REPORT_MS
        and compare_ms < MAX_REPORT_MS
        and bench_ms < MAX_REPORT_MS
        and html_bytes < MAX_REPORT_HTML_BYTES
        and progress_ms < MAX_PROGRESS_MS
        and bundle_ms < MAX_BUNDLE_MS
    )
    print(
        json.dumps(
            {
                "report_json_ms": report_ms,
                "report_page_ms": page_ms,
                "compare_page_ms": compare_ms,
                "bench_page_ms": bench_ms,
                "report_html_bytes": html_bytes,
                "progress_ms": progress_ms,
                "bundle_ms": bundle_ms,
                "ok": ok,
            }
        )
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
