"""What this PC costs each IO of a run: every job of the plan played once on fio's null engine, before the first
step (docs/methodology.md, "The host's share of a figure").

The null engine completes every IO at once, with no device and no kernel below it, so a job there runs only on
what the host does for each IO: fio's own loop and accounting, and the data it makes for every write. Its CPU time
per IO, on the CPU fio runs on for the steps, is what the host takes of every IO of the same job on the drive;
beside a step's own IOPS it gives the share of that step's time that was the host's (shares()).

A job is played with the options it runs with on the drive, but for what the null engine cannot take or does not
need: the device, its span (the job plays its block size, queue depth, threads and data over 1 GiB), its length
(CALIBRATE_MS each, time_based), its logs, and the zones and loops that only move it on the drive.
"""

import json
import os

from ..errors import SsdbenchError
from . import derive, fio

CALIBRATE_MS = 500  # fio reads a runtime of 0.5 as 0 s: it is given in ms
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
# Of the suite's [fio] options, those the null engine does not take.
GLOBAL_DROPPED = {"ioengine", "direct", "log_avg_msec", "log_hist_msec"}
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


# fio starts a null-engine job in about 0.3 s (smoke's 29 jobs took 23.1 s on an idle 2-CPU host).
JOB_START_S = 0.3


def seconds(steps):
    """The calibration's time foreseen: each distinct job of the plan plays CALIBRATE_MS, fio starting each."""
    return len(jobs_of(steps)) * (CALIBRATE_MS / 1000 + JOB_START_S)


def iops(job):
    """A job's IOPS in fio's JSON, its directions together."""
    return sum(job[d]["iops"] for d in ("read", "write", "trim"))


def job_file(suite, jobs):
    """The null engine's job file: each of the plan's jobs (jobs_of) once, one after another."""
    lines = [
        f"; ssdbench host cost: every job of suite {suite.name} v{suite.data['version']} on fio's null engine",
        "[global]",
        *(f"{k}={v}" for k, v in suite.data.get("fio", {}).items() if k not in GLOBAL_DROPPED),
        "ioengine=null",
        "size=1g",
        "time_based=1",
        f"runtime={CALIBRATE_MS}ms",
    ]
    for n, options in enumerate(jobs.values()):
        lines += [f"[job{n}]", "stonewall=1", *(f"{k}={v}" for k, v in options.items())]
    return "\n".join(lines) + "\n"


def calibrate(suite, steps, run_dir, cpus, should_stop):
    """Play the plan's jobs on the null engine, on `cpus` (fio's CPU for the steps). Returns the calibration as
    the environment keeps it: for each job, its options (as key() has them), fio's IOPS on the null engine, the
    host's microseconds per IO, and the share of a CPU fio had; where fio's output lives. None when the plan has
    no job the null engine plays."""
    jobs = jobs_of(steps)
    if not jobs:
        return None
    out_dir = os.path.join(run_dir, FOLDER)
    text = job_file(suite, jobs)
    outcome = fio.run(text, NAME, out_dir, os.devnull, lambda *_: None, should_stop, cpus, status=False)
    if outcome.state != "done":
        raise SsdbenchError(f"the host-cost calibration on fio's null engine {outcome.state}: {outcome.error}")
    measured = []
    for options, job in zip(jobs.values(), outcome.doc["jobs"]):
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
    return {
        "engine": "null",
        "seconds_each": CALIBRATE_MS / 1000,
        "cpus": sorted(cpus) if cpus else "any",
        "job_file": f"{FOLDER}/{NAME}.fio",
        "output": f"{FOLDER}/fio.json",
        "jobs": measured,
    }


def shares(step, doc, calibration):
    """The metric of each of a step's jobs that the calibration played: the host's share of the job's time per IO,
    in percent: the CPU time the host spent on each of the job's IOs on the null engine over the job's own time per
    IO on the drive (1e6 / its IOPS). A job fio did no IO in has none."""
    known = {job["key"]: job for job in (calibration or {}).get("jobs", [])}
    done = {job["jobname"]: job for job in doc.get("jobs", [])}
    out = []
    for name, options in step.jobs if step.kind in KINDS else ():
        null, job = known.get(key(options)), done.get(name)
        if not null or not null.get("cpu_us_per_io") or job is None:
            continue
        rate = iops(job)
        if not rate:
            continue
        prefix = f"{name}." if len(done) > 1 else ""
        source = (
            f"100 x the host's CPU time per IO on fio's null engine before the run, {null['cpu_us_per_io']:.3f} us "
            f"(environment host_cost: 1e6 / its IOPS x its CPU share), x the job's IOPS, {rate:,.0f} (fio.json "
            f"/jobs/{name}: read + write + trim iops), / 1e6"
        )
        share = null["cpu_us_per_io"] * rate / 1e4
        out.append(derive.Metric(f"{prefix}host_share_percent", share, "%", source))
    return out
