"""What the pages and the API show, gathered from the engine and the store in one place for both."""

import os
import shutil

from .. import drives, health, plan, store, suites
from ..errors import SsdbenchError


def suite_list():
    """The locked suites that can run, and why any shipped suite cannot (its file no longer matches)."""
    found, problems = [], []
    for name in suites.names():
        try:
            found.append(suites.load(name))
        except SsdbenchError as exc:
            problems.append(str(exc))
    return found, problems


def shipped_suite(run):
    """The shipped suite a run used, if this image still has it with the same hash."""
    if run["suite"] not in suites.names():
        return None
    try:
        suite = suites.load(run["suite"], allow_non_standard=True)
    except SsdbenchError:
        return None
    return suite if suite.sha256 == run["suite_hash"] else None


def drive_list(extra, allow_usb):
    """Every drive, plus the `extra` devices, each with its temperature now and the time each suite would
    take on it. Returns (drives, problems): a device that cannot be described becomes a problem line."""
    available, problems = suite_list()
    found = {}
    for named in [()] + [[path] for path in extra]:
        try:
            for d in drives.discover(named=named, allow_usb=allow_usb):
                found[d["path"]] = d
        except SsdbenchError as exc:
            problems.append(str(exc))
    for d in found.values():
        d["temperature_c"] = health.read_temperature(d["temperature_source"])
        d["estimates"] = {}
        for s in available if d["capacity_bytes"] else ():
            try:
                d["estimates"][s.name] = plan.estimate_seconds(plan.compile_plan(s, d["capacity_bytes"]))
            except (SsdbenchError, ValueError):
                d["estimates"][s.name] = None  # e.g. a drive too small for the suite's spans
    return list(found.values()), problems


def run_warnings(run):
    """Why a result should not be set against others, in words for the report."""
    out = []
    if run["state"] in ("failed", "cancelled", "interrupted"):
        out.append(f"the run is {run['state']}: only its completed steps have results")
    if not run["standard"]:
        out.append("non-standard suite: its hash is not one of the locked suites, so it compares with nothing")
    else:
        shipped = shipped_suite(run)
        if shipped and not shipped.data.get("comparable", True):
            out.append(f"not comparable: the {run['suite']} suite only checks that every step works")
    if run["drive"].get("development_target"):
        out.append("loop device: a development target, not comparable with drives")
    return out


def run_document(db, run_id):
    """A run as one JSON document: steps, metrics, environment, and every series as x and y arrays.

    The report's charts are drawn from this document alone, in the browser or in an offline report.
    """
    run = store.get_run(db, run_id)
    if run is None:
        return None
    # Each step's declaration in the suite (e.g. where its steady state is measured from), when known.
    suite = shipped_suite(run)
    specs = {step["id"]: step for step in suite.steps} if suite else {}
    for step in run["steps"]:
        step["spec"] = specs.get(step["key"])
    for s in run["series"]:
        s["x"], s["y"] = store.series_columns(db, s["id"])
    run["warnings"] = run_warnings(run)
    return run


def load_runs(load, db, run_ids):
    """The runs by id through `load` (store.get_run, or run_document for the series too)."""
    runs = [load(db, i) for i in run_ids]
    missing = [str(i) for i, r in zip(run_ids, runs) if r is None]
    if missing:
        raise LookupError(f"no run {', '.join(missing)}")
    return runs


def comparability(runs):
    """None when the runs share one suite hash, else the warning that they are not comparable."""
    if len({r["suite_hash"] for r in runs}) == 1:
        return None
    names = ", ".join(f"run {r['id']}: {r['suite']} {r['suite_hash'][:12]}" for r in runs)
    return f"not comparable: these runs used different suites ({names})"


def run_dir(data_dir, run_id):
    return os.path.join(data_dir, "runs", str(int(run_id)))


def run_files(data_dir, run_id):
    """The raw files of a run (job files, fio's JSON and logs), as paths relative to its folder."""
    top = run_dir(data_dir, run_id)
    out = []
    for folder, dirs, files in os.walk(top):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            out.append({"path": os.path.relpath(path, top), "bytes": os.path.getsize(path)})
    return out


def delete_run_files(data_dir, run_id):
    """Remove runs/<id>; if that is a symbolic link, only the link goes, never what it points to."""
    path = run_dir(data_dir, run_id)
    if os.path.islink(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)
