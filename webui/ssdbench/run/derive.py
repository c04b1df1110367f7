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
from dataclasses import dataclass

from ..errors import SsdbenchError
from ..suites.locked import job_label, parse_size, reads_only
from . import burst, fio_output, plan, playback, steady
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


def latency_histograms(out_dir):
    """Each job's completion-latency histogram from fio's clat_hist log, summed over the step: (name, unit,
    source, [(bin latency ns, IOs)]), one per direction, only the bins that hold IOs. fio fills the log only
    where it keeps completion-latency percentiles (clat_percentiles): a log of empty bins gives no series."""
    series = []
    for path in sorted(glob.glob(os.path.join(out_dir, "*_clat_hist.*.log"))):
        job = int(path.rsplit(".", 2)[-2])
        with open(path) as f:
            sums = fio_output.hist_log(f.read())
        for direction, counts in sorted(sums.items()):
            name = f"{fio_output.DIRECTIONS[direction]}.clat_hist" + (f".job{job}" if job > 1 else "")
            points = [(fio_output.plat_value(i), float(c)) for i, c in enumerate(counts) if c]
            if not points:
                continue
            source = (
                f"{os.path.basename(path)}:direction={direction}, every interval summed, bin = fio's plat_idx_to_val"
            )
            series.append((name, "IOs", source, points, "ns"))
    return series


def steady_state(points, round_s, runtime, name):
    """Consistency figures from a once-a-second IOPS series (methodology 5): the SNIA PTS rule, judged from the
    step's start on rounds of `round_s` seconds, as many as the step's `runtime` holds (its maximum), and the
    mean, minimum and standard deviation of exactly the window the rule judged: the final one. With fewer whole
    rounds than a window, there is no window: steady state is not reached, and the reason says so."""
    source = f"fio's {name} log (one value a second)"
    values = [v for _, v in points]
    found = steady.detect(values, round_s)
    rule = (
        f"SNIA PTS rule on {round_s} s rounds of {source}, judged from the step's start: the final window of "
        f"{steady.WINDOW} whole rounds passes when its range is at most {steady.MAX_RANGE:.0%} and its "
        f"least-squares slope excursion at most {steady.MAX_SLOPE_EXCURSION:.0%} of its average, and its line does "
        f"not decline: fall by over {steady.MAX_DECLINE:.0%} of its average a round and over {steady.T_DECLINE} "
        "standard errors of its slope"
    )
    held = Metric(
        "steady.rounds",
        float(found.rounds),
        "rounds",
        f"whole {round_s} s rounds of {source} (at most {runtime // round_s}, the step's {runtime} s); "
        "a partial last round is left out",
    )
    if found.window is None:
        why = (
            f"not reached: the step's {runtime} s held {found.rounds} whole rounds of {round_s} s, "
            f"and a window is {steady.WINDOW}"
        )
        return [held, Metric("steady.reached", 0.0, "yes/no", f"{rule}; {why}")]
    first, last = found.window
    lo, hi = (first - 1) * round_s, last * round_s
    window = values[lo:hi]
    where = f"samples {lo + 1} to {hi} (t = {lo} to {hi} s), the final window of {steady.WINDOW} rounds"
    if found.range_ratio is None:
        verdict = f"not reached: its average is {found.window_average:g} IOPS"
    else:
        verdict = (
            f"range {found.range_ratio:.1%} (at most {steady.MAX_RANGE:.0%}) and slope excursion "
            f"{found.excursion_ratio:.1%} (at most {steady.MAX_SLOPE_EXCURSION:.0%}) of its average "
            f"{found.window_average:.0f} IOPS, slope {found.slope_ratio:+.2%} of it a round"
            + (
                f", a decline (over {steady.MAX_DECLINE:.0%} a round, and over {steady.T_DECLINE} standard errors "
                "of the slope: more than its rounds' scatter explains)"
                if found.declining
                else ""
            )
            + (": reached" if found.reached else ": not reached")
        )
    metrics = [
        held,
        Metric("steady.window_from_s", float(lo), "s", f"start of the window the rule judged: {where}"),
        Metric("steady.window_to_s", float(hi), "s", f"end of the window the rule judged: {where}"),
        Metric("steady.avg_iops", statistics.fmean(window), "IOPS", f"mean of {source}, {where}"),
        Metric("steady.min_iops", min(window), "IOPS", f"minimum of {source}, {where}"),
        Metric(
            "steady.stddev_iops",
            statistics.pstdev(window),
            "IOPS",
            f"population standard deviation of {source}, {where}",
        ),
        Metric(
            "steady.reached",
            float(found.reached),
            "yes/no",
            f"{rule}; rounds {first} to {last} (t = {lo} to {hi} s): {verdict}",
        ),
    ]
    if found.slope_ratio is not None:  # none where the window's average is not above 0
        metrics.append(
            Metric(
                "steady.slope_percent_per_min",
                found.slope_ratio * 100 * 60 / round_s,
                "%/min",
                f"least-squares slope of the {steady.WINDOW} round averages of {source}, {where}, over their "
                f"average, x 100, x 60 / {round_s} s a round",
            )
        )
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
    """MB/s against block size (the matrix's curve axis, which is always bs), one series per combination of the
    other axes."""
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
    return [
        (f"{key}.mb_s", "MB/s", "fio.json " + ", ".join(p for _, _, p in pts), [(x, v) for x, v, _ in pts], "bytes")
        for key, pts in curves.items()
    ]


@dataclass(frozen=True)
class SweepPass:
    log_name: str
    zones: list  # (offset, bytes, busy ns) of each zone, in order
    wall_ms: float  # from the first IO's issue to the last one's completion


def sweep_pass(out_dir, name, opts):
    """One pass of a sweep, from its per-IO latency log (plan._sweep). The pass is one job at QD1, so the log
    lists its IOs in the order fio issued them: each must begin where the one before it ended, or at the next
    zone's start once that zone is done, so the pass covered every zone whole and in order. A zone's busy time is
    the sum of its IOs' latencies (fio's total latency, from its submission to its completion): at QD1, the time
    one of its IOs was outstanding. The pass's wall time runs from its first IO's issue (its completion less its
    latency) to its last IO's completion, on the log's clock: whole milliseconds from the job's start."""
    log_name, ios = per_io_log(out_dir, name)
    zones = int(opts["io_size"]) // int(opts["zonesize"])
    zone, stride, start = int(opts["zonesize"]), int(opts["zonerange"]), int(opts["offset"])
    done, busy = [0] * zones, [0.0] * zones
    k, at = 0, start  # the zone the next IO is in, and where it must begin
    for io in ios:
        if done[k] == zone:
            k, at = k + 1, start + (k + 1) * stride
        if k == zones or io.offset != at or fio_output.DIRECTIONS[io.direction] != opts["rw"]:
            where = f"zone {k + 1} of {zones} at offset {at}" if k < zones else f"none: its {zones} zones were done"
            raise SsdbenchError(
                f"{log_name}: a {fio_output.DIRECTIONS[io.direction]} of {io.bs} B at offset {io.offset}, where the "
                f"{opts['rw']} pass's next IO was due in {where}"
            )
        done[k] += io.bs
        busy[k] += io.value
        at += io.bs
    if done != [zone] * zones:
        whole = sum(1 for d in done if d == zone)
        raise SsdbenchError(f"{log_name}: the {opts['rw']} pass did {whole} of its {zones} zones whole")
    wall = ios[-1].t_ms - (ios[0].t_ms - ios[0].value / 1e6)
    return SweepPass(log_name, [(start + k * stride, done[k], busy[k]) for k in range(zones)], wall)


def sweep(doc, jobs, out_dir, baseline_avg=None):
    """Per-zone MB/s of each pass of a zone sweep, its write pass and its read pass (series against the zone's
    offset), their average and minimum; and each pass's wall time against the time its IOs took. The order of
    the passes is the job file's (plan._sweep): each pass is one job."""
    metrics, series = [], []
    index = {job["jobname"]: i for i, job in enumerate(doc["jobs"])}
    for direction in ("write", "read"):
        name, opts = next((n, o) for n, o in jobs if o["rw"] == direction)
        done = sweep_pass(out_dir, name, opts)
        points = [(offset, nbytes / busy * 1e3) for offset, nbytes, busy in done.zones]  # bytes / ns * 1e9 / 1e6
        values = [v for _, v in points]
        source = f"{done.log_name}: each zone's bytes / the sum of its IOs' latencies (at QD1, its busy time)"
        series.append((f"{direction}.mb_s", "MB/s", source, points, "offset"))
        metrics += [
            Metric(
                f"{direction}.avg_mb_s", statistics.fmean(values), "MB/s", f"mean over {len(values)} zones of " + source
            ),
            Metric(f"{direction}.min_mb_s", min(values), "MB/s", f"minimum over zones of {source}"),
        ]
        metrics += sweep_pass_time(doc["jobs"][index[name]], index[name], direction, done)
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


def sweep_pass_time(job, i, direction, done):
    """A pass's wall time, the time its IOs took, and the share of the pass with none outstanding (fio's own
    time between one IO's completion and the next one's submission, and any pause); and fio's runtime of the
    pass's job, which adds fio's own moments before the first IO and after the last."""
    stats = job[direction]
    wall = done.wall_ms / 1000
    took = stats["lat_ns"]["mean"] * stats["total_ios"] / 1e9
    pointer = f"fio.json /jobs/{i}/{direction}"
    return [
        Metric(
            f"{direction}.pass_s",
            wall,
            "s",
            f"{done.log_name}: the last IO's completion - (the first IO's completion - its latency): the pass's wall "
            "time, on the log's clock of whole milliseconds (within 1 ms: a short pass's idle share can be below 0)",
        ),
        Metric(
            f"{direction}.io_s",
            took,
            "s",
            f"{pointer}/lat_ns/mean x {pointer}/total_ios / 1e9: the time its IOs took, one at a time",
        ),
        Metric(
            f"{direction}.idle_percent",
            100 * (wall - took) / wall if wall > 0 else 0.0,
            "%",
            f"({direction}.pass_s - {direction}.io_s) / {direction}.pass_s x 100: the share of the pass with no IO "
            "outstanding",
        ),
        Metric(
            f"{direction}.fio_runtime_s",
            stats["runtime"] / 1000,
            "s",
            f"{pointer}/runtime / 1000: fio's runtime of the pass's job, its own moments before the first IO and "
            "after the last included",
        ),
    ]


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


def per_io_log(out_dir, prefix, kind="lat"):
    """(file name, samples) of the one per-IO latency log of `kind` (lat, or clat for a trace) fio wrote for
    job `prefix`, in completion order; a trace's logs are read from their gzip form (see playback)."""
    logs = glob.glob(os.path.join(out_dir, f"{prefix}_{kind}.*.log")) + glob.glob(
        os.path.join(out_dir, f"{prefix}_{kind}.*.log.gz")
    )
    if len(logs) != 1:
        raise SsdbenchError(f"expected one per-IO latency log for {prefix}, found {len(logs)}")
    with gzip.open(logs[0], "rt") if logs[0].endswith(".gz") else open(logs[0]) as f:
        return os.path.basename(logs[0]), fio_output.fio_log(f.read())


def replayed_intervals(out_dir, name, qd, spans=None):
    """(start µs, end µs, op, bytes) of every IO of one trace replay job.

    fio cannot log issue times while it replays (read_iolog overrides write_iolog), so
    each IO's issue time is rebuilt from fio's replay discipline: the first `qd` IOs of
    the replay start together, and each completion, in the order of the per-IO latency
    log, lets the next IO start. An IO's interval is its issue time plus its completion
    latency (clat): the time from its submission to the kernel to its completion, which the
    kernel's io_ticks counts too. fio's own time before it submits (slat) is not the drive's.
    With a list as `spans`, the job's replay_span is appended to it.
    """
    order = playback.replay_order(out_dir, name)
    log_name, completions = per_io_log(out_dir, name, "clat")
    if spans is not None and completions:
        spans.append(replay_span(completions))
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


def replay_span(completions):
    """(first issue, last completion) of a replay job, in ms on its log's clock: the first IO's completion time
    less its clat, and the last IO's completion time. fio stamps a sample with the time it reaps it, in whole ms."""
    return completions[0].t_ms - completions[0].value / 1e6, completions[-1].t_ms


def _epoch_logged(options):
    return "1" in (options.get("log_unix_epoch"), options.get("log_alternate_epoch"))


def replay_gaps(spans):
    """The trace's replay wall time and the gaps between its segments, from each segment's replay_span on the
    wall clock of its per-IO log (`log_unix_epoch`), segments in order: the time from one segment's last IO's
    completion to the next one's first IO's issue, when the drive had no IO of the trace."""
    if len(spans) < 2:
        return []
    wall = (spans[-1][1] - spans[0][0]) / 1000
    gaps = [(b[0] - a[1]) / 1000 for a, b in zip(spans, spans[1:])]
    total = max(0.0, sum(gaps))
    where = "the per-IO latency logs' wall-clock times (log_unix_epoch, whole ms) less each first IO's clat"
    return [
        Metric("replay.wall_s", wall, "s", f"from the first IO's issue to the last IO's completion, by {where}"),
        Metric(
            "replay.gaps_s",
            total,
            "s",
            f"the sum over the {len(gaps)} changes of segment of the time from one segment's last completion to "
            f"the next one's first issue, by {where}",
        ),
        Metric("replay.gap_percent", 100 * total / wall if wall > 0 else 0.0, "%", "replay.gaps_s / replay.wall_s"),
        Metric("replay.longest_gap_s", max(0.0, *gaps), "s", f"the longest of those gaps, by {where}"),
    ]


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


def background_writes(out_dir, step):
    """(period, issue, completion, bytes) of every background write that completed, in ms on the Unix clock.

    A writer has one write outstanding, so its per-IO lat log lists its writes in its replay's order; each
    is checked against the replay's offset. fio logs a completion's time in whole ms; the issue is that
    time less the write's latency."""
    out = []
    for prefix, replay in burst.writers(step):
        planned = burst.planned_writes(os.path.join(out_dir, replay))
        log_name, done = per_io_log(out_dir, prefix)
        if len(done) > len(planned):
            raise SsdbenchError(f"{log_name} lists {len(done)} writes; {replay} holds {len(planned)}")
        for (period, offset, length), c in zip(planned, done):
            if (fio_output.DIRECTIONS[c.direction], c.offset, c.bs) != ("write", offset, length):
                raise SsdbenchError(f"{log_name}: a write of {c.bs} B at {c.offset}, where {replay} has {offset}")
            out.append((period, c.t_ms - c.value / 1e6, float(c.t_ms), c.bs))
    return out


def _windows_metrics(direction, windows, source):
    seconds = sum(e - s for s, e, _ in windows) / 1e6
    nbytes = sum(b for _, _, b in windows)
    return [
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


def burst_metrics(out_dir, step, doc):
    """Mixed Burst: throughput counted only while bursts run, the reads' total service time, and the
    background against its clock; with the timeline of the read bursts and the background's periods."""
    spec = step.spec
    wanted = next(opts["io_size"] for name, opts in step.jobs if name == "foreground")
    read = next(job["read"]["io_bytes"] for job in doc["jobs"] if job["jobname"] == "foreground")
    if read < wanted:
        raise SsdbenchError(
            f"the foreground read {read} of its {wanted} bytes: it outlasted the background's "
            f"{burst.period_count(step)} periods ({burst.HOLD} times the step's estimate), and fio ended it "
            "when the background ended (exitall), so its last bursts ran without the background"
        )
    # A pause of half the configured idle time separates two bursts; IOs inside a burst are never that far apart.
    gap = spec["foreground"]["idle_s"] / 2
    fg = io_intervals(out_dir, "foreground")
    reads = bursts(fg, gap)
    metrics = _windows_metrics(
        "read", reads, f"foreground.iolog issue times + foreground_lat log, bursts split at pauses of {gap} s or more"
    )
    writes = background_writes(out_dir, step)
    log_name, completions = per_io_log(out_dir, "foreground")
    clock = background_clock(step, writes, max(c.t_ms for c in completions))
    gap = spec["background"]["every_s"] / 2
    source = f"the background writers' lat logs (completion ms - latency), bursts split at pauses of {gap} s or more"
    metrics += _windows_metrics(
        "write", bursts([(s * 1000, e * 1000, "write", b) for _, s, e, b in writes], gap), source
    )
    logs = ", ".join(f"{prefix}_lat log" for prefix, _ in burst.writers(step))
    source = (
        f"{clock.whole} whole periods of {clock.every} ms, the first due at {clock.due:.3f} ms, the last ending "
        f"before the foreground's last completion ({log_name}); Unix-clock ms in every log (log_unix_epoch)"
    )
    metrics += [
        Metric("background_periods", float(clock.whole), "periods", source),
        Metric(
            "background_mb_s",
            clock.written / (clock.whole * clock.every / 1000) / 1e6,
            "MB/s",
            f"bytes of those periods' writes done by the end of the last ({logs}) / their length; {source}",
        ),
        Metric(
            "overrun_periods",
            float(clock.overran),
            "periods",
            f"periods whose writes were not all done ({logs}) when the next was due; {source}",
        ),
    ]
    # The foreground's IOs are on its iolog's clock. Each, in the lat log's order, completed at a Unix ms that
    # fio cut down to a whole ms, so the largest difference of the two is the shift from one clock to the other.
    shift = max(c.t_ms * 1000 - stop for c, (_, stop, _, _) in zip(completions, fg))
    since = f"x: its first issue, ms from when the background's first period was due ({clock.due:.3f} ms)"
    series = [
        (
            "burst.read.service_s",
            "s",
            f"each read burst's [first issue, last completion] from foreground.iolog + {log_name}; {since}",
            [((s + shift) / 1000 - clock.due, (e - s) / 1e6) for s, e, _ in reads],
        ),
        (
            "burst.write.period_s",
            "s",
            f"each background period whose writes all completed: [first issue, last completion] from {logs}; " + since,
            [(s - clock.due, (e - s) / 1000) for s, e in clock.periods],
        ),
    ]
    return metrics, series


@dataclass(frozen=True)
class Clock:
    every: int  # ms between two periods' due times
    due: float  # when period 0 was due, Unix ms
    whole: int  # periods that were due, and whose successor was due, before the foreground ended
    overran: int  # of those, periods whose writes were not all done when the next was due
    written: int  # bytes of those periods' writes done by the end of the last
    periods: list  # (first issue, last completion) of each period whose writes all completed


def background_clock(step, writes, end):
    """The background's periods against its clock, from its writes and the foreground's last completion (ms).

    fio never issues a write before its period is due, and issues the first of a period that is not late
    when it is due (woken from the replay's wait), so the earliest (issue - k periods) of any write, k its
    period, is when period 0 was due. Period k overran when its writes were not all done when period k + 1
    was due: fio then started that one at once."""
    every = burst.every_ms(step)
    due = min((s - k * every for k, s, _, _ in writes), default=None)
    if due is None or end - due < every:
        raise SsdbenchError(f"the foreground ended before the background's first whole period of {every} ms")
    whole = int((end - due) // every)
    planned = plan.burst_blocks(step.spec["background"])
    per_period = defaultdict(list)
    for k, s, e, _ in writes:
        per_period[k].append((s, e))
    done = {k: max(e for _, e in ios) for k, ios in per_period.items() if len(ios) == planned}
    overran = sum(k not in done or done[k] > due + (k + 1) * every for k in range(whole))
    written = sum(b for k, _, e, b in writes if k < whole and e <= due + whole * every)
    periods = [(min(s for s, _ in per_period[k]), e) for k, e in sorted(done.items())]
    return Clock(every, due, whole, overran, written, periods)


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
    metrics, series = fio_output.fio_metrics(doc), per_second_series(out_dir) + latency_histograms(out_dir)
    if complete and "steady" in step.spec:
        direction = "read" if reads_only(step.spec["rw"]) else "write"
        points = next(p for n, _, _, p in series if n == f"{direction}.iops")
        found = steady_state(points, step.spec["steady"]["round_s"], step.runtime, f"{direction}.iops")
        metrics += found
        window = {m.name: int(m.value) for m in found if m.name in ("steady.window_from_s", "steady.window_to_s")}
        if direction == "write" and window and baseline is not None:
            bw = next(p for n, _, _, p in series if n == "write.bw")
            metrics += window_fills(bw, window["steady.window_from_s"], window["steady.window_to_s"], step, baseline)
    return metrics, series


def window_fills(bw, lo, hi, step, before):
    """The drive fills written before a steady-state step's judged window (seconds `lo` to `hi` of its
    once-a-second bandwidth log `bw`) and within it, in fills of the step's span: what proves that the drive
    had been written over when its figure was taken. `before` is (bytes, where from): the run's writes since
    its last purge, before the step (Run.baseline)."""
    written, since = before
    values = [v * 1024 for _, v in bw]  # fio's bandwidth log: KiB/s, each sample one second
    ahead, inside = sum(values[:lo]), sum(values[lo:hi])
    span = f"the step's span of {step.size:,} B"
    log = "fio's write bandwidth log (KiB/s, one value a second, x 1024 x 1 s)"
    return [
        Metric(
            "steady.fills_before",
            (written + ahead) / step.size,
            "fills",
            f"({written:,.0f} B, {since}, + {ahead:,.0f} B, samples 1 to {lo} of {log}) / {span}",
        ),
        Metric(
            "steady.fills_in_window",
            inside / step.size,
            "fills",
            f"{inside:,.0f} B, samples {lo + 1} to {hi} of {log}, the judged window / {span}",
        ),
    ]


def _matrix(step, out_dir, doc, complete, baseline):
    # A row that ran another block size than the one it names (a 512 B row on a 4Kn drive) is not drawn on
    # the curve; its figures stay in the step's metrics, under its name.
    drawn = [(name, opts) for name, opts in step.jobs if name not in step.adapted]
    return fio_output.fio_metrics(doc), matrix_curves(doc, step.spec, drawn) if complete else []


def _sweep(step, out_dir, doc, complete, baseline):
    return sweep(doc, step.jobs, out_dir, baseline) if complete else ([], [])


def _trace(step, out_dir, doc, complete, baseline):
    # fio's own record of each replay job's queue depth
    jobs = [(job["jobname"], int(job["job options"]["iodepth"])) for job in doc["jobs"]]
    # the gaps between segments, where fio stamped their logs on one clock (runs before stamped each job's own)
    # fio 3.41 names log_unix_epoch by what it is now an alias of, log_alternate_epoch (its clock the wall's)
    spans = [] if all(_epoch_logged(job["job options"]) for job in doc["jobs"]) else None
    metrics = io_totals(doc) + busy_time(replayed_intervals(out_dir, name, qd, spans) for name, qd in jobs)
    return metrics + replay_gaps(spans or []), []


def _burst(step, out_dir, doc, complete, baseline):
    metrics, series = burst_metrics(out_dir, step, doc) if complete else ([], [])
    return fio_output.fio_metrics(doc) + metrics, series


RESULTS = {"fio": _fio, "matrix": _matrix, "sweep": _sweep, "trace": _trace, "burst": _burst}


def step_results(step, out_dir, doc, complete, baseline=None):
    """A step's metrics and series from its fio output; a step cut short keeps what fio measured."""
    return RESULTS[step.kind](step, out_dir, doc, complete, baseline)
