"""What the pages and the API show and do, written once for both: lists of drives and suites, start,
cancel, delete, export and compare. Each action answers (JSON document, HTTP status); the API sends it,
a page turns it into a message."""

import copy
import hashlib
import os
import tempfile
import threading
import time

from flask import url_for

from ..appliance import logs
from ..drives import discovery, health
from ..errors import SsdbenchError
from ..results import bench, card, document, ranking, store, usbexport
from ..results.document import recorded
from ..run import handoff, host_cost, plan, queue, repeat
from ..suites import locked, user_traces
from ..system import settings

MAX_COMPARE = 10
# A run's or a repeat set's id: 64 bits at most (SQLite's, PostgreSQL's bigint). A larger one is nobody's, and
# PostgreSQL compares it with the id column as a numeric, which no index serves: it read every row (issue 35, item
# 8). The pages' routes match only ids in range (ID, a Flask converter), as the API's document holds its own.
MAX_ID = 2**63 - 1
ID = f"int(min=1, max={MAX_ID})"
# A trace file sent to the web: larger ones are imported at the console (`ssdbench trace import`). The server
# takes a body this large from anyone before it can refuse it (docs/security.md).
TRACE_UPLOAD_BYTES = 4 * 1024 * 1024


def suite_list():
    """The locked suites that can run, and why any shipped suite cannot (its file no longer matches)."""
    found, problems = [], []
    for name in locked.names():
        try:
            found.append(locked.load(name))
        except SsdbenchError as exc:
            problems.append(str(exc))
    return found, problems


def listed_drives(config, only=None):
    """Every drive found, plus the app's extra devices (SSDBENCH_EXTRA_DRIVES), by path; with `only`, that
    device alone, if it is one of them (the others are not asked). Returns (drives, problems): a device that
    cannot be described becomes a problem line."""
    found, problems = {}, []
    extra = config["SSDBENCH_EXTRA_DRIVES"]
    for named in [()] + [[path] for path in extra if only in (None, path)]:
        try:
            for d in discovery.discover(named=named, allow_usb=config["SSDBENCH_ALLOW_USB"], only=only):
                found[d["path"]] = d
        except SsdbenchError as exc:
            problems.append(str(exc))
    return found, problems


# Discovery asks each drive's controller (nvme-cli, smartctl): seconds with a few drives, on every view of the
# Drives and Traces pages (issue 45: 2.3 to 7.3 s). The pages show it as the last discovery found it until the
# kernel announces a change of its devices (a uevent: a drive added, removed, resized or partitioned), the mounts
# change, or the tester asks (Refresh); its temperatures at most TEMPERATURE_S old. A Start discovers its own drive
# afresh, and that drive's row with it (remember), not every drive's: in the VM a refused Start took 2.2 s, 1.8 s of
# it asking the drives it was not about.
TEMPERATURE_S = 30
# temperatures_at None: a listing whose temperatures were never read. Not 0.0: the monotonic clock starts near
# the boot, so within TEMPERATURE_S of it a fresh listing would be shown with no temperature read at all.
_listing = {"key": None, "drives": None, "temperatures_at": None}
_listing_lock = threading.Lock()


def _devices_changed_key(config):
    parts = [repr((sorted(config["SSDBENCH_EXTRA_DRIVES"]), config["SSDBENCH_ALLOW_USB"]))]
    for path in ("/sys/kernel/uevent_seqnum", "/proc/self/mountinfo"):
        try:
            with open(path, "rb") as f:
                parts.append(hashlib.sha256(f.read()).hexdigest())
        except OSError:
            parts.append(str(time.monotonic()))  # not to be read: no cache
    return "|".join(parts)


def drive_list(config, refresh=False):
    """The listed drives, each with its temperature and the time each suite would take on it, and the problems met
    listing them: as the last discovery found them, unless something changed since (see above) or `refresh`."""
    key = _devices_changed_key(config)
    with _listing_lock:
        if refresh or _listing["key"] != key:
            available, problems = suite_list()
            found, unlisted = listed_drives(config)
            for d in found.values():
                d["estimates"] = estimates(d, available)
            problems += unlisted
            # what the boot refused of the settings (ssdbench.conf, the kernel command line), where a tester looks
            problems += [f"Settings: {problem}" for problem in settings.problems()]
            _listing.update(key=key, drives=(list(found.values()), problems), temperatures_at=None)
        drives, problems = _listing["drives"]
        read_at = _listing["temperatures_at"]
        if read_at is None or time.monotonic() - read_at > TEMPERATURE_S:
            for d in drives:
                d["temperature_c"] = health.read_temperature(d["temperature_source"])
            _listing["temperatures_at"] = time.monotonic()
        return copy.deepcopy(drives), list(problems)


def estimates(drive, available):
    """{suite name: the seconds it would take on the drive, or None where it cannot run there}."""
    found, native = {}, handoff.native()
    for s in available if drive["capacity_bytes"] else ():
        try:
            found[s.name] = run_seconds(plan.compile_plan(s, drive["capacity_bytes"]), native)
        except (SsdbenchError, ValueError):
            found[s.name] = None  # e.g. a drive too small for the suite's spans
    return found


def remember(config, drive):
    """A drive just discovered afresh (a Start's check) in place of its row of the listing, which the Drives page
    shows next: what the check saw of it, the others as they were. Nothing, where the listing is stale anyway."""
    with _listing_lock:
        if _listing["drives"] is None or _listing["key"] != _devices_changed_key(config):
            return
        drives, problems = _listing["drives"]
        rows = []
        for d in drives:
            if d["path"] == drive["path"]:
                # the estimates follow the capacity alone: made again only where it changed
                same = d["capacity_bytes"] == drive["capacity_bytes"]
                kept = d["estimates"] if same else estimates(drive, suite_list()[0])
                d = {**copy.deepcopy(drive), "estimates": kept, "temperature_c": d.get("temperature_c")}
            rows.append(d)
        _listing["drives"] = (rows, problems)


def run_seconds(steps, native):
    """A run's time on a drive: its steps', and before them the host-cost calibration (run/host_cost.py), on a fio
    that hands over through FIFOs where `native`."""
    return plan.estimate_seconds(steps) + host_cost.seconds(steps, native)


class LocalResults:
    """The appliance's own runs, from its store. The lab's LabResults answers the same questions about every
    appliance's runs, so that a page or an API call built on them serves both. An appliance holds few runs: it
    makes the cards and the bench from its documents when asked, where a lab reads them from its index."""

    def __init__(self, db):
        self.db = db

    def runs_page(self, before, limit):
        return store.runs_page(self.db, before, limit)

    def cards(self, run_ids):
        """The runs' cards (results/card.py), in this order. Raises LookupError naming the runs it lacks."""
        return [card.of(r) for r in load_runs(self.get_run, run_ids)]

    def bench_page(self, name, offset, limit):
        """As the lab's (lab/index.bench_page), from every done run's document."""
        done = (r["id"] for r in store.list_runs(self.db) if r["state"] == "done")
        rows = bench.latest(card.of(store.get_run(self.db, run_id)) for run_id in done)
        named = [row for row in rows if bench.model(row[0]).lower().startswith(name.lower())]
        return named[offset : offset + limit]

    def get_run(self, run_id):
        return store.get_run(self.db, run_id)

    def run_document(self, run_id):
        """The run with its series and why each step may be suspect: the document a bundle holds as result.json."""
        return document.run_document(self.db, run_id)

    def repeat_set(self, run_id):
        """The cards of the done runs of the run's repeat set, what its ranked bar's spread is of; None for a run
        of no set."""
        place = store.repeat_of(self.db, run_id)
        held = store.get_repeat(self.db, place[0]) if place else None
        members = [store.get_run(self.db, r["id"]) for r in held["runs"]] if held else []
        return [card.of(m) for m in members if m and m["state"] == "done"] or None


def load_runs(load, run_ids):
    """The runs by id through `load` (a results' get_run, or run_document for the series too)."""
    runs = [load(i) for i in run_ids]
    missing = [str(i) for i, r in zip(run_ids, runs) if r is None]
    if missing:
        raise LookupError(f"no run {', '.join(missing)}")
    return runs


# What two comparable runs share: the suite, everything it made the drive do, and the fio that did it. Each:
# what the warning calls it, the run's value, and how the warning shows that value.
SAME = (
    ("suites", lambda r: r["suite_hash"], lambda r, value: f"{r['suite']} {value[:12]}"),
    ("workloads", lambda r: recorded(r, "suite", "workload_sha256"), lambda r, value: value[:12]),
    ("fio versions", lambda r: recorded(r, "tools", "fio"), lambda r, value: value),
)


# The run list's pages: the history page's, and at most what GET /api/runs?limit= takes.
HISTORY_PAGE = 100
MAX_RUNS_PAGE = 500


def runs_page(results, before, limit):
    """A page of the run list, newest first: {runs, next}, next the `before` of the page after it (None: the last
    page). Its cost is its length's, however many runs the results hold."""
    runs = results.runs_page(before, limit + 1)
    return {"runs": runs[:limit], "next": runs[limit - 1]["id"] if len(runs) > limit else None}


def ranked(results, cards):
    """The compare page's ranked bar charts of runs (their cards), cards[0] the current one."""
    return ranking.charts(cards, [results.repeat_set(c["id"]) for c in cards])


# The bench's models a page shows, by name; the pages a lab of many models has; the longest search it takes.
BENCH_PAGE = 100
MAX_BENCH_PAGE = 100_000
MAX_SEARCH = 200


def drive_bench(results, name="", page=1):
    """A page of the /bench table, by model name: the drive models the results hold whose name begins with `name`
    (any case), each its latest done comparable run's review figures, the table's page `page` (from 1), and
    whether a page follows. Its cost is its length's, however many models the results hold."""
    rows = results.bench_page(name, (page - 1) * BENCH_PAGE, BENCH_PAGE + 1)
    return {**bench.table(rows[:BENCH_PAGE]), "page": page, "more": len(rows) > BENCH_PAGE, "name": name}


def comparability(runs):
    """None when the runs share one suite hash, one workload hash and one fio version; else the warning
    that says which differ."""
    differ = []
    for what, key, show in SAME:
        values = [key(r) for r in runs]
        if len(set(values)) > 1:
            shown = ", ".join(f"run {r['id']}: {show(r, v) if v else 'not recorded'}" for r, v in zip(runs, values))
            differ.append(f"different {what} ({shown})")
    return f"not comparable: these runs used {'; '.join(differ)}" if differ else None


def testbeds(runs):
    """Each run's testbed (results/testbed.py), why compare sets it apart from the first run (its workload, or a
    part of its testbed) and the parts it compares with unverified, for GET /api/compare: the runs are run
    documents."""
    cards = [card.of(r) for r in runs]
    judged = [ranking.judge(cards[0], c) for c in cards]
    return [
        {"run": c["id"], **c["testbed"], "apart": why, "unverified": unknown}
        for c, (why, unknown) in zip(cards, judged)
    ]


def start_run(db, body, config, trace=None):
    """Queue a run from a request body: (JSON document, HTTP status). Shared by the API and the Start forms:
    a locked suite (the body's suite), or the suite that plays an imported `trace`."""

    def enqueue(*args):
        run_id = queue.enqueue(db, config["SSDBENCH_DATA_DIR"], *args, trace=trace)
        return {"id": run_id, "url": url_for("pages.run", run_id=run_id)}

    return _start(db, body, config, enqueue, trace)


def start_repeat(db, body, config):
    """Queue a repeat set from a request body ({..., "times": N}): (JSON document, HTTP status). Shared by the API
    and the Start form's Repeat button."""
    times = body.get("times")
    if isinstance(times, str) and times.isascii() and times.strip().isdigit():
        times = int(times)  # from a form
    elif isinstance(times, float) and times.is_integer():
        times = int(times)  # JSON's 5.0 is the whole number 5
    if isinstance(times, bool) or not isinstance(times, int) or not 2 <= times <= repeat.MAX_TIMES:
        return {"error": f"give times: how many runs, a whole number from 2 to {repeat.MAX_TIMES}"}, 400

    def enqueue(suite, drive, confirm, destroy_data, allow_usb):
        repeat_id = queue.enqueue_repeat(
            db, config["SSDBENCH_DATA_DIR"], suite, times, drive, confirm, destroy_data, allow_usb
        )
        return {"id": repeat_id, "url": url_for("pages.repeat", repeat_id=repeat_id)}

    return _start(db, body, config, enqueue)


def _start(db, body, config, enqueue, trace=None):
    """Check a Start request and queue it with enqueue(suite, drive, confirm, destroy_data, allow_usb), which
    answers the document of what it queued: a locked suite (the body's suite), or with `trace` the suite that
    plays that imported trace. The drive must be one that the drives list shows (the queue then checks that
    it is eligible): no device path from a form is trusted."""
    suite = user_traces.SUITE_NAME if trace is not None else body.get("suite")
    drive, confirm = body.get("drive"), body.get("confirm")
    if not (isinstance(drive, str) and isinstance(suite, str) and isinstance(confirm, str)):
        return {"error": "give drive (a device path), suite (a suite name) and confirm (the drive's ID)"}, 400
    if trace is not None:
        try:
            user_traces.entry(config["SSDBENCH_DATA_DIR"], trace)
        except SsdbenchError as exc:
            return {"error": str(exc)}, 404
    missing = f"{drive} is not one of the drives this appliance lists (see the drives page)"
    destroy_data = _destroys(body)
    refused = _refused(db, config, drive, missing, confirm, destroy_data, "started")
    if refused:
        return refused
    return _queued(lambda: enqueue(suite, drive, confirm, destroy_data, config["SSDBENCH_ALLOW_USB"]), 201)


def _destroys(body):
    """Whether the tester ticked "I know it holds data": JSON's true, or a form's checkbox."""
    return body.get("destroy_data") in (True, "1", "on", "true")


def _refused(db, config, path, missing, confirm, destroy_data, verb):
    """Why Start (or Resume, `verb` says which) does not queue a run on the drive at `path`, as (JSON document,
    HTTP status); None when it may. The drive is discovered afresh (its listing's row with it); a drive not listed
    is refused with `missing`."""
    try:
        store.check_idle(db)
    except store.RunBusy as exc:
        return {"error": f"a run is already active: {exc}"}, 409
    listed = listed_drives(config, only=path)[0].get(path) if path else None
    if listed is None:
        return {"error": missing}, 404
    remember(config, listed)
    # The two refusals a tester meets, in the page's words; the queue checks them again, in the command line's.
    if listed["eligible"] and confirm != listed["confirm_id"]:
        return {
            "error": f"Not {verb}: the ID typed does not match this drive's. Type {listed['confirm_id']} exactly, "
            "to confirm that every byte on it may be destroyed."
        }, 409
    if listed["eligible"] and listed["needs_wipe_confirmation"] and not destroy_data:
        return {
            "error": f'Not {verb}: this drive holds data (a partition table or a file system). Tick "I know it '
            'holds data" to destroy it.'
        }, 409
    return None


def _queued(enqueue, status):
    """(what enqueue() queued, `status`), or why the queue refused it: (JSON document, HTTP status)."""
    try:
        return enqueue(), status
    except store.RunBusy as exc:
        return {"error": f"a run is already active: {exc}"}, 409
    except SsdbenchError as exc:  # the drive's state or its confirmation, a suite that fails its lock, no room
        return {"error": str(exc)}, 409


def drive_of(config, run):
    """The drive listed now that is the one `run` ran on (its model, serial and capacity; its path may have
    changed since), or None."""
    listed, _ = drive_list(config)
    return next(
        (d for d in listed if all(d.get(k) == run["drive"].get(k) for k in ("model", "serial", "capacity_bytes"))),
        None,
    )


def resume_run(db, run_id, body, config):
    """Queue an interrupted run to resume on its drive, from the request body ({"confirm": the drive's ID,
    "destroy_data": ...}): (JSON document, HTTP status). Shared by the API and the run page's Resume form. The
    drive is the one the drives list shows with the run's model, serial and capacity, never a path from a form."""
    run = store.get_run(db, run_id)
    if run is None:
        return {"error": f"no run {run_id}"}, 404
    if run["state"] != "interrupted" or run["origin"] != "local":
        return {"error": f"run {run_id} is {run['state']}: only a run cut off by a crash or power loss resumes"}, 409
    path = (drive_of(config, run) or {}).get("path")
    ran_on = f"{run['drive'].get('model')}, serial {run['drive'].get('serial')}"
    missing = f"the drive run {run_id} ran on ({ran_on}) is not connected: connect it, then look again"
    confirm, destroy_data = body.get("confirm"), _destroys(body)
    refused = _refused(db, config, path, missing, confirm, destroy_data, "resumed")
    if refused:
        return refused

    def enqueue():
        data_dir, allow_usb = config["SSDBENCH_DATA_DIR"], config["SSDBENCH_ALLOW_USB"]
        entry = queue.enqueue_resume(db, data_dir, run_id, path, confirm, destroy_data, allow_usb)
        return {"id": run_id, "url": url_for("pages.run", run_id=run_id), "from_step": entry["from_step"]}

    return _queued(enqueue, 202)


def trace_list(config):
    """The imported traces, and a line for each record that cannot be read."""
    return user_traces.entries(config["SSDBENCH_DATA_DIR"])


def import_trace(content, fmt, name, qd, filename, config):
    """Import an uploaded trace file (its bytes) of `fmt`, called `name` (None: from `filename`), played at
    `qd` if it is a fio iolog: (JSON document, HTTP status). Shared by the API and the Traces page. A
    malformed file is refused with its line (422), a taken name with 409; nothing of it is kept."""
    if fmt not in user_traces.FORMATS:
        return {"error": f"format must be one of {', '.join(user_traces.FORMATS)}"}, 400
    shown = os.path.basename(filename or "") or "uploaded-trace"
    # The file is parsed from the system's temporary folder (memory, on the appliance); only the imported
    # trace goes to the data partition.
    with tempfile.TemporaryDirectory(prefix="ssdbench-trace-") as tmp:
        path = os.path.join(tmp, "upload")
        with open(path, "wb") as f:
            f.write(content)
        try:
            entry = user_traces.import_file(config["SSDBENCH_DATA_DIR"], path, fmt, name, qd, source=shown)
        except user_traces.TraceExists as exc:
            return {"error": str(exc)}, 409
        except SsdbenchError as exc:
            return {"error": str(exc).replace(path, shown)}, 422
    return entry, 201


def stick_list(config):
    """The USB sticks found, plus the app's extra ones (SSDBENCH_EXTRA_STICKS): the only export targets."""
    return usbexport.sticks(named=config["SSDBENCH_EXTRA_STICKS"])


def export_runs(db, body, config):
    """Write bundles to a USB stick from a request body ({"runs": [ids], "device": path}; no runs means every
    ended run): (JSON document, HTTP status). Shared by the API (its body checked against the document) and
    the run page's Export button. The stick must be one that the stick list shows."""
    runs, device = body.get("runs"), body.get("device") or None
    runs = None if runs is None else [int(r) for r in runs]  # whole numbers (checked), maybe written as 2.0
    missing = [str(r) for r in runs or () if store.run_state(db, r) is None]
    if missing:
        return {"error": f"no run {', '.join(missing)}"}, 404
    try:
        stick = usbexport.choose(stick_list(config), device)
        done = usbexport.export(
            db,
            config["SSDBENCH_DATA_DIR"],
            usbexport.ended_runs(db) if runs is None else runs,
            stick,
            beside=logs.beside_bundles,
        )
    except usbexport.NotAStick as exc:
        return {"error": str(exc)}, 404
    except SsdbenchError as exc:
        return {"error": str(exc)}, 409
    return {
        "device": stick["device"],
        "unmounted": not stick["mountpoint"],
        "pull": usbexport.when_to_pull(stick),
        "exported": done,
    }, 200


def compare_ids(values):
    """Run ids from ?run=1&run=2 (or runs=1,2), in the order given: (ids, error message)."""
    try:
        ids = list(dict.fromkeys(int(v) for value in values for v in value.split(",") if v.strip()))
    except ValueError:
        return None, "run ids are whole numbers"
    if not 2 <= len(ids) <= MAX_COMPARE:
        return None, f"pick 2 to {MAX_COMPARE} runs to compare"
    return ids, None


def _cancel(what, state, ask):
    """Ask to stop a run or a repeat set (`what` names it) that is in `state`: ask() when it is active. Returns
    the error answer, or None once asked."""
    if state is None:
        return {"error": f"no {what}"}, 404
    if state not in store.ACTIVE:
        return {"error": f"{what} is {state}: there is nothing to cancel"}, 409
    ask()
    return None


def cancel_run(db, run_id):
    """Ask the runner to stop a queued or running run; it stops fio cleanly and keeps the completed steps."""
    refused = _cancel(f"run {run_id}", store.run_state(db, run_id), lambda: store.request_cancel(db, run_id))
    return refused or ({"id": run_id, "cancel_requested": True}, 202)


def cancel_repeat(db, repeat_id):
    """Ask the runner to stop a queued or running repeat set: no further run starts, and its run in progress
    stops as a cancelled run does."""
    refused = _cancel(
        f"repeat set {repeat_id}",
        store.repeat_state(db, repeat_id),
        lambda: store.request_repeat_cancel(db, repeat_id),
    )
    return refused or ({"id": repeat_id, "cancel_requested": True}, 202)


def delete_run(db, data_dir, run_id):
    """Delete an ended run, with its files."""
    try:
        if not store.delete_run(db, data_dir, run_id):
            return {"error": f"no run {run_id}"}, 404
    except store.RunBusy as exc:
        return {"error": str(exc)}, 409
    return {"id": run_id, "deleted": True}, 200
