"""What this PC costs each IO of a run: every job of the plan played once on fio's null engine, before the first
step (docs/methodology.md, "The host's share of a figure").

The null engine completes every IO at once, with no device and no kernel below it, so a job there runs only on
what the host does for each IO: fio's own loop and accounting, and the data it makes for every write. Its CPU time
per IO, on the CPU fio runs on for the steps, is what the host takes of every IO of the same job on the drive;
beside a step's own IOPS it gives the share of that step's time that was the host's (shares()).

A job is played with the options it runs with on the drive, but for what the null engine cannot take or does not
need: the device, its span (the job plays its block size, queue depth, threads and data over 1 GiB), its length
(CALIBRATE_MS each, time_based), its logs, and the zones and loops that only move it on the drive.

The null engine leaves out the kernel. So every job plays again through it, with the suite's ioengine and direct
IO, on a device that completes at once (kernel_device: null_blk, or a stand-in): fio's CPU time per IO there is
the host's whole path, which CPUs and their vulnerability mitigations make unalike. At the run's end a few jobs
play on the null engine again (again()): a CPU that has slowed since (a laptop off its turbo clock) shows.
"""

import json
import os

from ..errors import SsdbenchError
from ..suites import locked
from . import derive, fio, handoff, kernel_device, plan

# A quarter second holds a hundred thousand IOs on the null engine, and thousands through the kernel even at QD1
# on a loop device; fio's CPU time is counted exactly (the kernel's runtime of its threads). fio reads a runtime of
# 0.25 as 0 s: it is given in ms.
CALIBRATE_MS = 250
FOLDER = "host-cost"
NAME = "host-cost"
# Options that place or bound a job on the drive, or name its logs: the null engine plays the job without them.
DROPPED = {
    "offset",
    "size",
    "io_size",
    "runtime",
    "time_based",
    "loops",
    "zonemode",
    "zonesize",
    "zonerange",
    "stonewall",
    "new_group",
    "startdelay",
    "log_offset",
    "log_avg_msec",
    "log_unix_epoch",
    "log_hist_msec",
    "write_bw_log",
    "write_iops_log",
    "write_lat_log",
    "write_hist_log",
    "write_iolog",
}
# Of the suite's [fio] options, those of the logs, which no calibration writes, and those the null engine does not
# take.
LOGS = {"log_avg_msec", "log_hist_msec"}
GLOBAL_DROPPED = {"ioengine", "direct", *LOGS}
# The steps whose jobs read and write as their job file says; a burst's and a trace's IOs come from a log that
# fio replays on the drive, which the null engine cannot: their figures carry the CPU wait alone (cpu_wait).
KINDS = ("fio", "matrix", "sweep")


def key(options):
    """A job's options as the null engine plays them: the same for every job of the plan that costs the same."""
    return json.dumps({k: v for k, v in options.items() if k not in DROPPED}, sort_keys=True)


def jobs_of(steps):
    """Each job of the plan that the null engine plays, once: {key: options}, in the plan's order."""
    out = {}
    for step in steps:
        if step.kind in KINDS:
            for _, options in step.jobs:
                out.setdefault(key(options), {k: v for k, v in options.items() if k not in DROPPED})
    return out


# fio starts a null-engine job after `stonewall` in about 0.3 s (smoke's 29 jobs took 23.1 s on an idle 2-CPU
# host), most of it polling, twice 100 ms; a job that another one hands over to (handoff) starts within a ms.
JOB_START_S = 0.3
# On our fio the jobs of a chain set up together, each with its buffers (its queue depth times its block size):
# a chain holds at most so many bytes of them, so that the calibration holds no more memory than its largest
# job alone (standard's 8 MiB reads at QD32: 256 MiB), where all of standard's 68 jobs at once hold 1 GiB.
CHAIN_BUFFER_BYTES = 128 * 2**20
STONEWALL_WHY = (
    f"this fio has no start_fifo ({handoff.FIO_PATCH}): each job of the calibration starts once the one before "
    "it has ended (stonewall), about 0.3 s later"
)
# Each job through the kernel plays as long as on the null engine.
KERNEL_MS = CALIBRATE_MS
# At the run's end, this many of the plan's jobs play on the null engine again (its first and its last): a CPU
# that changed its speed moves them all alike, one job's noise moves one. The null engine, not the kernel: its
# CPU time per IO moved by 15% at most between back-to-back calibrations on a 2-CPU VM at a load of 9 to 11,
# where the same jobs through the kernel on a loop device moved up to 5x.
END_JOBS = 2
# A CPU time per IO, end over start, beyond 1 +/- this moved more than that noise, where every job played again
# moved that way; a laptop that falls from its turbo clock to its sustained one takes 20 to 50% more CPU time.
DRIFT_LIMIT = 0.20


def seconds(steps, native):
    """The calibration's time foreseen: each distinct job of the plan plays CALIBRATE_MS on the null engine and
    KERNEL_MS through the kernel, and END_JOBS of them CALIBRATE_MS again at the end, fio starting each chain
    (chains(): each job, on a stock fio)."""
    jobs = jobs_of(steps)
    n, started = len(jobs), len(chains(jobs, native))
    end = min(n, END_JOBS) * CALIBRATE_MS / 1000 + (1 if native else min(n, END_JOBS)) * JOB_START_S
    return n * (CALIBRATE_MS + KERNEL_MS) / 1000 + 2 * started * JOB_START_S + (end if n else 0)


def iops(job):
    """A job's IOPS in fio's JSON, its directions together."""
    return sum(job[d]["iops"] for d in ("read", "write", "trim"))


def job_file(suite, jobs, native):
    """The null engine's job file: each of the plan's jobs (jobs_of) once, one after another (chains())."""
    lines = [
        f"; ssdbench host cost: every job of suite {suite.name} v{suite.data['version']} on fio's null engine",
        "[global]",
        *(f"{k}={v}" for k, v in suite.data.get("fio", {}).items() if k not in GLOBAL_DROPPED),
        "ioengine=null",
        "size=1g",
        "time_based=1",
        f"runtime={CALIBRATE_MS}ms",
    ]
    return "\n".join(lines + sections(jobs, native)) + "\n"


def kernel_job_file(suite, jobs, what, native):
    """The job file through the kernel: each job with the suite's ioengine and direct IO, on the device fio is
    given (kernel_device), over its span."""
    lines = [
        f"; ssdbench host cost: jobs of suite {suite.name} v{suite.data['version']} through the kernel, {what}",
        "[global]",
        *(f"{k}={v}" for k, v in suite.data.get("fio", {}).items() if k not in LOGS),
        f"filename=${{{plan.DUT_VAR}}}",
        f"size={kernel_device.SPAN}",
        "time_based=1",
        f"runtime={KERNEL_MS}ms",
    ]
    return "\n".join(lines + sections(jobs, native)) + "\n"


def _buffer_bytes(options):
    """fio's buffers for a job: its queue depth times its block size; None where the job is more than one
    process or its block size is not one plain size."""
    try:
        size = locked.parse_size(options.get("bs", "4k"))
    except SsdbenchError:
        return None
    return size * int(options.get("iodepth", 1)) if str(options.get("numjobs", 1)) == "1" else None


def chains(jobs, native):
    """The jobs' indexes in chains, one chain after another (`stonewall`), the jobs of a chain one after another
    through FIFOs (handoff): where fio is ours (`native`), as many jobs as hold CHAIN_BUFFER_BYTES of buffers
    together (a larger one alone, and one whose buffers are not known); on a stock fio, each job alone."""
    out, chain, held = [], [], 0
    for n, options in enumerate(jobs.values()):
        size = _buffer_bytes(options) if native else None
        if chain and (size is None or held + size > CHAIN_BUFFER_BYTES):
            out.append(chain)
            chain, held = [], 0
        chain.append(n)
        held += size or 0
        if size is None:
            out.append(chain)
            chain, held = [], 0
    return out + ([chain] if chain else [])


def sections(jobs, native):
    """The jobs' sections, in chains (chains())."""
    options = list(jobs.values())
    lines = []
    for chain in chains(jobs, native):
        for i, n in enumerate(chain):
            wait = handoff.fifo(f"job{n}") if i else None
            post = handoff.fifo(f"job{chain[i + 1]}") if i + 1 < len(chain) else None
            handed = {**({} if i else {"stonewall": 1}), **handoff.options(wait, post)}
            lines += [f"[job{n}]", *(f"{k}={v}" for k, v in {**handed, **options[n]}.items())]
    return lines


def waiting(jobs, native):
    """The FIFOs that the jobs after the first of each chain wait on."""
    return [handoff.fifo(f"job{n}") for chain in chains(jobs, native) for n in chain[1:]]


def measure(jobs, doc):
    """Each job's figures in a calibration's fio output: its options (as key() has them), IOPS, the host's
    microseconds per IO and the share of a CPU fio had."""
    measured = []
    for options, job in zip(jobs.values(), doc["jobs"]):
        rate = iops(job)
        cpu = job["usr_cpu"] + job["sys_cpu"]
        measured.append(
            {
                "key": key(options),
                "iops": rate,
                "us_per_io": 1e6 / rate if rate else None,
                "cpu_percent": cpu,
                # the CPU's own time per IO: a calibration that other work or a quota held back (cpu_percent under
                # 100) waited, and its wall time per IO counts the wait, which the steps' cpu_wait measures
                "cpu_us_per_io": 1e6 / rate * min(cpu, 100.0) / 100 if rate else None,
            }
        )
    return measured


def play(text, jobs, native, name, out_dir, device, cpus, should_stop, what):
    """fio's output of a calibration's job file of `jobs`, played on `cpus` with the FIFOs of its chains made
    and held (handoff.Fifos); SsdbenchError when fio did not end done."""
    os.makedirs(out_dir, exist_ok=True)
    fifos = handoff.Fifos(out_dir)
    try:
        for path in waiting(jobs, native):
            fifos.make(path)
        outcome = fio.run(text, name, out_dir, device, lambda *_: None, should_stop, cpus, output=name, status=False)
    finally:
        fifos.remove()
    if outcome.state != "done":
        raise SsdbenchError(f"the host-cost calibration {what} {outcome.state}: {outcome.error}")
    return outcome.doc


def through_kernel(suite, jobs, native, out_dir, cpus, should_stop, name):
    """The jobs played through the kernel (kernel_device): the device used and why, and each job's figures;
    why not, where the device or fio failed."""
    try:
        with kernel_device.device(f"ssdbench-{name}-{os.getpid()}") as (dev, what):
            text = kernel_job_file(suite, jobs, what, native)
            doc = play(text, jobs, native, name, out_dir, dev, cpus, should_stop, "through the kernel")
    except (SsdbenchError, OSError) as exc:  # OSError: no room in tmpfs, no losetup
        return {"unavailable": str(exc)}
    return {
        "device": what,
        "seconds_each": KERNEL_MS / 1000,
        "job_file": f"{FOLDER}/{name}.fio",
        "output": f"{FOLDER}/{name}.json",
        "jobs": measure(jobs, doc),
    }


def calibrate(suite, steps, run_dir, cpus, should_stop, native):
    """Play the plan's jobs on the null engine, then through the kernel, on `cpus` (fio's CPU for the steps).
    Returns the calibration as the environment keeps it: for each job, its options (as key() has them), fio's IOPS
    on the null engine, the host's microseconds per IO, and the share of a CPU fio had; where fio's output lives;
    the same through the kernel under "kernel" (or why it could not be). None when the plan has no job the null
    engine plays."""
    jobs = jobs_of(steps)
    if not jobs:
        return None
    out_dir = os.path.join(run_dir, FOLDER)
    text = job_file(suite, jobs, native)
    doc = play(text, jobs, native, NAME, out_dir, os.devnull, cpus, should_stop, "on fio's null engine")
    return {
        "engine": "null",
        "seconds_each": CALIBRATE_MS / 1000,
        "cpus": sorted(cpus) if cpus else "any",
        "handoff": handoff.record(native, "stonewall", STONEWALL_WHY),
        "job_file": f"{FOLDER}/{NAME}.fio",
        "output": f"{FOLDER}/{NAME}.json",
        "jobs": measure(jobs, doc),
        "kernel": through_kernel(suite, jobs, native, out_dir, cpus, should_stop, f"{NAME}-kernel"),
    }


def again(suite, calibration, run_dir, cpus, should_stop, native):
    """At the run's end: END_JOBS of the jobs calibrated on the null engine before the first step, played there
    again. Returns each job's figures, each one's CPU time per IO at the end over the start (ratios), the one that
    moved least (ratio), and whether all moved beyond DRIFT_LIMIT the same way; why not, where fio failed."""
    start = [job for job in (calibration or {}).get("jobs", []) if job.get("cpu_us_per_io")]
    if not start:
        return {"unavailable": "no job was calibrated before the first step"}
    picked = list({job["key"]: job for job in (start[0], start[-1])[:END_JOBS]}.values())
    jobs = {job["key"]: json.loads(job["key"]) for job in picked}
    name, out_dir = f"{NAME}-end", os.path.join(run_dir, FOLDER)
    try:
        text = job_file(suite, jobs, native)
        doc = play(text, jobs, native, name, out_dir, os.devnull, cpus, should_stop, "at the run's end")
    except SsdbenchError as exc:
        return {"unavailable": str(exc)}
    measured = measure(jobs, doc)
    ratios = [end["cpu_us_per_io"] / begun["cpu_us_per_io"] for begun, end in zip(picked, measured) if end["iops"]]
    if len(ratios) < len(picked):
        return {"unavailable": "fio did no IO in a job of the calibration at the run's end"}
    # moved: every job moved beyond the limit, the same way; by at least the ratio of the one that moved least
    least = min(ratios, key=lambda r: abs(r - 1))
    moved = all(r > 1 + DRIFT_LIMIT for r in ratios) or all(r < 1 - DRIFT_LIMIT for r in ratios)
    return {
        "job_file": f"{FOLDER}/{name}.fio",
        "output": f"{FOLDER}/{name}.json",
        "jobs": measured,
        "ratios": ratios,
        "ratio": least,
        "limit": DRIFT_LIMIT,
        "moved": moved,
    }


def shares(step, doc, calibration):
    """The metrics of each of a step's jobs that the calibration played: the host's share of the job's time per
    IO, in percent: the CPU time the host spent on each of the job's IOs on the null engine over the job's own time
    per IO on the drive (1e6 / its IOPS), `host_share_percent`; and the same with the kernel's path, from the
    calibration through it, `host_kernel_share_percent`. A job fio did no IO in has none."""
    known = {job["key"]: job for job in (calibration or {}).get("jobs", [])}
    kernel = {job["key"]: job for job in ((calibration or {}).get("kernel") or {}).get("jobs", [])}
    done = {job["jobname"]: job for job in doc.get("jobs", [])}
    out = []
    for name, options in step.jobs if step.kind in KINDS else ():
        job = done.get(name)
        rate = iops(job) if job is not None else 0
        if not rate:
            continue
        prefix = f"{name}." if len(done) > 1 else ""
        for measured, metric, where in (
            (known, "host_share_percent", "on fio's null engine before the run (environment host_cost"),
            (kernel, "host_kernel_share_percent", "through the kernel before the run (environment host_cost.kernel"),
        ):
            cost = measured.get(key(options))
            if not cost or not cost.get("cpu_us_per_io"):
                continue
            source = (
                f"100 x the host's CPU time per IO {where}: 1e6 / its IOPS x its CPU share), "
                f"{cost['cpu_us_per_io']:.3f} us, x the job's IOPS, {rate:,.0f} (fio.json /jobs/{name}: read + write "
                "+ trim iops), / 1e6"
            )
            out.append(derive.Metric(f"{prefix}{metric}", cost["cpu_us_per_io"] * rate / 1e4, "%", source))
    return out
