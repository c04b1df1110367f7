"""What the pages and the API show, gathered from the engine and the store in one place for both."""

import os
import shutil

from .. import document, drives, health, plan, suites
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


def delete_run_files(data_dir, run_id):
    """Remove runs/<id>; if that is a symbolic link, only the link goes, never what it points to."""
    path = document.run_dir(data_dir, run_id)
    if os.path.islink(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)
