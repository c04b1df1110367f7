"""make bench, engine part: is the harness ever the bottleneck?

1. IOPS that ssdbench reports against a plain fio run of the job file it saved, on the
   same loop device: median of 5 pairs, run in alternating order. Must be >= 0.98.
2. Ingesting two steps with over 2000 samples per log (as two 2000 s consistency tests at one
   sample a second give) into SQLite: must take under 1 s.
Needs root (loop devices) and fio.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from ssdbench.results import store
from ssdbench.run import fio, fio_output, plan
from ssdbench.suites import locked

HERE = os.path.dirname(os.path.abspath(__file__))
PAIRS = 5
MIN_RATIO = 0.98
MAX_INGEST_S = 1.0
# Not a locked suite: only the carrier of the long steps' job files.
LONG = locked.Suite(
    "bench-ingest", {"version": 1, "fio": {"ioengine": "libaio", "direct": 1, "log_avg_msec": 1}}, "0" * 64, False
)


def sh(*argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw).stdout


def ssdbench_iops(dev, data_dir):
    sh(
        sys.executable,
        "-m",
        "ssdbench.cli",
        "run",
        "--suite-file",
        os.path.join(HERE, "harness.toml"),
        "--non-standard",
        "--drive",
        dev,
        "--confirm",
        os.path.basename(dev),
        "--data-dir",
        data_dir,
    )
    db = store.connect(data_dir)
    run_id = db.execute("SELECT max(id) FROM runs").fetchone()[0]
    run = store.get_run(db, run_id)
    step = run["steps"][0]
    iops = next(m["value"] for m in step["metrics"] if m["name"] == "read.iops")
    return iops, step["job_file"]


def plain_fio_iops(dev, job_file, work):
    path = os.path.join(work, "plain.fio")
    with open(path, "w") as f:
        f.write(job_file)
    out = sh("fio", "--output-format=json", path, cwd=work, env=dict(os.environ, SSDBENCH_DUT=dev))
    return fio_output.fio_result(out)["jobs"][0]["read"]["iops"]


def bench_overhead(dev, work):
    """Pairs in alternating order, so that neither side always runs on a warmer device."""
    ratios = []
    job = None
    for i in range(PAIRS):
        data_dir = os.path.join(work, f"data{i}")
        if i % 2 == 0:
            ours, job = ssdbench_iops(dev, data_dir)
            plain = plain_fio_iops(dev, job, work)
        else:
            plain = plain_fio_iops(dev, job, work)
            ours, job = ssdbench_iops(dev, data_dir)
        ratios.append(ours / plain)
        print(f"  pair {i + 1}: ssdbench {ours:,.0f} IOPS, plain fio {plain:,.0f} IOPS, ratio {ours / plain:.4f}")
    return statistics.median(ratios)


def make_long_step(dev, work, name):
    """A real fio step whose logs hold over 2000 samples each (1 ms averaging over 3 s)."""
    step = {
        "id": name,
        "title": name,
        "rw": "randwrite",
        "bs": "4k",
        "iodepth": 32,
        "numjobs": 1,
        "span": {"offset": "0", "size": "100%"},
        "runtime": 3,
        "data": "incompressible",
    }
    opts = plan.fio_options(step, 0, 64 * 1024**2)
    out_dir = os.path.join(work, name)
    outcome = fio.run(plan.job_file(LONG, step, opts), name, out_dir, dev, lambda *a: None, lambda: False)
    assert outcome.state == "done", outcome.error
    return out_dir


def bench_ingest(dev, work):
    dirs = [make_long_step(dev, work, f"consistency-{n}") for n in (1, 2)]
    db = store.connect(os.path.join(work, "ingest"))
    steps = [plan.PlanStep(i, os.path.basename(d), "fio", os.path.basename(d), 3.0) for i, d in enumerate(dirs)]
    run_id = store.create_run(db, {"path": dev}, LONG, steps)
    started = time.perf_counter()
    for i, out_dir in enumerate(dirs):
        outcome = fio.collect(out_dir, 0)
        store.finish_step(
            db, store.step_id(db, run_id, i), outcome.state, metrics=outcome.metrics, series=outcome.series
        )
    elapsed = time.perf_counter() - started
    points = db.execute("SELECT count(*) FROM points").fetchone()[0]
    per_log = max(len(p) for _, _, _, p in fio.read_logs(dirs[0]))
    return elapsed, points, per_log


def main():
    if os.geteuid() != 0:
        sys.exit("bench: needs root for loop devices")
    work = tempfile.mkdtemp(prefix="ssdbench-bench-")
    img = os.path.join(work, "disk.img")
    sh("truncate", "-s", "1G", img)
    dev = sh("losetup", "-f", "--show", img).strip()
    try:
        sh("fio", "--name=prefill", f"--filename={dev}", "--rw=write", "--bs=1M", "--direct=1", "--size=1G")
        print(f"harness overhead on {dev} (1 GiB loop device), {PAIRS} pairs:")
        ratio = bench_overhead(dev, work)
        print(f"IOPS ratio ssdbench / plain fio, median of {PAIRS} pairs: {ratio:.4f} (must be >= {MIN_RATIO})")
        elapsed, points, per_log = bench_ingest(dev, work)
        print(
            f"ingest of 2 steps, {per_log} samples per log, {points} points in all: {elapsed * 1000:.0f} ms "
            f"(must be < {MAX_INGEST_S * 1000:.0f} ms)"
        )
    finally:
        sh("losetup", "-d", dev)
        shutil.rmtree(work)
    ok = ratio >= MIN_RATIO and elapsed < MAX_INGEST_S and per_log >= 2000
    print(json.dumps({"iops_ratio": ratio, "ingest_s": elapsed, "ok": ok}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
