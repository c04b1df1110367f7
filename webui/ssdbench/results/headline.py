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

from . import validity
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


# The figures a review publishes, one per test of the methodology (docs/methodology.md, "The summary"): what a
# run's summary shows first, and what compare ranks and the bench tabulates. Each: its id, its words, the test
# it belongs to, the step keys that measure it (the first present counts; a short suite names some steps
# otherwise) or a step kind (one figure per step of that kind: a suite plays several traces), the metric,
# its unit, and which way is better.
@dataclass(frozen=True)
class Review:
    id: str
    label: str
    test: str
    steps: tuple
    name: str
    unit: str
    better: str  # "higher" or "lower"
    kind: str = None  # every step of this kind instead of `steps`
    # A yes/no metric of the step that must be yes for the figure to stand: a steady-state average is the drive's
    # steady state only where steady state was reached; otherwise the figure is "not reached" (not_reached()).
    requires: str = None


HIGHER, LOWER = "higher", "lower"
REVIEW = (
    Review(
        "rand-write-4k-qd3",
        "4K random write, QD3",
        "four corners",
        ("rand-write-4k-qd3",),
        "write.iops",
        "IOPS",
        HIGHER,
    ),
    Review(
        "rand-read-4k-qd3",
        "4K random read, QD3",
        "four corners",
        ("rand-read-4k-qd3", "rand-read-4k"),
        "read.iops",
        "IOPS",
        HIGHER,
    ),
    Review(
        "seq-read-128k", "128K sequential read, QD1", "four corners", ("seq-read-128k",), "read.mb_s", "MB/s", HIGHER
    ),
    Review(
        "seq-write-128k",
        "128K sequential write, QD1",
        "four corners",
        ("seq-write-128k",),
        "write.mb_s",
        "MB/s",
        HIGHER,
    ),
    Review(
        "consistency",
        "Steady-state 4K random write",
        "consistency",
        ("consistency",),
        "steady.avg_iops",
        "IOPS",
        HIGHER,
        requires="steady.reached",
    ),
    Review(
        "consistency-spare",
        "Steady-state 4K random write, 25% spare area",
        "consistency",
        ("consistency-spare",),
        "steady.avg_iops",
        "IOPS",
        HIGHER,
        requires="steady.reached",
    ),
    Review("trace-mb-s", "Storage Bench data rate", "Storage Bench", (), "all.mb_s", "MB/s", HIGHER, kind="trace"),
    Review("trace-busy", "Storage Bench disk busy time", "Storage Bench", (), "all.busy_s", "s", LOWER, kind="trace"),
    Review(
        "burst-service",
        "Mixed Burst: reads' total service time",
        "Mixed Burst",
        (),
        "burst.read.service_s",
        "s",
        LOWER,
        kind="burst",
    ),
)


def _chosen(run):
    """(Review, step, id, label) for every review figure a run's done steps measure."""
    done = {s["key"]: s for s in run["steps"] if s["state"] == "done"}
    for r in REVIEW:
        if r.kind:
            keyed = [s for s in done.values() if s["kind"] == r.kind]
            chosen = [
                (s, f"{r.id}/{s['key']}", f"{r.label} ({s['key']})" if len(keyed) > 1 else r.label) for s in keyed
            ]
        else:
            first = next((done[k] for k in r.steps if k in done), None)
            chosen = [(first, r.id, r.label)] if first else []
        for step, fid, label in chosen:
            yield r, step, fid, label


def _value(step, name):
    metric = next((m for m in step["metrics"] if m["name"] == name), None)
    return metric if metric is not None and isinstance(metric["value"], (int, float)) else None


def proof(step):
    """A steady-state figure's proof, in words, beside it: its judged window's slope, and the drive fills written
    before and within the window (run/derive.py); None for a step that recorded none (runs before them)."""
    slope, before, within = (
        _value(step, f"steady.{name}") for name in ("slope_percent_per_min", "fills_before", "fills_in_window")
    )
    parts = [f"slope {slope['value']:+.2f}%/min"] if slope else []
    if before and within:
        parts.append(f"{before['value']:.2f} drive fills before the window, {within['value']:.2f} within")
    return ", ".join(parts) or None


def review(run):
    """The review figures a run has (store.get_run's shape, or a run document), in REVIEW's order: dicts with
    id, label, test, step, name, value, unit, better, source and proof (a steady-state figure's, else None). Only
    steps that ended done count, as for figures(), and only where the figure's condition holds (not_reached()). A
    figure measured per step of a kind gets the step's key in its id and label."""
    out = []
    for r, step, fid, label in _chosen(run):
        metric = _value(step, r.name)
        if metric is None or r.requires and (_value(step, r.requires) or {}).get("value") != 1:
            continue
        out.append(
            {
                "id": fid,
                "label": label,
                "test": r.test,
                "step": step["key"],
                "name": r.name,
                "value": metric["value"],
                "unit": metric["unit"],
                "better": r.better,
                "source": metric["source"],
                "host": host_bound(step, r.name),
                "proof": proof(step) if r.requires == "steady.reached" else None,
            }
        )
    return out


def host_bound(step, name):
    """Why the PC is in a figure (validity rule 9), in words, or None: the host share of the figure's own job
    (a matrix's job by the name's prefix) and the step's wait for a CPU."""
    prefix = name.rsplit(".", 2)[0] + "." if name.count(".") >= 2 else ""
    names = (f"{prefix}host_share_percent", "host.cpu_wait_percent")
    metrics = {m["name"]: m["value"] for m in step["metrics"] if m["name"] in names and _value(step, m["name"])}
    return "; ".join(validity.host_bound(metrics)) or None


def not_reached(run):
    """The review figures whose step ended done but whose condition does not hold (steady state not reached):
    dicts with id, label, test, step and why (the condition metric's source), shown as "not reached" where the
    figure would be, never ranked or tabulated as a number. A step that recorded the condition but no figure (too
    few rounds for a steady-state window) is not reached too."""
    out = []
    for r, step, fid, label in _chosen(run):
        held = _value(step, r.requires) if r.requires else None
        measured = _value(step, r.name) is not None or held is not None
        if r.requires and measured and (held is None or held["value"] != 1):
            why = held["source"] if held else f"{r.requires} not recorded"
            out.append({"id": fid, "label": label, "test": r.test, "step": step["key"], "why": why})
    return out


def column(figure_id):
    """A review figure's column of a table ({id, label, unit, better}) from its id alone: for a figure a run has
    no value of (not_reached())."""
    r = REVIEW[review_order(figure_id)]
    return {"id": figure_id, "label": r.label, "unit": r.unit, "better": r.better}


def review_order(figure_id):
    """Where a review figure's id (REVIEW's id, or id/step key) comes in REVIEW: to order columns and charts."""
    base = figure_id.split("/")[0]
    return next(i for i, r in enumerate(REVIEW) if r.id == base)
