"""The figures the methodology derives from fio's output, each naming what it was computed from.

Everything here reads the files fio wrote in a step's folder (fio.json, its logs and
its iologs) and returns Metric rows and series, never a number from anywhere else.
"""

import glob
import gzip
import math
import os
import re
import statistics
from collections import defaultdict, deque

from ..errors import SsdbenchError
from ..suites.locked import job_label, parse_size, reads_only
from . import fio_output, playback, steady
from .fio_output import Metric

# fio log names: <prefix>_<kind>.<job>.log; kind "clat_hist" holds histograms and is kept raw.
LOG_RE = re.compile(r"_(iops|bw|lat|clat|slat)\.(\d+)\.log$")
LOG_UNITS = {"iops": "IOPS", "bw": "KiB/s", "lat": "ns", "clat": "ns", "slat": "ns"}


def per_second_series(out_dir):
    """Per-second series from fio's logs: (name, unit, source, [(t_ms, value)]), one per direction."""
    series = []
    for path in sorted(glob.glob(os.path.join(out_dir, "*.log"))):
        m = LOG_RE.search(path)
        if not m:
            continue
        kind, job = m.group(1), int(m.group(2))
        with open(path) as f:
            samples = fio_output.fio_log(f.read())
        for direction in sorted({s.direction for s in samples}):
            name = f"{fio_output.DIRECTIONS[direction]}.{kind}" + (f".job{job}" if job > 1 else "")
            points = [(s.t_ms, s.value) for s in samples if s.direction == direction]
            series.append((name, LOG_UNITS[kind], f"{os.path.basename(path)}:direction={direction}", points))
    return series


def steady_state(points, from_s, round_s, name):
    """Consistency figures from a once-a-second IOPS series: the part from `from_s`, and the SNIA rule."""
    source = f"fio's {name} log (one value a second)"
    tail = [v for t, v in points if t >= from_s * 1000]
    if not tail:
        raise SsdbenchError(f"the {name} log has no samples from {from_s} s on; the step ended early")
    found = steady.detect([v for _, v in points], round_s)
    metrics = [
        Metric("steady.avg_iops", statistics.fmean(tail), "IOPS", f"mean of {source} for t >= {from_s} s"),
        Metric("steady.min_iops", min(tail), "IOPS", f"minimum of {source} for t >= {from_s} s"),
        Metric(
            "steady.stddev_iops",
            statistics.pstdev(tail),
            "IOPS",
            f"population standard deviation of {source} for t >= {from_s} s",
        ),
        Metric(
            "steady.reached",
            float(found.reached),
            "yes/no",
            f"SNIA PTS rule on the final window, the last {steady.WINDOW} whole {round_s} s rounds of {source}: "
            f"range <= {steady.MAX_RANGE:.0%} and least-squares slope excursion "
            f"<= {steady.MAX_SLOPE_EXCURSION:.0%} of the window's average",
        ),
    ]
    if found.reached:
        metrics.append(
            Metric(
                "steady.reached_s",
                float(found.t_s),
                "s",
                f"end of round {found.round} of {round_s} s: every window of {steady.WINDOW} rounds "
                f"from the one ending at round {found.round} on passes the rule, up to the final one",
            )
        )
    return metrics


def job_mb_s(doc, index, direction):
    stats = doc["jobs"][index][direction]
    return stats["bw_bytes"] / 1e6, f"/jobs/{index}/{direction}/bw_bytes / 1e6"


def matrix_curves(doc, step_spec, jobs):
    """MB/s against the matrix's curve axis (block size), one series per combination of the other axes."""
    axis = step_spec.get("curve")
    if not axis:
        return []
    others = [a for a in step_spec["axes"] if a != axis]
    index = {job["jobname"]: i for i, job in enumerate(doc["jobs"])}
    curves = defaultdict(list)
    for name, opts in jobs:
        direction = "read" if reads_only(opts["rw"]) else "write"
        key = job_label(opts, others)
        value, pointer = job_mb_s(doc, index[name], direction)
        curves[key].append((parse_size(opts[axis]), value, pointer))
    unit = "bytes" if axis == "bs" else axis
    return [
        (f"{key}.mb_s", "MB/s", "fio.json " + ", ".join(p for _, _, p in pts), [(x, v) for x, v, _ in pts], unit)
        for key, pts in curves.items()
    ]


def sweep(doc, jobs, baseline_avg=None):
    """Per-zone MB/s of a zone sweep (series against the zone's offset), their average and minimum."""
    metrics, series = [], []
    for direction in ("write", "read"):
        points, pointers = [], []
        for i, (_name, opts) in enumerate(jobs):
            if opts["rw"] == direction:
                value, pointer = job_mb_s(doc, i, direction)
                points.append((opts["offset"], value))
                pointers.append(pointer)
        values = [v for _, v in points]
        source = f"fio.json {pointers[0]} ... {pointers[-1]}, one job per zone"
        series.append((f"{direction}.mb_s", "MB/s", source, points, "offset"))
        metrics += [
            Metric(
                f"{direction}.avg_mb_s", statistics.fmean(values), "MB/s", f"mean over {len(values)} zones of " + source
            ),
            Metric(f"{direction}.min_mb_s", min(values), "MB/s", f"minimum over zones of {source}"),
        ]
    if baseline_avg:
        avg = metrics[0].value
        metrics.append(
            Metric(
                "recovered_percent",
                100 * avg / baseline_avg,
                "%",
                f"write.avg_mb_s of this sweep / write.avg_mb_s of the clean sweep ({baseline_avg} MB/s) x 100",
            )
        )
    return metrics, series


def io_intervals(out_dir, prefix):
    """(start µs, end µs, op, bytes) of every IO of one fio job.

    The start is when fio queued the IO (its write_iolog, in µs); the end adds the IO's
    latency from its per-IO lat log (ns). IOs are matched by direction and offset, in order.
    """
    with open(os.path.join(out_dir, f"{prefix}.iolog")) as f:
        issues = fio_output.fio_iolog(f.read())
    log_name, completions = per_io_log(out_dir, prefix)
    pending = defaultdict(deque)
    for io in issues:
        pending[(io.op, io.offset)].append(io.t_us)
    intervals = []
    for c in completions:
        op = fio_output.DIRECTIONS[c.direction]
        queue = pending.get((op, c.offset))
        if not queue:
            raise SsdbenchError(f"{log_name}: a {op} at offset {c.offset} that {prefix}.iolog never issued")
        start = queue.popleft()
        intervals.append((start, start + c.value / 1000, op, c.bs))
    return intervals


def per_io_log(out_dir, prefix):
    """(file name, samples) of the one per-IO latency log fio wrote for job `prefix`, in completion order;
    a trace's logs are read from their gzip form (see playback)."""
    logs = glob.glob(os.path.join(out_dir, f"{prefix}_lat.*.log")) + glob.glob(
        os.path.join(out_dir, f"{prefix}_lat.*.log.gz")
    )
    if len(logs) != 1:
        raise SsdbenchError(f"expected one per-IO latency log for {prefix}, found {len(logs)}")
    with gzip.open(logs[0], "rt") if logs[0].endswith(".gz") else open(logs[0]) as f:
        return os.path.basename(logs[0]), fio_output.fio_log(f.read())


def replayed_intervals(out_dir, name, qd):
    """(start µs, end µs, op, bytes) of every IO of one trace replay job.

    fio cannot log issue times while it replays (read_iolog overrides write_iolog), so
    each IO's issue time is rebuilt from fio's replay discipline: the first `qd` IOs of
    the replay start together, and each completion, in the order of the per-IO latency
    log, lets the next IO start. An IO's interval is its issue time plus the latency fio
    measured for it.
    """
    order = playback.replay_order(out_dir, name)
    log_name, completions = per_io_log(out_dir, name)
    starts = {}  # replay position -> issue time (ns)
    outstanding = defaultdict(deque)  # (op, offset) -> replay positions in flight
    next_io = 0

    def issue(at):
        nonlocal next_io
        op, offset, _ = order[next_io]
        starts[next_io] = at
        outstanding[(op, offset)].append(next_io)
        next_io += 1

    while next_io < min(qd, len(order)):
        issue(0.0)
    intervals = []
    for c in completions:
        key = (fio_output.DIRECTIONS[c.direction], c.offset)
        if not outstanding[key]:
            raise SsdbenchError(f"{log_name}: a completion at offset {c.offset} that the replay never issued")
        pos = outstanding[key].popleft()
        end = starts[pos] + c.value
        intervals.append((starts[pos] / 1000, end / 1000, key[0], c.bs))
        if next_io < len(order):
            issue(end)
    return intervals


def busy_seconds(intervals):
    """Seconds during which at least one of the intervals was outstanding: their union's length."""
    total, end = 0.0, -math.inf
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total / 1e6


def busy_time(intervals_by_job):
    """Disk busy time and data rate for all IO, reads and writes, with idle time left out.

    Each job's clock starts at its own start, and the jobs ran one after another, so
    each job's intervals are united on their own and the busy times are added. The jobs
    are taken one at a time: a trace's millions of IOs are never all in memory.
    """
    kinds = ("all", "read", "write")
    busy, nbytes, ios = dict.fromkeys(kinds, 0.0), dict.fromkeys(kinds, 0), dict.fromkeys(kinds, 0)
    for intervals in intervals_by_job:
        for kind in kinds:
            chosen = [(s, e) for s, e, op, _ in intervals if kind in ("all", op)]
            busy[kind] += busy_seconds(chosen)
            nbytes[kind] += sum(b for _, _, op, b in intervals if kind in ("all", op))
            ios[kind] += len(chosen)
    metrics = []
    source = "fio write_iolog issue times (µs) + per-IO lat logs (ns)"
    for kind in kinds:
        metrics += [
            Metric(
                f"{kind}.busy_s",
                busy[kind],
                "s",
                f"union of the {kind} IOs' [issue, completion] intervals from {source}",
            ),
            Metric(f"{kind}.bytes", float(nbytes[kind]), "B", f"sum of the {kind} IOs' sizes in the lat logs"),
            Metric(f"{kind}.ios", float(ios[kind]), "IOs", f"count of the {kind} IOs in the lat logs"),
        ]
        if busy[kind] > 0:
            metrics.append(
                Metric(
                    f"{kind}.mb_s",
                    nbytes[kind] / busy[kind] / 1e6,
                    "MB/s",
                    f"{kind}.bytes / {kind}.busy_s / 1e6 (idle time left out)",
                )
            )
    return metrics


def bursts(intervals, min_gap_s):
    """Windows (first issue, last completion, bytes) of the bursts: runs of IOs split wherever
    nothing was outstanding for at least `min_gap_s`."""
    windows = []
    for start, stop, _, nbytes in sorted(intervals):
        if windows and start - windows[-1][1] < min_gap_s * 1e6:
            first, last, total = windows[-1]
            windows[-1] = (first, max(last, stop), total + nbytes)
        else:
            windows.append((start, stop, nbytes))
    return windows


def burst_metrics(out_dir, spec):
    """Mixed Burst: throughput counted only while bursts run, and the reads' total service time."""
    metrics = []
    for part, direction, idle in (("foreground", "read", "idle_s"), ("background", "write", "every_s")):
        # A pause of half the configured idle time separates two bursts; IOs inside a burst are never that far apart.
        gap = spec[part][idle] / 2
        windows = bursts(io_intervals(out_dir, part), gap)
        seconds = sum(e - s for s, e, _ in windows) / 1e6
        nbytes = sum(b for _, _, b in windows)
        source = f"{part}.iolog issue times + {part}_lat log, bursts split at pauses of {gap} s or more"
        metrics += [
            Metric(
                f"burst.{direction}.mb_s",
                nbytes / seconds / 1e6,
                "MB/s",
                f"bytes / time inside the {len(windows)} bursts (idle left out), from {source}",
            ),
            Metric(
                f"burst.{direction}.service_s",
                seconds,
                "s",
                f"sum of the {len(windows)} bursts' [first issue, last completion], from {source}",
            ),
            Metric(f"burst.{direction}.bursts", float(len(windows)), "bursts", source),
        ]
    return metrics


def io_totals(doc):
    """Bytes and IOs of every job added up: the trace's totals as fio counted them."""
    metrics = []
    for d in ("read", "write"):
        for field, unit in (("io_bytes", "B"), ("total_ios", "IOs")):
            value = sum(job[d][field] for job in doc["jobs"])
            source = f"sum of /jobs/*/{d}/{field} over the fio-NN.json of every part"
            metrics.append(Metric(f"fio.{d}.{field}", float(value), unit, source))
    return metrics


def _fio(step, out_dir, doc, complete, baseline):
    metrics, series = fio_output.fio_metrics(doc), per_second_series(out_dir)
    if complete and "steady" in step.spec:
        name = "read.iops" if reads_only(step.spec["rw"]) else "write.iops"
        points = next(p for n, _, _, p in series if n == name)
        metrics += steady_state(points, step.spec["steady"]["from_s"], step.spec["steady"]["round_s"], name)
    return metrics, series


def _matrix(step, out_dir, doc, complete, baseline):
    return fio_output.fio_metrics(doc), matrix_curves(doc, step.spec, step.jobs) if complete else []


def _sweep(step, out_dir, doc, complete, baseline):
    return sweep(doc, step.jobs, baseline) if complete else ([], [])


def _trace(step, out_dir, doc, complete, baseline):
    # fio's own record of each replay job's queue depth
    jobs = [(job["jobname"], int(job["job options"]["iodepth"])) for job in doc["jobs"]]
    return io_totals(doc) + busy_time(replayed_intervals(out_dir, name, qd) for name, qd in jobs), []


def _burst(step, out_dir, doc, complete, baseline):
    return fio_output.fio_metrics(doc) + (burst_metrics(out_dir, step.spec) if complete else []), []


RESULTS = {"fio": _fio, "matrix": _matrix, "sweep": _sweep, "trace": _trace, "burst": _burst}


def step_results(step, out_dir, doc, complete, baseline=None):
    """A step's metrics and series from its fio output; a step cut short keeps what fio measured."""
    return RESULTS[step.kind](step, out_dir, doc, complete, baseline)
