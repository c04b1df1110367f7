"""The run queue: the web puts runs in it, the runner service takes them out and executes them.

The service is a process of its own, so the web never runs fio, and a crash on either
side leaves the other working. It takes the same run lock as `ssdbench run`, so a run
started at the console and one queued from the web never overlap. SIGTERM during a run
cancels that run, as `ssdbench cancel` does; while idle it stops the service.
"""

import json
import sys
import time
import traceback

from ..errors import SsdbenchError
from ..results import store
from ..suites import locked, user_traces
from . import quiet, repeat, runner, workload

POLL_S = 0.5


def load_suite(data_dir, suite_name, trace=None):
    """A locked suite by name, or with `trace` the (non-standard) suite that plays that imported trace; with
    its workload hash."""
    if trace is not None:
        return workload.verified(user_traces.suite(data_dir, trace))
    return workload.verified(locked.load(suite_name))


def enqueue(db, data_dir, suite_name, device, confirm, destroy_data=False, allow_usb=False, trace=None):
    """Queue a locked suite, or the suite that plays an imported `trace`, on a drive, after the checks that
    `ssdbench run` makes; returns the run id.

    Raises store.RunBusy while another run is queued or running, SsdbenchError if the suite, the
    target or the room for its results is refused. The service checks again when it takes the run: the
    drive may have changed.
    """
    suite, drive, steps, request = checked(db, data_dir, suite_name, device, confirm, destroy_data, allow_usb, trace)
    return store.create_run(db, drive, suite, steps, state="queued", request=request)


def enqueue_repeat(db, data_dir, suite_name, times, device, confirm, destroy_data=False, allow_usb=False):
    """Queue a repeat set: the suite `times` times on the drive, after the same checks; returns the set's id.
    Its first run is queued with it; the service runs the others after it, one by one, under the same lock."""
    repeat.check_times(times)
    suite, drive, steps, request = checked(db, data_dir, suite_name, device, confirm, destroy_data, allow_usb)
    thresholds = locked.repeat_thresholds(suite.data)
    return store.create_repeat(db, drive, suite, times, thresholds, request, plan=steps)


def enqueue_resume(db, data_dir, run_id, device, confirm, destroy_data=False, allow_usb=False):
    """Queue an interrupted run to resume on its drive, now at `device`, after the checks that `ssdbench run
    --resume` makes: the same suite, the same drive (model, serial, capacity, ID) and plan. The service resumes
    it as it takes it (start_claimed); returns where it resumes (runner.resume_entry)."""
    run = store.get_run(db, run_id)
    if run is None:
        raise SsdbenchError(f"no run {run_id}")
    trace = (run["request"] or {}).get("trace")
    suite, drive, steps, request = checked(db, data_dir, run["suite"], device, confirm, destroy_data, allow_usb, trace)
    if suite.sha256 != run["suite_hash"]:
        raise SsdbenchError(
            f"run {run_id} ran another version of the suite {run['suite']} (sha256 {run['suite_hash'][:16]}...): "
            "this release cannot resume it"
        )
    entry = runner.resumable(db, run_id, drive, steps)
    store.queue_resume(db, run_id, {**request, "resume": True})
    return entry


def checked(db, data_dir, suite_name, device, confirm, destroy_data, allow_usb, trace=None):
    """The suite, the drive, the plan and the tester's request, once every check has passed."""
    store.check_idle(db)
    suite = load_suite(data_dir, suite_name, trace)
    drive, steps = runner.prepare(data_dir, suite, device, confirm, destroy_data, allow_usb)
    request = repeat.request(drive, confirm, destroy_data, allow_usb)
    if trace is not None:
        request["trace"] = trace
    return suite, drive, steps, request


def log(message):
    print(f"ssdbench runner: {message}", file=sys.stderr, flush=True)


def serve(data_dir, poll_s=POLL_S, after_run=None, when_idle=None):
    """Take queued runs one at a time, until a signal comes while idle. after_run(db, data_dir, run_id, log),
    if given, is called as each run ends (the appliance exports it to the USB stick, or queues it for the lab);
    when_idle(data_dir, log, interrupted) at each poll that finds no run queued (the lab's uploads are sent then,
    so that they never disturb a run; interrupted() says a run was queued since, or a signal came)."""
    runner.check_host()
    db = store.connect(data_dir)
    # The signals are taken first: a stop while a killed run's changes are put back lets that end, and be logged.
    with runner.StopSignals() as signals:
        lock = try_lock(data_dir)
        if lock is not None:
            mark_interrupted(db)
            put_back(data_dir)
            lock.release()
        log(f"waiting for queued runs in {store.db_path(data_dir)}")
        while not signals.received:
            if store.next_queued_run(db) is not None:
                run_id = take_next(db, data_dir, signals)
                if run_id is not None and after_run:
                    after_run(db, data_dir, run_id, log)
            elif when_idle:
                when_idle(data_dir, log, lambda: signals.received or store.next_queued_run(db) is not None)
            time.sleep(poll_s)
    log("stopped by a signal")


def try_lock(data_dir):
    """The run lock, or None while `ssdbench run` holds it."""
    try:
        return runner.RunLock(data_dir).acquire()
    except SsdbenchError:
        return None


def mark_interrupted(db):
    """A run still marked running has lost its process (a crash or a power cut). Only under the lock."""
    for run_id in store.mark_interrupted(db):
        log(f"run {run_id}: interrupted (its process is gone); its completed steps are kept")


def put_back(data_dir):
    """What a run that was killed had changed of the testbed, put back from the record it left (run/quiet.recover),
    and logged. Only under the lock."""
    for line in quiet.recovered_lines(quiet.recover(data_dir) or {}):
        log(line)


def take_next(db, data_dir, signals):
    """Execute the oldest queued run under the run lock. A run that fails, for any reason, ends as
    failed with the reason, and the service goes on. A signal that comes during the run cancels it
    and is then forgotten. Returns the run id, or None if none was taken."""
    lock = try_lock(data_dir)
    if lock is None:
        return None  # a run started at the console: the queued run waits for it
    try:
        mark_interrupted(db)
        row = store.next_queued_run(db)
        if row is None or not store.claim_run(db, row["id"]):
            return None
        log(f"run {row['id']}: {row['suite']} started")
        place = store.repeat_of(db, row["id"])
        if place:
            store.claim_repeat(db, place[0])
        try:
            state, error = start_claimed(db, data_dir, lock, row, signals)
            log(f"run {row['id']}: {state}" + (f": {error}" if error else ""))
            if place:
                state, error = go_on_repeating(db, data_dir, lock, row, place, state, error, signals)
                log(f"repeat set {place[0]}: {state}" + (f": {error}" if error else ""))
        except Exception as exc:  # a bug in one run must not take the service down with it
            traceback.print_exc()
            state, error = "failed", f"internal error: {exc!r}"
            if store.run_state(db, row["id"]) == "running":
                store.finish_run(db, row["id"], state, error)
            if place and store.repeat_state(db, place[0]) == "running":
                store.finish_repeat(db, place[0], state, error)
            log(f"run {row['id']}: {state}: {error}")
        signals.received = False
        return row["id"]
    finally:
        lock.release()


def go_on_repeating(db, data_dir, lock, row, place, state, error, signals):
    """After the first run of a repeat set: the set's other runs, under the same lock, unless that run did not
    end done, which ends the set. Returns the set's (state, error)."""
    repeat_id, position = place
    times = store.get_repeat(db, repeat_id)["times"]
    if state != "done":
        error = repeat.stopped_by(row["id"], position, times, state, error)
        store.finish_repeat(db, repeat_id, state, error)
        return state, error

    try:
        suite = queued_suite(data_dir, row)
    except SsdbenchError as exc:
        store.finish_repeat(db, repeat_id, "failed", str(exc))
        return "failed", str(exc)

    def on_run(at, run_id):
        log(f"repeat set {repeat_id}: run {run_id} ({at} of {times}) started")

    return repeat.carry_on(db, data_dir, lock, repeat_id, suite, signals, position + 1, on_run=on_run)


def queued_suite(data_dir, row):
    """The suite a queued run names (a locked one, or the one that plays an imported trace), as it was when
    the run was queued."""
    suite = load_suite(data_dir, row["suite"], json.loads(row["request_json"]).get("trace"))
    if suite.sha256 != row["suite_hash"]:
        raise SsdbenchError(f"the suite {row['suite']} changed since the run was queued")
    return suite


def start_claimed(db, data_dir, lock, row, signals):
    """Check a claimed run's request again, as the drive may have changed since it was queued, then run it; or
    resume it, when it is an interrupted run queued to resume (enqueue_resume). A resume that does not begin
    leaves the run interrupted, still to be resumed, and says why."""
    request = json.loads(row["request_json"])
    resume = request.get("resume", False)

    def cancelled():
        return signals.received or store.cancel_requested(db, row["id"])

    def not_started(state, error):
        if resume:
            store.keep_interrupted(db, row["id"], f"not resumed: {error}")
        else:
            store.finish_run(db, row["id"], state, error)
        return state, error

    if cancelled():
        return not_started("cancelled", "cancelled before it started")
    try:
        suite = queued_suite(data_dir, row)
        drive, steps = runner.prepare_again(data_dir, suite, request)
        entry = runner.resumable(db, row["id"], drive, steps) if resume else None
    except SsdbenchError as exc:
        return not_started(*(("cancelled", "cancelled before it started") if cancelled() else ("failed", str(exc))))
    if entry is None:
        store.set_run_drive(db, row["id"], drive)
    else:
        runner.stop_leftovers(store.run_dir(data_dir, row["id"]))
        store.resume_run(db, data_dir, row["id"], suite.sha256, entry, claimed=True)
    return runner.run_under_lock(db, data_dir, lock, row["id"], suite, drive, steps, signals, resumed=entry)
