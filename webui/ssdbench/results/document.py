"""A run as one JSON document (what the report is drawn from, in the web UI and in a bundle),
and its folder of raw files (job files, fio's JSON and logs) beside the database."""

import functools

from ..errors import SsdbenchError
from ..suites import locked
from . import store, testbed, validity


def shipped_suite(run):
    """The shipped suite a run used, if this image still has it with the same hash."""
    return _shipped(run["suite"], run["suite_hash"])


@functools.lru_cache(maxsize=64)
def _shipped(name, sha256):
    """Parsed once a process: a lab summarises every run it receives, each asking for its suite twice."""
    if name not in locked.names():
        return None
    try:
        suite = locked.load(name, allow_non_standard=True)
    except SsdbenchError:
        return None
    return suite if suite.sha256 == sha256 else None


def recorded(run, section, key):
    """A value of the run's recorded environment, such as ("suite", "workload_sha256") or ("tools", "fio");
    None for a run that has none (queued, or recorded before the value was)."""
    return ((run.get("environment") or {}).get(section) or {}).get(key)


def incomparable(run):
    """Why a result compares with no standard result, in words for the report: none when it is comparable."""
    out = []
    if not run["standard"]:
        out.append("non-standard suite: its hash is not one of the locked suites, so it compares with nothing")
    else:
        shipped = shipped_suite(run)
        if shipped and not shipped.data.get("comparable", True):
            out.append(f"not comparable: the {run['suite']} suite only checks that every step works")
    for step in run["steps"]:
        trace = (step.get("detail") or {}).get("trace") or {}
        if trace.get("synthetic") is False:
            out.append(
                f"{title(step)} plays the tester's own trace {trace.get('name')} (sha256 {trace.get('sha256')}), "
                "not a standard trace: it compares only with runs of that same trace"
            )
    if run["drive"].get("development_target"):
        out.append("loop device: a development target, not comparable with drives")
    return out


def run_warnings(run, suspects=None):
    """Why a result should not be set against others, in words for the report. `suspects`: validity.suspects(run)
    when the caller has it already."""
    out = []
    if run["state"] in ("failed", "cancelled", "interrupted"):
        out.append(f"the run is {run['state']}: only its completed steps have results")
    out += incomparable(run)
    for entry in (run.get("environment") or {}).get("resumed") or []:
        out.append(
            f"resumed: the run was cut off (crash or power loss) in step {entry['cut_step']} and resumed from step "
            f"{entry['from_step']}; every step from {entry['from_step']} on ran again after the cut, with the "
            "environment recorded then"
        )
    adapted = [
        title(step) for step in run["steps"] if isinstance(step["detail"], dict) and step["detail"].get("adapted")
    ]
    if adapted:
        out.append(
            f"adapted to the drive's {run['drive'].get('logical_block_size')} B logical blocks: in "
            f"{'; '.join(adapted)}, the block sizes and trace IOs that are not whole logical blocks ran rounded up to "
            "them (each step says how)"
        )
    why = ((run.get("environment") or {}).get("data") or {}).get("why")
    if why:  # a stock fio: the data of before, made for every write, whose host share rule 9 flags step by step
        out.append(f"the data was made on the clock: {why}")
    out += testbed.flags(run)
    for step, reasons in zip(run["steps"], validity.suspects(run) if suspects is None else suspects):
        if reasons:
            out.append(f"{title(step)} is suspect: {'; '.join(reasons)}")
    return out


def title(step):
    """A step as the pages name it: its title, or its id where it has none (titles hold commas: a list of them is
    joined by "; ")."""
    return step.get("title") or step["key"]


def run_document(db, run_id):
    """A run as one JSON document: steps, metrics, environment, and every series as x and y arrays.

    The report's charts are drawn from this document alone, in the browser or in an offline report. Each
    step lists why its figures may not be the drive's (`suspect`, empty when nothing is wrong).
    """
    run = store.get_run(db, run_id)
    if run is None:
        return None
    # Each step's declaration in the suite (e.g. where its steady state is measured from), when known.
    suite = shipped_suite(run)
    specs = {step["id"]: step for step in suite.steps} if suite else {}
    suspects = validity.suspects(run)
    for step, reasons in zip(run["steps"], suspects):
        step["spec"] = specs.get(step["key"])
        step["suspect"] = reasons
    for s in run["series"]:
        s["x"], s["y"] = store.series_columns(db, s["id"])
    run["warnings"] = run_warnings(run, suspects)
    return run
