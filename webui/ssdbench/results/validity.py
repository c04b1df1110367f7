"""Why a step's figures may not be the drive's: the validity guards (docs/methodology.md, "Validity guards").

Every guard reads the stored run alone (the drive's identity, and each step's fio job file, metrics and
detail), so a run imported from a bundle, or made with a suite this image does not ship, is judged as a
local one. Each guard says nothing when it cannot know.
"""

import functools
import re

from .. import human

# Above this share of one CPU (user + system) for one fio job, fio's core, not the drive, sets the pace.
CPU_LIMIT = 90.0
# Above this share of the kernel's count, a busy time rebuilt from fio's logs is not the drive's.
BUSY_TOLERANCE = 0.05
BANDWIDTH = re.compile(r"(?:(.+)\.)?(read|write)\.bw")
WRITES = ("write", "randwrite", "rw", "readwrite", "randrw")
NOT_RUN = ("pending", "skipped")
# Rule 5: a step that idled first begins hot above the run's idle temperature plus this.
HOT_MARGIN_C = 3.0
# Rule 7: a sweep's pass with no IO outstanding for more than this share of its wall time, and for more than
# IDLE_PASS_S (fio's log clocks a pass in whole milliseconds), was not one continuous pass.
IDLE_PASS_SHARE = 5.0
IDLE_PASS_S = 0.01
# Rule 7 for a trace: its segments' changes left the drive with no IO of the trace for more than this share of
# the replay (its wall time, from its first IO's issue to its last IO's completion).
TRACE_GAP_SHARE = 1.0
# Rule 9: above this share of a job's time per IO, the host's own work (its cost on fio's null engine), or above
# CPU_WAIT_LIMIT of the step's time waiting for a CPU, the PC is in the figure. fio waits 5.5 to 6.7% of a step's
# time on an idle 2-CPU VM (its loop device's completions share fio's CPU), 14% beside two busy neighbours.
HOST_SHARE_LIMIT = 5.0
CPU_WAIT_LIMIT = 10.0
# Its cause, which a testbed whose calibration found fio short of a whole CPU shares (results/testbed.py).
HOST_CAUSE = "the PC, not the drive, is in part of the figure"
UNWRITTEN = "reads of LBAs never written"
# How much a cause weighs, worst first (the pages order causes by it): the figure is not the drive's at all (a cache
# or the drive's map answered, the measurement broke); it is the drive's, with the PC, the heat or the timing in it,
# so that it sets apart from another testbed's; or nothing in the figures is touched.
INVALID, AFFECTS, INFORMATION = "invalid", "affects comparison", "information"
SEVERITIES = (INVALID, AFFECTS, INFORMATION)


class Flag(str):
    """A reason, in words, that knows its rule's cause: a few words that name what went wrong, the same for every
    step the rule flags, so that the pages show one line for the steps of one cause; and its severity. A reason
    that is a plain str (a rule without a cause yet) is grouped by its own words (results/causes.py)."""

    def __new__(cls, text, cause, severity=AFFECTS):
        flag = super().__new__(cls, text)
        flag.cause = cause
        flag.severity = severity
        return flag

    def __getnewargs__(self):
        # a copy (copy.deepcopy, pickle) makes it again with its cause
        return str(self), self.cause, self.severity


def cause(words, severity=AFFECTS):
    """Each reason a rule returns as a Flag of this cause and severity."""

    def tag(rule):
        @functools.wraps(rule)
        def tagged(*args):
            return [Flag(text, words, severity) for text in rule(*args)]

        return tagged

    return tag


def cause_of(reason):
    """A step's reason's cause: its rule's, or its consequence, its words after its last colon."""
    return getattr(reason, "cause", None) or reason.rsplit(": ", 1)[-1]


def severity_of(reason):
    """A step's reason's severity: its rule's, or, for a rule that names none, that it affects comparison."""
    return getattr(reason, "severity", AFFECTS)


def suspects(run):
    """For each step of the run, in order, the reasons its figures may not be the drive's (none: an empty list)."""
    link = run["drive"].get("link")
    limit = link_limit(link)
    unwritten = unwritten_reads(run)
    out = []
    idle_c = _get(run.get("environment"), "idle", "temperature_c")
    for step, never_written in zip(run["steps"], unwritten):
        metrics = _metrics(step)
        found = cpu_bound(metrics) + over_link(metrics, limit, link) + never_written + busy_mismatch(metrics)
        found += overran(metrics) + paused(metrics) + host_bound(metrics)
        out.append(found + unsettled(step, idle_c) + heated(step, metrics, run["drive"].get("warning_temp_c")))
    return out


@cause("the drive ran hot")
def heated(step, metrics, warning_c):
    """Rule 8: heat during a step's work, from the end of its idle to its end (docs/methodology.md, "Heat during a
    step"): its temperature reached the drive's warning temperature (a second read at or above it, or its most at
    or above it), or one of the drive's counters of time spent hot moved (detail `thermal`: NVMe's thermal
    management transitions and seconds, its warning and critical temperature time; SATA's minutes in
    over-temperature). A temperature or a counter that could not be read is unknown, never cool, and says nothing."""
    out = []
    hot_s, most = metrics.get("temperature.at_or_above_warning_s"), metrics.get("temperature.max_c")
    if isinstance(warning_c, (int, float)) and ((hot_s or 0) > 0 or (most is not None and most >= warning_c)):
        held = f"{hot_s:.0f} s at or above it, " if hot_s else ""
        out.append(
            f"it reached the drive's warning temperature of {warning_c} °C ({held}at most {most} °C): its figures "
            "may be its thermal limit's, not its own"
        )
    thermal = _get(step.get("detail"), "thermal")
    rose = (thermal.get("rose") or []) if isinstance(thermal, dict) else []
    if rose:
        moved = ", ".join(f"{name} {thermal['counters'][name][0]} to {thermal['counters'][name][1]}" for name in rose)
        out.append(
            f"the drive's counters of time spent hot moved during it ({moved}): it ran hot or throttled, so its "
            "figures may be its thermal limit's, not its own"
        )
    return out


@cause("the step did not begin settled")
def unsettled(step, idle_c):
    """Rule 5: a step that did not begin as its suite's idle leaves the drive (docs/methodology.md, "Idle between
    steps"): one cut short of the suite's fixed seconds, or one that began hot, more than HOT_MARGIN_C above the
    run's idle temperature, and may measure the heat of the step before. A temperature that could not be read
    is unknown, never hot."""
    cool = _get(step.get("detail"), "cool_down")
    numbers = [_get(cool, key) for key in ("idled_s", "minimum_s")]
    if step["state"] != "done" or not all(isinstance(n, (int, float)) for n in numbers):
        return []  # nothing asked, or a run recorded before idles had a fixed minimum
    out = []
    if cool["idled_s"] < cool["minimum_s"]:
        out.append(f"it idled {cool['idled_s']:.1f} s before it began, less than the suite's {cool['minimum_s']} s")
    began = _get(step.get("detail"), "began_at_c")
    if isinstance(began, (int, float)) and isinstance(idle_c, (int, float)) and began > idle_c + HOT_MARGIN_C:
        out.append(
            f"it began hot, at {began} °C, more than {HOT_MARGIN_C} °C above the drive's idle {idle_c} °C after the "
            f"suite's {cool['minimum_s']} s idle: it may measure the heat the step before it left"
        )
    return out


@cause("the host CPU set the pace")
def cpu_bound(metrics):
    """Rule 1: a job of the step kept fio's core busier than CPU_LIMIT."""
    busy = []
    for name, usr in metrics.items():
        if name == "usr_cpu" or name.endswith(".usr_cpu"):
            prefix = name.removesuffix("usr_cpu")
            total = usr + metrics.get(prefix + "sys_cpu", 0.0)
            if total > CPU_LIMIT:
                busy.append(f"{total:.1f}%" + (f" in {prefix[:-1]}" if prefix else ""))
    if not busy:
        return []
    return [
        f"fio used {', '.join(busy)} of a CPU (user + system), over {CPU_LIMIT:.0f}%: the host, not the drive, "
        "set the pace"
    ]


@cause(HOST_CAUSE)
def host_bound(metrics):
    """Rule 9: the PC is in the step's figures. A job whose IOs the host alone, on fio's null engine, would take
    more than HOST_SHARE_LIMIT percent of the time of (`host_share_percent`: a slow CPU, costly data), or fio's
    processes that waited for a CPU more than CPU_WAIT_LIMIT percent of the step's time (`host.cpu_wait_percent`:
    other work on its CPU, a CPU quota). Runs recorded before the host was measured have neither figure."""
    shares = [
        (value, name.removesuffix("host_share_percent"))
        for name, value in metrics.items()
        if name.endswith("host_share_percent") and value > HOST_SHARE_LIMIT
    ]
    out = []
    if shares:
        jobs = ", ".join(f"{value:.1f}%" + (f" in {prefix[:-1]}" if prefix else "") for value, prefix in shares)
        out.append(
            f"the host's own work per IO, measured on fio's null engine before the run, is {jobs} of the job's time "
            f"per IO, over {HOST_SHARE_LIMIT:.0f}%: part of the figure is the PC's, not the drive's"
        )
    waited = metrics.get("host.cpu_wait_percent")
    if waited is not None and waited > CPU_WAIT_LIMIT:
        out.append(
            f"fio waited for a CPU {waited:.1f}% of the step's time, over {CPU_WAIT_LIMIT:.0f}%: other work or a "
            "limit on the host held it back, so part of the figure is the PC's, not the drive's"
        )
    return out


def link_limit(link):
    """The payload bytes per second the drive's link carries, or None when no link is known (a loop device,
    a virtual disk). SATA encodes 8b/10b; PCIe Gen1 and Gen2 (up to 5 GT/s) 8b/10b, Gen3 on 128b/130b."""
    if not isinstance(link, dict):
        return None
    speed = re.match(r"(\d+(?:\.\d+)?) G", str(link.get("speed") or ""))
    if not speed:
        return None
    bits = float(speed.group(1)) * 1e9  # per second on one lane, before encoding
    if link.get("kind") == "sata":
        return bits * 8 / 10 / 8
    lanes = re.fullmatch(r"x(\d+)", str(link.get("width") or ""))
    if link.get("kind") != "pcie" or not lanes or not int(lanes.group(1)):
        return None
    encoding = 8 / 10 if bits < 8e9 else 128 / 130
    return bits * encoding / 8 * int(lanes.group(1))


@cause("faster than the drive's link: a cache answered", INVALID)
def over_link(metrics, limit, link):
    """Rule 2: a bandwidth above what the drive's link can carry, so a cache answered, not the drive."""
    if limit is None:
        return []
    fast = []
    for name, value in metrics.items():
        found = BANDWIDTH.fullmatch(name)
        if found and value > limit:
            job, direction = found.groups()
            fast.append((f"{job} " if job else "") + f"{direction} {value / 1e6:,g} MB/s")
    if not fast:
        return []
    carrier = " ".join(str(link[k]) for k in ("speed", "width") if link.get(k))
    return [
        f"{', '.join(fast)}: above the {limit / 1e6:,.0f} MB/s that the drive's link ({carrier}) carries, "
        "so something cached it"
    ]


@cause("the busy time is not the kernel's", INVALID)
def busy_mismatch(metrics):
    """Rule 4: a trace's disk busy time, rebuilt from fio's logs (all.busy_s), differs from what the kernel
    counted for the drive over the same fio (kernel.busy_s, its io_ticks) by more than BUSY_TOLERANCE of the
    kernel's figure. Without the kernel's figure, or with none counted, there is no check."""
    rebuilt, kernel = metrics.get("all.busy_s"), metrics.get("kernel.busy_s")
    if rebuilt is None or kernel is None or kernel <= 0:
        return []
    off = abs(rebuilt - kernel) / kernel
    if off <= BUSY_TOLERANCE:
        return []
    return [
        f"the disk busy time rebuilt from fio's logs, {rebuilt:,.3f} s, is {off:.1%} off the {kernel:,.3f} s that "
        f"the kernel counted (io_ticks), over {BUSY_TOLERANCE:.0%}: the busy time and the MB/s from it may not "
        "be the drive's"
    ]


@cause("the background fell behind its clock", INVALID)
def overran(metrics):
    """Rule 6: Mixed Burst's background fell behind its clock. A period whose writes were not all done when the
    next was due made the reads share the drive with late writes, not with the 20 MB/s download the suite asks:
    the reads' service time was measured under another load than another drive's was."""
    late, whole = metrics.get("overrun_periods"), metrics.get("background_periods")
    if not late:
        return []
    return [
        f"{late:.0f} of its {whole:.0f} background periods overran (their writes were not done when the next was "
        "due): the drive fell behind the background it was asked for, so the reads' figures are of another load"
    ]


@cause("a pass or a replay was not continuous")
def paused(metrics):
    """Rule 7: a pass of a zone sweep that was not one continuous pass. Its wall time (from its first IO's issue
    to its last IO's completion) exceeds the time its IOs took (their latencies, one at a time) by more than
    IDLE_PASS_SHARE percent of it and more than IDLE_PASS_S: the drive had that long with nothing to do during
    the pass, time a degraded drive can use to recover. Runs recorded before a pass was one job have no such
    figures. A trace's replay likewise, when the gaps between its segments (replay.gaps_s) are more than
    TRACE_GAP_SHARE percent of its wall time: idle time that a drive with idle garbage collection can use. Runs
    recorded before the segments were timed on one clock have no such figures."""
    out = []
    for direction in ("write", "read"):
        share, wall, took = (metrics.get(f"{direction}.{k}") for k in ("idle_percent", "pass_s", "io_s"))
        if None in (share, wall, took) or share <= IDLE_PASS_SHARE or wall - took <= IDLE_PASS_S:
            continue
        out.append(
            f"its {direction} pass took {wall:,.3f} s and its IOs {took:,.3f} s: for {share:.1f}% of the pass, over "
            f"{IDLE_PASS_SHARE:.0f}%, no IO was outstanding, so it was not one continuous pass and the drive had "
            "time to recover in it"
        )
    share, gaps, wall = (metrics.get(f"replay.{k}") for k in ("gap_percent", "gaps_s", "wall_s"))
    if None not in (share, gaps, wall) and share > TRACE_GAP_SHARE:
        out.append(
            f"its replay took {wall:,.3f} s, of which {gaps:,.3f} s ({share:.1f}%, over {TRACE_GAP_SHARE:.0f}%) fell "
            "between its segments with no IO of the trace: the drive had idle time the trace does not give it"
        )
    return out


def unwritten_reads(run):
    """Rule 3, for each step in order: reads of LBAs that hold nothing, never written since the last purge or
    TRIM. A purged drive answers them from its map, with zeros, without reading its flash.

    What is written is followed through the steps as byte ranges, and kept as the most that can have been
    written: a write job counts over its whole span (a random one may miss some LBAs), a trace over its
    whole footprint. Before the run's first purge anything may hold data, so nothing is flagged. A sweep's
    passes run in its job file's order: a read pass before its write pass reads what the steps before it left.
    A trace's reads are not known here: it is never flagged.
    """
    out = [[] for _ in run["steps"]]
    capacity = run["drive"].get("capacity_bytes")
    if not isinstance(capacity, int) or capacity <= 0:
        return out
    written, since = None, None  # None: unknown, until the next purge or TRIM
    for step, reasons in zip(run["steps"], out):
        if step["state"] in NOT_RUN:
            continue
        if step["kind"] in ("purge", "trim"):
            written = [] if step["state"] == "done" else None
            since = f"the {step['kind']} in step {step['idx'] + 1}"
        elif written is None:
            continue
        elif step["kind"] == "trace":
            written = _union(written, (0, _trace_footprint(step, capacity)))
        else:
            written, short = _fio_step(step, _replayed(step, written), capacity)
            if short:
                reasons.append(
                    Flag(
                        f"reads LBAs never written since {since} ({'; '.join(short)}): the drive answers them "
                        "without reading its flash",
                        UNWRITTEN,
                        INVALID,
                    )
                )
    return out


def _fio_step(step, written, capacity):
    """(what is written after a fio step, what its jobs read that was never written). Its jobs run one after
    another, but for a burst's at once: the background's writes, listed first (or replayed, see _replayed),
    count before the foreground's reads."""
    metrics = _metrics(step)
    jobs = fio_jobs(step["job_file"] or "")
    named = len(jobs) > 1
    if step["kind"] == "sweep":
        jobs = [zone for job in jobs for zone in _zones(*job)]
    seen = []  # (bytes never written, bytes read, job name) of each job that read
    for name, options in jobs:
        prefix = f"{name}." if named else ""
        try:
            reads, writes = _job_io(options, _read_bytes(step, metrics, prefix, options), capacity)
        except ValueError:
            # a span this guard cannot read: what is written is unknown from here
            return None, _unwritten(step, named, seen)
        if reads:
            seen.append((reads[1] - reads[0] - _covered(written, reads), reads[1] - reads[0], name))
        if writes:
            written = _union(written, writes)
    return written, _unwritten(step, named, seen)


def _zones(name, options):
    """A sweep's job as the zones it did, each as a job of its own: a pass that is one job over fio's strided
    zones (plan._sweep) did `zonesize` bytes at each zone's start, `zonerange` bytes apart from its offset, until
    its `io_size`. Runs recorded before a pass was one job ran a job for each zone: it stays as it is."""
    if options.get("zonemode") != "strided":
        return [(name, options)]
    try:
        offset, zone = int(options.get("offset", 0)), int(options["zonesize"])
        stride, count = int(options.get("zonerange", zone)), int(options["io_size"]) // zone
    except (KeyError, ValueError, ZeroDivisionError):
        return [(name, {**options, "offset": "?"})]  # what it did is not known: _job_io says so
    return [(name, {**options, "offset": offset + k * stride, "size": zone}) for k in range(count)]


def _unwritten(step, named, seen):
    """What the jobs in `seen` read that was never written, as reasons: a sweep's read pass as one, not one
    reason for each of its zones."""
    if step["kind"] == "sweep" and seen:
        zones = sum(1 for never, _, _ in seen if never > 0)
        label = f"its read pass ({zones} of {len(seen)} zones)"
        seen = [(sum(never for never, _, _ in seen), sum(read for _, read, _ in seen), label)]
    return [
        f"{human.size(never)} of {human.size(read)}" + (f" in {name}" if named else "")
        for never, read, name in seen
        if never > 0
    ]


def _read_bytes(step, metrics, prefix, options):
    """What one job of a step read, by fio's count. A sweep keeps no count for each zone, but it has its read
    figures only when its read pass did every zone whole (run/derive.py; before a pass was one job, when every
    zone's job ended), and reads each zone once."""
    if step["kind"] != "sweep":
        return metrics.get(f"{prefix}read.io_bytes")
    return int(options["size"]) if options.get("rw") == "read" and "read.avg_mb_s" in metrics else None


def _replayed(step, written):
    """What is written once a burst step's background has run: it replays timed writes that its job file does
    not bound, over the span its detail records (runs before that kept the span in the job file)."""
    span = _get(step["detail"], "background", "span")
    offset, size = _get(span, "offset"), _get(span, "size")
    if not all(isinstance(v, int) and v >= 0 for v in (offset, size)):
        return written
    return _union(written, (offset, offset + size))


def fio_jobs(text):
    """The jobs of a fio job file, in order: (name, options), each with the [global] options under its own."""
    sections = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            sections.append((line[1:-1], {}))
        elif sections and "=" in line and not line.startswith((";", "#")):
            key, _, value = line.partition("=")
            sections[-1][1][key.strip()] = value.strip()
    shared = {k: v for name, options in sections if name == "global" for k, v in options.items()}
    return [(name, {**shared, **options}) for name, options in sections if name != "global"]


def _job_io(options, read_bytes, capacity):
    """(read range, write range) of one fio job as (start, end) bytes, or None where it has none.

    A job read only if fio counted its reads (`read_bytes`); a sequential read walks from its offset, so it
    covers no more than it read. A write job may have written anywhere in its span."""
    offset = int(options.get("offset", 0))
    end = offset + int(options.get("size", capacity - offset))
    rw = options.get("rw", "read")
    reads = None
    if read_bytes:
        reads = (offset, min(end, offset + int(read_bytes)) if rw == "read" else end)
    return reads, (offset, end) if rw in WRITES else None


def _trace_footprint(step, capacity):
    """The end of a trace's highest IO on the drive; the whole drive when the trace was folded onto it or
    its figures are not known."""
    footprint = _get(step["detail"], "trace", "stats", "footprint_bytes")
    if _get(step["detail"], "trace", "mapped_to_capacity") or not isinstance(footprint, int):
        return capacity
    return min(footprint, capacity)


def _metrics(step):
    """A step's figures by name; a value that is not a number (an imported document's) is no figure."""
    return {m["name"]: m["value"] for m in step["metrics"] if isinstance(m["value"], (int, float))}


def _get(value, *keys):
    """A field deep in a stored detail, or None where the path leads through something else."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _union(ranges, new):
    """Disjoint ranges, in order, with `new` merged in."""
    start, end = new
    kept = []
    for a, b in ranges:
        if b < start or a > end:
            kept.append((a, b))
        else:
            start, end = min(a, start), max(b, end)
    return sorted([*kept, (start, end)])


def _covered(ranges, span):
    """Bytes of `span` that the disjoint ranges cover."""
    start, end = span
    return sum(max(0, min(b, end) - max(a, start)) for a, b in ranges)
