"""make bench, engine part: is the harness ever the bottleneck?

1. IOPS that ssdbench reports against a plain fio run of the job file it saved, on the
   same loop device: the median of 9 pairs, run in alternating order, with its spread. Must be >= 0.98.
2. Ingesting two steps with over 2000 samples per log (as two 2000 s consistency tests at one
   sample a second give) into SQLite: must take under 1 s.
Needs root (loop devices) and fio. --short (make test) runs one short pair and the ingest, and checks
that every part works, not the figures: one pair on a busy machine says nothing about the ratio.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from ssdbench.drives import discovery
from ssdbench.results import store
from ssdbench.run import derive, fio, fio_output, plan, quiet
from ssdbench.suites import locked

HERE = os.path.dirname(os.path.abspath(__file__))
PAIRS = 9
MIN_RATIO = 0.98
MAX_INGEST_S = 1.0
# Not a locked suite: only the carrier of the long steps' job files.
LONG = locked.Suite(
    "bench-ingest", {"version": 1, "fio": {"ioengine": "libaio", "direct": 1, "log_avg_msec": 1}}, "0" * 64, False
)


def sh(*argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw).stdout


def ssdbench_iops(dev, data_dir, suite_file):
    sh(
        sys.executable,
        "-m",
        "ssdbench.cli",
        "run",
        "--suite-file",
        suite_file,
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
    """Plain fio on the saved job file, under the same quiet-OS controls as a run: without them the ratio
    would measure the controls (C-states held off, the scheduler, CPU pinning), not the harness."""
    path = os.path.join(work, "plain.fio")
    with open(path, "w") as f:
        f.write(job_file)
    controls = quiet.Quiet(discovery.find(dev))
    controls.apply()
    try:
        out = subprocess.run(
            ["fio", "--output-format=json", path],
            cwd=work,
            env=dict(os.environ, SSDBENCH_DUT=dev),
            preexec_fn=(lambda: os.sched_setaffinity(0, controls.cpus)) if controls.cpus else None,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    finally:
        controls.release()
    return fio_output.fio_result(out)["jobs"][0]["read"]["iops"]


def bench_overhead(dev, work, pairs, suite_file):
    """Pairs in alternating order, so that neither side always runs on a warmer device. Returns the ratios."""
    ratios = []
    job = None
    for i in range(pairs):
        data_dir = os.path.join(work, f"data{i}")
        if i % 2 == 0:
            ours, job = ssdbench_iops(dev, data_dir, suite_file)
            plain = plain_fio_iops(dev, job, work)
        else:
            plain = plain_fio_iops(dev, job, work)
            ours, job = ssdbench_iops(dev, data_dir, suite_file)
        ratios.append(ours / plain)
        print(f"  pair {i + 1}: ssdbench {ours:,.0f} IOPS, plain fio {plain:,.0f} IOPS, ratio {ours / plain:.4f}")
    return ratios


def short_suite(work):
    """The harness suite with a 2 s step, for --short."""
    path = os.path.join(work, "harness-short.toml")
    with open(os.path.join(HERE, "harness.toml")) as f, open(path, "w") as out:
        out.write(f.read().replace("runtime = 8", "runtime = 2"))
    return path


def make_long_step(dev, work, index, name):
    """A real fio step whose logs hold over 2000 samples each (1 ms averaging over 3 s): (plan step, folder)."""
    spec = {
        "id": name,
        "kind": "fio",
        "title": name,
        "rw": "randwrite",
        "bs": "4k",
        "iodepth": 32,
        "numjobs": 1,
        "span": {"offset": "0", "size": "100%"},
        "runtime": 3,
        "data": "incompressible",
    }
    size = 64 * 1024**2
    jobs = [(name, plan.fio_options(spec, 0, size, logs=name))]
    step = plan.PlanStep(index, name, "fio", name, 3.0, spec, 0, size, plan.job_file(LONG, spec, jobs), jobs)
    out_dir = os.path.join(work, name)
    outcome = fio.run(step.job_file, name, out_dir, dev, lambda *a: None, lambda: False)
    assert outcome.state == "done", outcome.error
    return step, out_dir


def bench_ingest(dev, work):
    """The time to turn two finished steps' fio output into metrics and series, and store them."""
    made = [make_long_step(dev, work, i, f"consistency-{i + 1}") for i in range(2)]
    db = store.connect(os.path.join(work, "ingest"))
    run_id = store.create_run(db, {"path": dev}, LONG, [step for step, _ in made])
    started = time.perf_counter()
    for step, out_dir in made:
        metrics, series = derive.step_results(step, out_dir, fio.collect(out_dir, 0).doc, True)
        store.finish_step(db, store.step_id(db, run_id, step.index), "done", metrics=metrics, series=series)
    elapsed = time.perf_counter() - started
    points = db.execute("SELECT count(*) FROM points").fetchone()[0]
    per_log = max(len(p) for *_, p in derive.per_second_series(made[0][1]))
    return elapsed, points, per_log


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--short", action="store_true", help="one short pair: check that it works (make test)")
    short = args.parse_args().short
    if os.geteuid() != 0:
        sys.exit("bench: needs root for loop devices")
    work = tempfile.mkdtemp(prefix="ssdbench-bench-")
    img = os.path.join(work, "disk.img")
    sh("truncate", "-s", "1G", img)
    dev = sh("losetup", "-f", "--show", img).strip()
    try:
        sh("fio", "--name=prefill", f"--filename={dev}", "--rw=write", "--bs=1M", "--direct=1", "--size=1G")
        pairs = 1 if short else PAIRS
        print(f"harness overhead on {dev} (1 GiB loop device), {pairs} pairs:")
        ratios = bench_overhead(dev, work, pairs, short_suite(work) if short else os.path.join(HERE, "harness.toml"))
        ratio = statistics.median(ratios)
        print(
            f"IOPS ratio ssdbench / plain fio, median of {pairs} pairs: {ratio:.4f}, spread {min(ratios):.4f} "
            f"to {max(ratios):.4f} (must be >= {MIN_RATIO})"
        )
        elapsed, points, per_log = bench_ingest(dev, work)
        print(
            f"ingest of 2 steps, {per_log} samples per log, {points} points in all: {elapsed * 1000:.0f} ms "
            f"(must be < {MAX_INGEST_S * 1000:.0f} ms)"
        )
    finally:
        sh("losetup", "-d", dev)
        shutil.rmtree(work)
    ok = (short or ratio >= MIN_RATIO and elapsed < MAX_INGEST_S) and per_log >= 2000
    print(json.dumps({"iops_ratio": ratio, "spread": [min(ratios), max(ratios)], "ingest_s": elapsed, "ok": ok}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
