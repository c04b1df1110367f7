"""Turn a suite and a drive's capacity into concrete steps: fio job files and time estimates.

Deterministic and free of I/O. A job file names the device as ${SSDBENCH_DUT}, which
fio expands from the environment, so the saved file re-runs anywhere with plain fio.
A trace step's job file depends on the generated trace, so `playback` writes it at
run time; here it only gets its estimate. Mixed Burst's job file is rendered here, and the timed
writes its background replays are generated at run time by `burst`.

A drive's logical block can be larger than a job's block size (a 4Kn drive refuses the 512 B
rows of the transfer-size sweep): such a job runs its block size rounded up to whole logical
blocks, and its step records the change. Spans and zones start on 1 MiB, a multiple of any
logical block, so block sizes are all that can need it.
"""

import hashlib
import math
from dataclasses import dataclass, field

from .. import __version__
from ..suites import locked, trace_generator, trace_profiles
from ..suites.locked import parse_size
from ..suites.trace_file import SECTOR  # the logical block that suites and traces assume: the default here

ALIGN = 1024 * 1024
DUT_VAR = "SSDBENCH_DUT"
# What a job writes (methodology, "incompressible data" and "compressible data"); tests/test_data_pattern.py
# reads it back from a loop device, bench/bench_host_cost.py measures what it costs the host per IO.
# Compressible: every buffer is made once, before the clock starts: this 512 B pattern (fio 3.33 takes no
# longer one) over and over, 330 fixed random bytes and 182 zero bytes, which zstd and xz take to 10% of each
# 4 KiB block, as fio's buffer_compress_percentage=90 did, with the stamps below counted. Then, for every
# write, the stamps of scramble_buffers=hash (below): 24 bytes in each 4 KiB, so that no two 4 KiB blocks are
# alike. The order matters: buffer_pattern turns scrambling off, the options after it turn it back on and keep
# the buffers from being refilled.
COMPRESSIBLE_PATTERN = hashlib.shake_256(b"ssdbench compressible data").digest(330) + bytes(182)
# Incompressible: random bytes made once, before the clock starts, and for every write the offset, the write's
# number and time hashed into each 4 KiB (scramble_buffers=hash, our fio patch: board/ssdbench/patches/fio/). The
# hashed stamps look as random as the bytes they replace, so no compressor shrinks a block and no two blocks are
# alike, at well under 1 us a 4 KiB or 128 KiB write. A job that also reads writes from buffers of its own, so a
# buffer made once never carries what a read brought in back to the drive: the same options serve it.
DATA_OPTIONS = {
    "incompressible": {"refill_buffers": 0, "scramble_buffers": "hash"},
    "compressible": {
        "buffer_pattern": "0x" + COMPRESSIBLE_PATTERN.hex(),
        "refill_buffers": 0,
        "scramble_buffers": "hash",
    },
    "n/a": {},
}
# A stock fio (a tester's own Linux) has no scramble_buffers=hash. Its only incompressible data is made afresh for
# every write (refill_buffers: 34 us a 128 KiB write on a 2024 CPU), the data of the suites before, whose host
# share validity rule 9 flags; its compressible data takes fio's plain stamps (scramble_buffers=1, 24 bytes in
# each 512 B sector: 3 us a 128 KiB write). Its stamped buffer made once, which zstd and xz take 11% off each
# 4 KiB block of, is for a sweep's write pass only (methodology 6): fresh random bytes kept the drive idle for a
# quarter of a QD1 pass on a loop device, and a pass is one continuous pass. A stock fio's job that reads as well as
# writes has one set of buffers for both, and a buffer made once would carry what a read brought in back to the
# drive: its compressible data is made afresh for every write, as fio's own.
STOCK_INCOMPRESSIBLE = {"refill_buffers": 1, "buffer_compress_percentage": 0}
STOCK_MIXED_COMPRESSIBLE = {"refill_buffers": 1, "buffer_compress_percentage": 90, "buffer_compress_chunk": "4k"}
STOCK_SWEEP = "random bytes made once, scrambled for every write"
FIO_PATCH = "0001-options-add-scramble_buffers-hash.patch"


@dataclass(frozen=True)
class Data:
    """What the host's fio makes each data kind with: a job that only writes, one that also reads, a sweep's write
    pass; and for the run's record, the fio patch it needs and why a run went without it."""

    name: str
    writes: dict
    mixed: dict
    sweep: str  # the data kind of a sweep's write pass
    patch: str | None = None
    why: str | None = None

    def options(self, job):
        """The fio options of what the job writes."""
        return (self.mixed if mixes(job) else self.writes)[job["data"]]

    def record(self):
        return {"options": self.name, "fio_patch": self.patch, "why": self.why}


HASHED = Data("scramble_buffers=hash", DATA_OPTIONS, DATA_OPTIONS, "incompressible", FIO_PATCH)
STOCK = Data(
    "refill_buffers",
    {
        **DATA_OPTIONS,
        "incompressible": STOCK_INCOMPRESSIBLE,
        "compressible": {**DATA_OPTIONS["compressible"], "scramble_buffers": 1},
        STOCK_SWEEP: {"refill_buffers": 0, "scramble_buffers": 1},
    },
    {**DATA_OPTIONS, "incompressible": STOCK_INCOMPRESSIBLE, "compressible": STOCK_MIXED_COMPRESSIBLE},
    STOCK_SWEEP,
    why=f"this fio has no scramble_buffers=hash ({FIO_PATCH}): incompressible data is made afresh for every "
    "write (refill_buffers), at a host cost per IO that validity rule 9 flags; a sweep's write pass writes a "
    "buffer made once and stamped, which zstd and xz take 11% off",
)
# Per-IO logs: the issue time of every IO (write_iolog, in microseconds) and its latency
# (a lat log with log_avg_msec=0). Busy time and burst windows are computed from them.
PER_IO_LOGS = {"log_avg_msec": 0, "log_offset": 1}
# fio takes about 0.4 s to start each job of a step (measured with fio 3.33 on a loop device).
JOB_START_S = 0.4
# A trace replays each of its up to 1000 segments as a job, each taking over from the one before it at once
# (playback): through fio's own start_fifo and done_fifo, about a millisecond a segment on a busy 2-core host
# (a stock fio's shell commands take 4 to 11 ms), which the estimate counts.
HANDOFF_S = 0.001
# The runner's own work around a step that runs fio on the drive (its temperature and health read before and after,
# fio's output derived and stored): 0.2 s a step. On smoke's steps on a loop device it took about 0.6 s beside
# other tests and less on an idle host, where a 0.6 s estimate of a 512 MiB smoke run (132 s) was 23% over the run
# (107 s): 0.2 s keeps both within 20%.
STEP_START_S = 0.2


@dataclass
class PlanStep:
    index: int
    id: str
    kind: str
    title: str
    estimate_s: float
    spec: dict
    offset: int = 0
    size: int = 0
    job_file: str | None = None
    jobs: list = field(default_factory=list)  # (fio job name, options) in job-file order
    adapted: dict = field(default_factory=dict)  # job name -> (declared bs, bytes it runs): see Fit
    trace: dict | None = None  # a trace step's figures: what it plays
    data: Data = HASHED  # what its fio makes its data with

    @property
    def runtime(self):
        return self.spec.get("runtime")

    def to_dict(self):
        out = {
            "index": self.index,
            "id": self.id,
            "kind": self.kind,
            "title": self.title,
            "estimate_s": self.estimate_s,
            "span": {"offset": self.offset, "size": self.size},
            "jobs": [{"name": n, **o} for n, o in self.jobs],
            "job_file": self.job_file,
            "adapted": adaptation_notes(self.adapted),
        }
        if self.trace is not None:
            out["trace"] = self.trace
        return out


def _resolve(value, capacity):
    text = str(value)
    if text.endswith("%"):
        return capacity * float(text[:-1]) / 100
    return parse_size(text)


def span(spec, capacity):
    """The byte range of a step: declared sizes are capped at the drive, and aligned to 1 MiB."""
    offset = min(int(_resolve(spec["offset"], capacity)), capacity) // ALIGN * ALIGN
    size = min(int(_resolve(spec["size"], capacity)), capacity - offset) // ALIGN * ALIGN
    return offset, size


def mixes(job):
    """Whether a job both reads and writes: a mixed rw mode with reads in its mix (fio's rwmixread, 50 unless
    given)."""
    rwmixread = job.get("rwmixread")
    return job["rw"] in ("rw", "randrw") and (50 if rwmixread is None else rwmixread) > 0


def fio_options(job, offset, size, logs=None, data=HASHED):
    """The fio options of one job, in job-file order; `logs` names its per-second logs."""
    opts = {
        "rw": job["rw"],
        "bs": job["bs"],
        "iodepth": job["iodepth"],
        "numjobs": job["numjobs"],
        "offset": offset,
        "size": size,
    }
    if "rwmixread" in job:
        opts["rwmixread"] = job["rwmixread"]
    if "runtime" in job:
        opts.update(runtime=job["runtime"], time_based=1)
    if job.get("randommap"):
        # fio's random map, against the suites' norandommap: every block of the span once, in random order
        opts["norandommap"] = 0
    if "loops" in job:
        # the span written over that many times in a row (the consistency test's preconditioning: twice)
        opts["loops"] = job["loops"]
    if job["numjobs"] > 1:
        opts["group_reporting"] = 1
    opts.update(data.options(job))
    if logs:
        for log in ("bw", "iops", "lat", "hist"):
            opts[f"write_{log}_log"] = logs
    return opts


class Fit:
    """What the run's drive and fio take: block sizes fitted to the drive's logical block (and which jobs had to
    change), and the data options its fio can make (Data)."""

    def __init__(self, block, data=HASHED):
        self.block = block
        self.data = data
        self.adapted = {}

    def job(self, name, job):
        """The job as declared when its block size is a whole number of logical blocks; else with that size
        rounded up to one (512 B runs as 4096 B on a 4Kn drive), which the drive accepts."""
        size = parse_size(job["bs"])
        if size % self.block == 0:
            return job
        ran = -(-size // self.block) * self.block
        self.adapted[name] = (job["bs"], ran)
        return {**job, "bs": ran}


def adaptation_notes(adapted):
    """What a step's Fit changed, in sentences, one per declared block size."""
    jobs = {}
    for name, change in adapted.items():
        jobs.setdefault(change, []).append(name)
    return [f"bs {bs} runs as {ran} B in {', '.join(names)}" for (bs, ran), names in jobs.items()]


def job_file(suite, step, jobs, extra_global=None, adapted=None):
    lines = [
        f"; ssdbench {__version__}, suite {suite.name} v{suite.data['version']} (sha256 {suite.sha256})",
        f"; step {step['id']}: {step['title']}",
        f"; re-run: {DUT_VAR}=/dev/<drive> fio --output-format=json {step['id']}.fio",
        *(f"; adapted to the drive: {note}" for note in adaptation_notes(adapted or {})),
        "[global]",
        f"filename=${{{DUT_VAR}}}",
    ]
    lines += [f"{k}={v}" for k, v in {**suite.data.get("fio", {}), **(extra_global or {})}.items()]
    for name, opts in jobs:
        lines.append(f"[{name}]")
        lines += [f"{k}={v}" for k, v in opts.items()]
    return "\n".join(lines) + "\n"


class Rates:
    """The suite's assumed speeds, used only to estimate size-based work, never as a result."""

    def __init__(self, suite):
        est = suite.data.get("estimate", {})
        self.write = est.get("write_mb_s", 200) * 1e6
        self.read = est.get("read_mb_s", est.get("write_mb_s", 200)) * 1e6
        self.purge_s = float(est.get("purge_s", 10))

    def job_seconds(self, job, size):
        if "runtime" in job:
            return float(job["runtime"])
        passes = job["numjobs"] * job.get("loops", 1)
        return size * passes / (self.read if locked.reads_only(job["rw"]) else self.write)


def scaled(step, size):
    """A step that states `runtime_per` runs its `runtime` for every `runtime_per` bytes of its span, never less
    (the consistency and torture tests, methodology 5 and 6): its runtime was sized for the articles' 256 GB
    drives, and a larger drive takes longer to fill its spare area. Where it measures steady state, the longer
    run holds as many more rounds: the most the rule can judge."""
    if "runtime_per" not in step:
        return step
    factor = max(1.0, size / parse_size(step["runtime_per"]))
    return {**step, "runtime": math.ceil(step["runtime"] * factor)}


def _fio(suite, i, step, capacity, rates, fit):
    offset, size = span(step["span"], capacity)
    step = scaled(step, size)
    jobs = [(step["id"], fio_options(fit.job(step["id"], step), offset, size, logs=step["id"], data=fit.data))]
    return PlanStep(
        i,
        step["id"],
        "fio",
        step["title"],
        rates.job_seconds(step, size),
        step,
        offset,
        size,
        job_file(suite, step, jobs, adapted=fit.adapted),
        jobs,
    )


def _matrix(suite, i, step, capacity, rates, fit):
    jobs, estimate = [], 0.0
    for name, job in locked.matrix_jobs(step):
        offset, size = span(job["span"], capacity)
        jobs.append((name, {**fio_options(fit.job(name, job), offset, size, data=fit.data), "stonewall": 1}))
        estimate += rates.job_seconds(job, size)
    text = job_file(suite, step, jobs, adapted=fit.adapted)
    return PlanStep(i, step["id"], "matrix", step["title"], estimate, step, 0, capacity, text, jobs)


def sweep_zones(zones, zone_size, capacity):
    """(zone size, stride) of a sweep on a drive of `capacity` bytes: `zones` zones, each starting on 1 MiB, one
    stride apart from LBA 0 (fio's strided zones are all one distance apart), the stride the largest whole MiB
    with which the last zone still ends on the drive: it ends less than `zones` MiB short of the drive's end. On
    a drive too small to hold the zones apart, they lie side by side and are smaller, together the whole drive."""
    whole = capacity // ALIGN * ALIGN
    zone = min(zone_size, whole)
    stride = (capacity - zone) // (zones - 1) // ALIGN * ALIGN
    if stride < zone:
        stride = zone = whole // zones // ALIGN * ALIGN
    if not zone:
        raise ValueError(f"a drive of {capacity} B is too small for {zones} zones of 1 MiB")
    return zone, stride


def zone_offsets(zones, zone_size, capacity):
    """The start of each of `zones` zones, from LBA 0 to the end of the drive, one stride apart (sweep_zones)."""
    zone, stride = sweep_zones(zones, zone_size, capacity)
    return [k * stride for k in range(zones)]


SWEEP_DATA = {"write": "incompressible", "read": "n/a"}


def sweep_pass_name(rw):
    return f"{rw}-pass"


def _sweep(suite, i, step, capacity, rates, fit):
    """Each of the step's passes, in its order (methodology 6), is one fio job over every zone: fio's strided
    zones (`zonemode=strided`) move it from one zone to the next as soon as it has done `zonesize` bytes there,
    `zonerange` bytes from the zone's start, with no pause and no new job between zones, as HDTach's pass has
    none. `io_size` ends it after the last zone. Its per-IO latency log (lat only: `disable_slat` and
    `disable_clat` keep fio from writing two more) gives each zone's figure (derive.sweep). The first pass is done
    over the whole surface before the second begins (stonewall), as HDTach's read and write passes are."""
    zone, stride = sweep_zones(step["zones"], parse_size(step["zone_size"]), capacity)
    jobs = []
    for rw in locked.sweep_passes(step):
        name = sweep_pass_name(rw)
        data = fit.data.sweep if rw == "write" else "n/a"
        job = fit.job(name, {"rw": rw, "bs": step["bs"], "iodepth": 1, "numjobs": 1, "data": data})
        strided = {
            "zonemode": "strided",
            "zonesize": zone,
            "zonerange": stride,
            "io_size": step["zones"] * zone,
            "stonewall": 1,
            "write_lat_log": name,
            **PER_IO_LOGS,
            "disable_slat": 1,
            "disable_clat": 1,
        }
        jobs.append((name, {**fio_options(job, 0, (step["zones"] - 1) * stride + zone, data=fit.data), **strided}))
    estimate = step["zones"] * zone * (1 / rates.write + 1 / rates.read)
    text = job_file(suite, step, jobs, adapted=fit.adapted)
    return PlanStep(i, step["id"], "sweep", step["title"], estimate, step, 0, capacity, text, jobs)


def burst_blocks(part):
    """IOs per burst: the burst's bytes (MB are 10^6, as the article's) in whole blocks."""
    return math.ceil(parse_size(part["burst"]) / parse_size(part["bs"]))


def _microseconds(seconds):
    # fio reads thinktime in microseconds; a fraction such as "0.5s" does not parse as it reads.
    return round(seconds * 1e6)


# Mixed Burst's clock starts this long after fio starts its jobs: its first background period is due then,
# and the foreground starts then (startdelay). fio starts its jobs in about 0.1 s; every one has by then.
CLOCK_START_S = 1


def _burst(suite, i, step, capacity, rates, fit):
    """The background: `iodepth` synchronous writers, each replaying its share of the timed writes that
    run/burst.py generates (the fixed clock is explained there). The foreground: read bursts with idle
    between them. fio ends every job when one ends (exitall): the foreground's end ends the background."""
    offset, size = span(step["span"], capacity)
    bg, fg = fit.job("background", step["background"]), fit.job("foreground", step["foreground"])
    fg_blocks = burst_blocks(fg)
    fg_bytes = fg["bursts"] * fg_blocks * parse_size(fg["bs"])
    estimate = CLOCK_START_S + fg_bytes / rates.read + fg["bursts"] * fg["idle_s"]
    # Every job logs on the Unix clock, so that the background's periods and the read bursts line up.
    logs = {**PER_IO_LOGS, "log_unix_epoch": 1}
    writers = [
        (
            "background",
            {
                "ioengine": "psync",
                "iodepth": 1,
                "read_iolog": f"background{k}.replay",
                "read_iolog_chunked": 1,
                "replay_redirect": f"${{{DUT_VAR}}}",
                **fit.data.writes["incompressible"],
                "write_lat_log": f"background{k}",
                **logs,
            },
        )
        for k in range(1, bg["iodepth"] + 1)
    ]
    foreground = {
        # A group of its own, so that group_reporting sums the background's writers and not the reads.
        "new_group": 1,
        "rw": "read",
        "bs": fg["bs"],
        "iodepth": fg["iodepth"],
        "offset": offset + size,
        "size": capacity - offset - size,
        "io_size": fg_bytes,
        "thinktime": _microseconds(fg["idle_s"]),
        "thinktime_blocks": fg_blocks,
        "startdelay": CLOCK_START_S,
        "write_iolog": "foreground.iolog",
        "write_lat_log": "foreground",
        **logs,
    }
    jobs = [*writers, ("foreground", foreground)]
    ends = {"exitall": 1, "exit_what": "all", "group_reporting": 1}
    return PlanStep(
        i,
        step["id"],
        "burst",
        step["title"],
        estimate,
        step,
        offset,
        size,
        job_file(suite, step, jobs, ends, fit.adapted),
        jobs,
    )


def trace_segments(spec):
    """(queue depth, IO count) of each segment that a trace step plays, in order."""
    if "user_trace" in spec:
        return [tuple(pair) for pair in spec["user_trace"]["segments"]]
    return trace_generator.segment_plan(spec["profile"], spec["seed"])


def trace_figures(spec):
    """What a trace step plays: the trace, its IO counts and bytes, and its segments."""
    if "user_trace" in spec:
        user = spec["user_trace"]
        figures = {"name": user["name"], "label": user["label"], "sha256": user["sha256"]}
        figures |= {key: user[key] for key in ("reads", "writes", "bytes_read", "bytes_written")}
    else:
        p = trace_profiles.profile(spec["profile"])
        bytes_read, bytes_written = trace_profiles.volume(p)
        figures = {"profile": spec["profile"], "label": p["label"], "seed": spec["seed"]}
        figures |= {
            "reads": p["reads"],
            "writes": p["writes"],
            "bytes_read": bytes_read,
            "bytes_written": bytes_written,
        }
    return {**figures, "segments": len(trace_segments(spec))}


def _trace(suite, i, step, capacity, rates, fit):
    # Its IOs come from the trace at run time: `playback` fits them to the drive's logical block.
    figures = trace_figures(step)
    estimate = (
        figures["bytes_read"] / rates.read + figures["bytes_written"] / rates.write + figures["segments"] * HANDOFF_S
    )
    return PlanStep(i, step["id"], "trace", step["title"], estimate, step, 0, capacity, trace=figures)


def _device_step(suite, i, step, capacity, rates, fit):
    return PlanStep(i, step["id"], step["kind"], step["title"], rates.purge_s, step, 0, capacity)


BUILDERS = {
    "purge": _device_step,
    "trim": _device_step,
    "fio": _fio,
    "matrix": _matrix,
    "sweep": _sweep,
    "burst": _burst,
    "trace": _trace,
}


PARAMS = ("rw", "bs", "iodepth", "numjobs", "span", "runtime", "data")


def declared_jobs(step):
    """Every fio job a step runs, with its parameters as the suite declares them (spans unresolved)."""
    kind = step["kind"]
    if kind == "fio":
        loops = {"loops": step["loops"]} if "loops" in step else {}
        return [{"name": step["id"], **{k: step.get(k) for k in PARAMS}, "rwmixread": step.get("rwmixread"), **loops}]
    if kind == "matrix":
        return [
            {"name": name, **{k: job.get(k) for k in PARAMS}, "rwmixread": job.get("rwmixread")}
            for name, job in locked.matrix_jobs(step)
        ]
    if kind == "sweep":
        zone = {
            "offset": f"each of {step['zones']} zones one stride apart from LBA 0 to the end of the drive",
            "size": step["zone_size"],
        }
        return [
            {
                "name": sweep_pass_name(rw),
                "pass": f"{n} of 2: one fio job over every zone in turn, with no pause between zones",
                "rw": rw,
                "bs": step["bs"],
                "iodepth": 1,
                "numjobs": 1,
                "span": zone,
                "runtime": None,
                "data": SWEEP_DATA[rw],
            }
            for n, rw in enumerate(locked.sweep_passes(step), 1)
        ]
    if kind == "burst":
        bg, fg = step["background"], step["foreground"]
        rest = {"offset": step["span"]["size"], "size": "the rest of the drive"}
        return [
            {
                "name": "background",
                "rw": "randwrite (a timed iolog, replayed)",
                "bs": bg["bs"],
                "iodepth": bg["iodepth"],
                "numjobs": 1,
                "span": step["span"],
                "runtime": "until the foreground ends",
                "data": "incompressible",
                "burst_bytes": int(bg["burst"]),
                "every_s": bg["every_s"],
                "clock": f"fixed: a burst due every {bg['every_s']} s from {CLOCK_START_S} s after fio starts; "
                "one that is late starts at once",
                "writers": f"{bg['iodepth']} synchronous writers (psync), one write outstanding each",
                "seed": bg["seed"],
            },
            {
                "name": "foreground",
                "rw": "read",
                "bs": fg["bs"],
                "iodepth": fg["iodepth"],
                "numjobs": 1,
                "span": rest,
                "runtime": None,
                "data": "n/a",
                "burst_bytes": int(fg["burst"]),
                "bursts": fg["bursts"],
                "idle_s": fg["idle_s"],
                "starts_s": CLOCK_START_S,
            },
        ]
    if kind == "trace":
        return [
            {
                "name": "replay",
                "rw": "trace (read_iolog, replay_no_stall)",
                "bs": "as the trace",
                "iodepth": "as each segment of the trace",
                "numjobs": 1,
                "span": {"offset": "0", "size": "the trace's footprint, mapped onto the drive if larger"},
                "runtime": None,
                "data": "incompressible",
                "trace": trace_figures(step),
            }
        ]
    return []


def compile_plan(suite, capacity, block=SECTOR, data=HASHED):
    """The steps of a suite on a drive of `capacity` bytes and logical blocks of `block` bytes, for a fio that
    makes its data with `data`."""
    rates = Rates(suite)
    steps = []
    for i, spec in enumerate(suite.steps):
        fit = Fit(block, data)
        steps.append(BUILDERS[spec["kind"]](suite, i, spec, capacity, rates, fit))
        steps[-1].adapted = fit.adapted
        steps[-1].data = data
        # not a burst's: its estimate sets how long its background writes (burst.period_count), a part of its workload
        if steps[-1].jobs and spec["kind"] != "burst":
            steps[-1].estimate_s += STEP_START_S + JOB_START_S * len(steps[-1].jobs)
        if spec["cooldown"]:  # the fixed part of its idle; the wait for the drive to cool is not foreseen
            steps[-1].estimate_s += locked.idle_seconds(suite.data)
    return steps


def estimate_seconds(plan):
    return sum(s.estimate_s for s in plan)
