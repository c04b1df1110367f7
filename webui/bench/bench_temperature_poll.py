"""make bench-vm, temperature part: does reading a drive's temperature once a second disturb a QD32 measurement?

On SATA a temperature read is an ATA command that is not queued (SMART READ DATA, through smartctl): the drive
must finish every queued command before it, so each read drains the NCQ queue (docs/methodology.md, "Heat during
a step"). For each drive: a 4 KiB random read at QD32 (libaio, direct, time-based) played in pairs, once alone and
once beside a reader that takes the drive's temperature once a second with the runner's own read
(drives/health.read_temperature, from the source discovery gives the drive), the order alternated from pair to
pair so that a drift of the host falls on both sides.

Controls, as PATH=SOURCE reads another source than the runner's: under emulation a read's own cost on the host (a
process started, its output parsed) weighs on the figure too, so the same reads of a source beside the drive
(smartctl of another drive) show that part alone; and an NVMe drive's read (`nvme smart-log`: a process, and an
admin command beside its IO queues) shows it without a queue to drain.

Per drive and source: IOPS without and with the reads (mean, lowest, highest), the difference of the means and
pair by pair, fio's 99.9th percentile of completion latency (a drain shows first in the tail), the reads made and
how long each took. Nothing is judged: the bench measures. Needs root, fio and the ssdbench package; reads only,
so it is safe on a drive that holds data. --json writes the whole result.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import threading
import time

from ssdbench.drives import discovery, health

PERCENTILE = "99.900000"


def fio_job(path, seconds):
    return [
        "fio",
        "--name=qd32",
        f"--filename={path}",
        "--rw=randread",
        "--bs=4k",
        "--iodepth=32",
        "--ioengine=libaio",
        "--direct=1",
        f"--runtime={seconds}",
        "--time_based=1",
        "--output-format=json",
    ]


def poll(source, stopped, reads):
    """The runner's sampler, alone: one read of the temperature each second, on a fixed schedule, until stopped;
    each read kept as (its value, the seconds it took)."""
    due = time.monotonic()
    while not stopped.is_set():
        started = time.monotonic()
        value = health.read_temperature(source)
        reads.append((value, time.monotonic() - started))
        due += 1
        stopped.wait(max(0.0, due - time.monotonic()))


def play(path, seconds, source):
    """One run of the job, with the reads beside it when `source` is given: its IOPS, its 99.9th percentile of
    completion latency in µs, and the reads made."""
    reads, stopped = [], threading.Event()
    reader = threading.Thread(target=poll, args=(source, stopped, reads))
    fio = subprocess.Popen(fio_job(path, seconds), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if source:
        reader.start()
    out, err = fio.communicate()
    stopped.set()
    if source:
        reader.join()
    if fio.returncode != 0:
        sys.exit(f"bench: fio on {path} failed: {err.strip()}")
    job = json.loads(out[out.index("{") :])["jobs"][0]["read"]
    return {"iops": job["iops"], "p999_us": job["clat_ns"]["percentile"][PERCENTILE] / 1000, "reads": reads}


def spread(values):
    return {"mean": statistics.fmean(values), "min": min(values), "max": max(values)}


def measure(path, source, pairs, seconds):
    """A drive's pairs with reads of `source` (the drive's own, as discovery gives it to the runner, when None),
    the order alternated: pair 1 without then with, pair 2 with then without, and so on."""
    drive = discovery.find(path)
    source = source or drive["temperature_source"]
    if not source:
        sys.exit(f"bench: {path} has no temperature source to read")
    runs = {"without": [], "with": []}
    for n in range(pairs):
        for polled in (False, True) if n % 2 == 0 else (True, False):
            side = "with" if polled else "without"
            runs[side].append(play(path, seconds, source if polled else None))
            print(
                f"{path} pair {n + 1}, {side} {source}: {runs[side][-1]['iops']:,.0f} IOPS", file=sys.stderr, flush=True
            )
    reads = [r for run in runs["with"] for r in run["reads"]]
    without, with_ = (spread([run["iops"] for run in runs[k]]) for k in ("without", "with"))
    depth = pathlib.Path(f"/sys/block/{os.path.basename(os.path.realpath(path))}/device/queue_depth")
    return {
        "path": path,
        "transport": drive["transport"],
        "model": drive["model"],
        "temperature_source": source,
        "runners_source": source == drive["temperature_source"],
        # 1 on a SATA drive means no NCQ: nothing to drain
        "queue_depth": depth.read_text().strip() if depth.exists() else None,
        "without": without,
        "with": with_,
        "difference_percent": 100 * (with_["mean"] / without["mean"] - 1),
        # each pair's two runs are next to each other in time: their ratio is less the host's drift
        "pair_difference_percent": spread([100 * (w["iops"] / o["iops"] - 1) for o, w in zip(*runs.values())]),
        "p999_us": {k: spread([run["p999_us"] for run in runs[k]]) for k in runs},
        "reads": len(reads),
        "unread": sum(value is None for value, _ in reads),
        "read_ms": spread([1000 * took for _, took in reads]),
        "runs": {k: [{**run, "reads": len(run["reads"])} for run in v] for k, v in runs.items()},
    }


def table(results, pairs, seconds):
    lines = [
        f"4 KiB random read QD32 (libaio, direct), {seconds} s a run, {pairs} pairs alternated, without and with a "
        "temperature read once a second"
    ]
    for r in results:
        w, p, d, ms = r["without"], r["with"], r["pair_difference_percent"], r["read_ms"]
        whose = "the runner's source" if r["runners_source"] else "another source"
        lines += [
            f"{r['path']} ({r['transport']}, queue depth {r['queue_depth'] or 'unknown'}), reads of "
            f"{r['temperature_source']} ({whose}):",
            f"  IOPS without {w['mean']:,.0f} ({w['min']:,.0f}-{w['max']:,.0f}), with {p['mean']:,.0f} "
            f"({p['min']:,.0f}-{p['max']:,.0f}): {r['difference_percent']:+.1f}%; pair by pair {d['mean']:+.1f}% "
            f"({d['min']:+.1f}% to {d['max']:+.1f}%)",
            f"  p99.9 latency {r['p999_us']['without']['mean']:,.0f} us without, {r['p999_us']['with']['mean']:,.0f} "
            f"with; {r['reads']} reads, {ms['mean']:,.0f} ms each ({ms['min']:,.0f}-{ms['max']:,.0f}), "
            f"{r['unread']} unread",
        ]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--drive",
        action="append",
        required=True,
        help="a drive to measure, PATH or PATH=SOURCE to read another source than the runner's (repeat for more)",
    )
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--json", help="write the whole result here")
    args = parser.parse_args()
    results = []
    for drive in args.drive:
        path, _, source = drive.partition("=")
        results.append(measure(path, source or None, args.pairs, args.seconds))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"pairs": args.pairs, "seconds": args.seconds, "drives": results}, f, indent=1)
    print(table(results, args.pairs, args.seconds))


if __name__ == "__main__":
    main()
