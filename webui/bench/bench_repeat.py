"""make bench, repeatability part: how far a suite's figures repeat, against plain fio's as the floor.

A repeat set of a suite (run/repeat.py), N runs on one block device, and interleaved with it plain fio on the
same job files: as each run ends (as the next starts, before its idle, and once after the set), what that run
stored in its step folders is played again in its step order: its purge and TRIM steps' commands as they
recorded them, each job file with plain `fio --output-format=json`. No idle, no quiet-OS controls or CPU
pinning, nothing else of ssdbench's: what varies from one plain pass to the next is the drive, the host and fio,
the floor under the set's spread. A trace's job file plays whole, in one fio, not in parts as run/playback.py
plays it: the same thing where the trace has one part (smoke's).

Per headline figure (results/headline.py) the table gives the set's CoV (results/repeatability.py) and plain
fio's CoV of the same job's same figure, read from plain fio's JSON by the same rule, and their ratio. A figure
that is not one fio job's throughput or latency (a steady-state average, a zone sweep's, a trace's, Mixed
Burst's) has no plain-fio counterpart. Nothing is judged against a threshold: the bench measures.

Needs root and fio. Without --drive it makes a loop device of --size over a sparse file. --json writes the whole
result; the last line printed is a short one. --short (make test) runs a tiny suite twice on a small loop
device and checks that every part works, not the figures.
"""

import argparse
import dataclasses
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from ssdbench.cli import progress_printer
from ssdbench.drives import discovery
from ssdbench.human import figure
from ssdbench.results import headline, repeatability, store, validity
from ssdbench.run import fio_output, repeat, workload
from ssdbench.run.plan import DUT_VAR
from ssdbench.suites import locked

HERE = os.path.dirname(os.path.abspath(__file__))
SHORT_SUITE = os.path.join(HERE, "repeat-short.toml")
# Steps that run no job file: their recorded command plays again as it is.
COMMANDS = ("purge", "trim")


def sh(*argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw).stdout


def copy_input(step_dir, name, scratch):
    """A file the job file reads (a trace's or Mixed Burst's iolog), into the scratch folder; playback packs a
    trace's with gzip once played."""
    target = os.path.join(scratch, name)
    if os.path.exists(os.path.join(step_dir, name)):
        shutil.copy(os.path.join(step_dir, name), target)
        return
    with gzip.open(os.path.join(step_dir, f"{name}.gz"), "rb") as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst)


def plain_fio(step, step_dir, dev, scratch):
    """fio's final JSON document of the step's stored job file, played with plain fio in a scratch folder (its
    logs go there, not into the run's)."""
    name = f"{step['key']}.fio"
    os.makedirs(scratch)
    shutil.copy(os.path.join(step_dir, name), scratch)
    try:
        for _, options in validity.fio_jobs(step["job_file"]):
            if "read_iolog" in options:
                copy_input(step_dir, options["read_iolog"], scratch)
        proc = subprocess.run(
            ["fio", "--output-format=json", name],
            cwd=scratch,
            env=dict(os.environ, **{DUT_VAR: dev}),
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            sys.exit(f"bench: plain fio on {step['key']}'s job file failed: {proc.stderr.strip()}")
        return fio_output.fio_result(proc.stdout)
    finally:
        shutil.rmtree(scratch)


def plain_pass(data_dir, run_id, dev, work):
    """Plain fio over what run `run_id` stored, in its step order. Returns its headline figures, as
    headline.figures gives a run's: only fio jobs' throughput and latency."""
    run = store.get_run(store.connect(data_dir), run_id)
    played = []
    for step in run["steps"]:
        if step["kind"] in COMMANDS:
            sh(*step["detail"]["command"])
            continue
        doc = plain_fio(step, os.path.join(data_dir, step["out_dir"]), dev, os.path.join(work, "plain"))
        if step["kind"] in headline.JOB_KINDS:
            played.append({**step, "metrics": [dataclasses.asdict(m) for m in fio_output.fio_metrics(doc)]})
    return headline.figures({"steps": played})


def bench(data_dir, suite, times, dev, confirm, destroy_data, work):
    """The repeat set with a plain pass after each of its runs: (the set's summary, plain values by figure key,
    seconds of each plain pass)."""
    runs, plain, seconds = [], {}, []

    def play(run_id):
        started = time.monotonic()
        for f in plain_pass(data_dir, run_id, dev, work):
            plain.setdefault(f.key, []).append(f.value)
        seconds.append(time.monotonic() - started)
        print(f"plain fio after run {run_id}: {seconds[-1]:.0f} s", file=sys.stderr, flush=True)

    def on_run(position, run_id):
        if runs:  # the run before it ended done, or the set would have ended
            play(runs[-1])
        runs.append(run_id)
        print(f"run {position} of {times}: run {run_id}", file=sys.stderr, flush=True)

    repeat_id, state, error = repeat.run_in_foreground(
        data_dir,
        suite,
        times,
        dev,
        confirm,
        destroy_data=destroy_data,
        on_progress=progress_printer(suite, sys.stderr),
        on_run=on_run,
    )
    if state == "done":
        play(runs[-1])
    else:
        print(f"repeat set {repeat_id}: {state}: {error}", file=sys.stderr)
    return repeatability.summary(store.connect(data_dir), repeat_id), plain, seconds


def rows(summary, plain):
    """Per headline figure: the set's spread, plain fio's (None: no plain counterpart) and CoV ratio."""
    out = []
    for f in summary["figures"]:
        values = plain.get(f["key"])
        floor = {**repeatability.spread(values), "values": values} if values else None
        ours, theirs = f["cov_percent"], floor and floor["cov_percent"]
        out.append(
            {
                "key": f["key"],
                "unit": f["unit"],
                "kind": f["kind"],
                "ssdbench": {k: f[k] for k in ("n", "mean", "stdev", "cov_percent", "min", "max", "values")},
                "plain_fio": floor,
                "cov_ratio": ours / theirs if ours is not None and theirs else None,
            }
        )
    return out


def two(value):
    return "–" if value is None else f"{value:.2f}"


def print_table(table):
    print(f"{'figure':<44} {'unit':<6} {'ssdbench mean':>13} {'CoV %':>6} {'plain mean':>13} {'CoV %':>6} {'ratio':>6}")
    for r in table:
        ours, theirs = r["ssdbench"], r["plain_fio"] or {}
        print(
            f"{r['key']:<44} {r['unit']:<6} {figure(ours['mean']):>13} {two(ours['cov_percent']):>6} "
            f"{figure(theirs.get('mean')):>13} {two(theirs.get('cov_percent')):>6} {two(r['cov_ratio']):>6}"
        )


def measured(summary, table, times):
    """Whether every part measured: the set done with every run counted, a CoV for every figure, and plain
    fio's for every fio job's figure."""
    jobs = [r for r in table if r["kind"] != headline.DERIVED]
    return (
        summary["state"] == "done"
        and len(summary["counted"]) == times
        and all(r["ssdbench"]["cov_percent"] is not None for r in table)
        and all(r["plain_fio"] and r["plain_fio"]["n"] == times for r in jobs)
        and bool(jobs)
    )


def run_seconds(run):
    """A run's time from its first step's start (its idle first) to its end: the set adds a run, and stamps its
    start, before on_run plays plain fio on the run before it."""
    return run["finished_at"] - run["steps"][0]["started_at"]


def loop_device(work, size):
    img = os.path.join(work, "disk.img")
    sh("truncate", "-s", size, img)
    return sh("losetup", "-f", "--show", img).strip()


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--suite", default="quick", help="a shipped suite (default quick)")
    args.add_argument("--suite-file", help="a suite file instead (with --non-standard)")
    args.add_argument("--non-standard", action="store_true", help="allow a suite that is not the locked one")
    args.add_argument("--times", type=int, default=5, help="runs in the set (default 5)")
    args.add_argument("--drive", help="the block device to test (all its data is lost); default: a loop device")
    args.add_argument("--confirm", help="the drive's confirmation id, as `ssdbench drives` gives it (with --drive)")
    args.add_argument("--destroy-data", action="store_true", help="the drive holds data, and may lose it")
    args.add_argument("--size", default="10G", help="the loop device's size (default 10G: quick's 8 GiB and more)")
    args.add_argument("--work-dir", help="where the loop device's sparse file and the data folder go")
    args.add_argument("--json", help="write the whole result here")
    args.add_argument("--short", action="store_true", help="a tiny suite twice: check that it works (make test)")
    a = args.parse_args()
    if a.short:
        a.suite_file, a.non_standard, a.times, a.size = SHORT_SUITE, True, 2, "512M"
    if os.geteuid() != 0:
        sys.exit("bench: needs root for the block device")
    if a.drive and not a.confirm:
        sys.exit("bench: --drive destroys all data on the drive; name it with --confirm")
    suite = locked.load(a.suite, path=a.suite_file, allow_non_standard=a.non_standard)
    suite = workload.verified(suite, allow_non_standard=a.non_standard)
    work = tempfile.mkdtemp(prefix="ssdbench-repeat-", dir=a.work_dir)
    dev = a.drive or loop_device(work, a.size)
    load_start, started = os.getloadavg(), time.monotonic()
    try:
        confirm = a.confirm or discovery.find(dev)["confirm_id"]
        print(f"{suite.name} x{a.times} on {dev}, plain fio interleaved; load {load_start}", file=sys.stderr)
        summary, plain, plain_s = bench(os.path.join(work, "data"), suite, a.times, dev, confirm, a.destroy_data, work)
        db = store.connect(os.path.join(work, "data"))
        run_s = [run_seconds(store.get_run(db, i)) for i in summary["counted"]]
    finally:
        if not a.drive:
            sh("losetup", "-d", dev)
        shutil.rmtree(work)
    table = rows(summary, plain)
    result = {
        "suite": suite.name,
        "suite_hash": summary["suite_hash"],
        "times": a.times,
        "device": dev,
        "drive": {k: summary["drive"].get(k) for k in ("model", "transport", "capacity_bytes")},
        "repeat": {k: summary[k] for k in ("id", "state", "error", "counted")},
        "load_start": load_start,
        "load_end": os.getloadavg(),
        "seconds": time.monotonic() - started,
        "ssdbench_run_s": run_s,
        "plain_pass_s": plain_s,
        "figures": table,
        "ok": measured(summary, table, a.times),
    }
    print_table(table)
    print(f"load average (1, 5, 15 min) at the start {load_start}, at the end {result['load_end']}")
    print(
        f"{result['seconds']:.0f} s in all: ssdbench runs {', '.join(f'{s:.0f}' for s in run_s)} s; "
        f"plain fio passes {', '.join(f'{s:.0f}' for s in plain_s)} s"
    )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    with_plain = sum(r["plain_fio"] is not None for r in table)
    short = {k: result[k] for k in ("ok", "times", "seconds")}
    print(json.dumps({**short, "state": summary["state"], "figures": len(table), "with_plain": with_plain}))
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
