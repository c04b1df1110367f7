"""The headline figures of a run: for each step, the figures it exists to measure, picked from its stored
metrics by one rule, here, for every report that sets runs side by side (the repeatability summary first).

- a fio job (a fio step, or each job of a matrix), for each direction it moved data in: its throughput, in
  IOPS for a random pattern and in MB/s for a sequential one (for one block size the two differ by a fixed
  factor, so one of them says it all), and its average latency;
- a step measured to steady state (consistency): its steady-state average IOPS too;
- a zone sweep: its average write and read MB/s over the zones, and the recovery against the clean sweep;
- a trace playback: its data rate for all IO, for reads and for writes (bytes over disk busy time, which
  the busy time itself would only repeat);
- Mixed Burst: the reads' total service time and the background's MB/s, both while the bursts run.

Never a maximum or a percentile (one IO's extreme, not a figure that repeats to a few percent), a count of
bytes or IOs (the suite fixes them), a TRIM's time or a CPU share. Only the stored run is read (its steps'
metrics and fio job files), so a run imported from a bundle, or made with a suite this image does not ship,
has the same headline figures as a local one.
"""

import re
from dataclasses import dataclass

from .validity import fio_jobs

# A fio job's latency at QD1 has a threshold of its own (the suite's [repeat] qd1_latency_cov_percent).
THROUGHPUT, LATENCY, QD1_LATENCY, DERIVED = "throughput", "latency", "qd1 latency", "derived"
JOB_METRIC = re.compile(r"(?:(?P<job>.+)\.)?(?P<direction>read|write)\.(?P<what>iops|mb_s|lat_mean)")
# The figures of the step kinds that derive their own, by metric name.
DERIVED_FIGURES = {
    "fio": ("steady.avg_iops",),
    "sweep": ("write.avg_mb_s", "read.avg_mb_s", "recovered_percent"),
    "trace": ("all.mb_s", "read.mb_s", "write.mb_s"),
    "burst": ("burst.read.service_s", "burst.write.mb_s"),
}
JOB_KINDS = ("fio", "matrix")


@dataclass(frozen=True)
class Figure:
    step: str  # the step's key
    name: str  # the metric's name
    value: float
    unit: str
    kind: str  # THROUGHPUT, LATENCY, QD1_LATENCY or DERIVED

    @property
    def key(self):
        """What names one figure across the runs of one suite."""
        return f"{self.step}/{self.name}"


def figures(run):
    """The headline figures of a run (store.get_run's shape), step by step, in the order of its metrics.
    Only steps that ended done: a step cut short measured less than the suite asks."""
    out = []
    for step in run["steps"]:
        if step["state"] != "done":
            continue
        metrics = [m for m in step["metrics"] if isinstance(m["value"], (int, float))]
        if step["kind"] in JOB_KINDS:
            out += _job_figures(step, metrics)
        chosen = DERIVED_FIGURES.get(step["kind"], ())
        out += [Figure(step["key"], m["name"], m["value"], m["unit"], DERIVED) for m in metrics if m["name"] in chosen]
    return out


def _job_figures(step, metrics):
    jobs = fio_jobs(step["job_file"] or "")
    # fio names a metric after its job only when the step has several (run/fio_output.fio_metrics).
    options = dict(jobs) if len(jobs) > 1 else {None: jobs[0][1] if jobs else {}}
    out = []
    for m in metrics:
        found = JOB_METRIC.fullmatch(m["name"])
        if not found or found["job"] not in options:
            continue
        job = options[found["job"]]
        if found["what"] == "lat_mean":
            kind = QD1_LATENCY if job.get("iodepth") == "1" else LATENCY
        elif found["what"] == ("iops" if job.get("rw", "").startswith("rand") else "mb_s"):
            kind = THROUGHPUT
        else:
            continue
        out.append(Figure(step["key"], m["name"], m["value"], m["unit"], kind))
    return out
