"""Repeat sets: one suite run N times in a row on one drive, to measure how far its figures repeat.

Each run is the whole suite, its purge first where the suite has one, so each starts from the state the suite
sets. The set holds the run lock from its first run to its last, so that nothing else runs on the drive
between them, and the drive is checked again before each run. A run that does not end done (a cancel, a
failure) ends the set: a cancel stops the set, not just one run. What the set measured is
results/repeatability.py's summary.
"""

from ..errors import SsdbenchError
from ..results import store
from ..suites import locked
from . import runner

# Enough for a spread; and a set's bundle, which holds every run, stays within what a bundle may hold.
MAX_TIMES = 20


def check_times(times):
    if isinstance(times, bool) or not isinstance(times, int) or not 2 <= times <= MAX_TIMES:
        raise SsdbenchError(f"a repeat set runs its suite 2 to {MAX_TIMES} times, not {times!r}")


def request(drive, confirm, destroy_data, allow_usb):
    """What each run of the set is started with, checked again before each (runner.prepare_again)."""
    return {
        "device": drive["path"],
        "confirm": confirm,
        "destroy_data": destroy_data,
        "allow_usb": allow_usb,
        "capacity_bytes": drive["capacity_bytes"],
    }


def run_in_foreground(
    data_dir, suite, times, device, confirm, destroy_data=False, allow_usb=False, on_progress=None, on_run=None
):
    """Run `suite` `times` times on `device`, in the foreground. Returns (set id, final state, error).
    on_run(position, run_id) is called as each run starts. SIGTERM and SIGINT cancel the set."""
    check_times(times)
    runner.check_host()
    with runner.StopSignals() as signals:
        lock = runner.RunLock(data_dir).acquire()
        try:
            db = store.connect(data_dir)
            store.mark_interrupted(db)
            drive, _ = runner.prepare(data_dir, suite, device, confirm, destroy_data, allow_usb)
            if signals.received:
                raise SsdbenchError("cancelled before the repeat set started; nothing was written to the drive")
            asked = request(drive, confirm, destroy_data, allow_usb)
            repeat_id = store.create_repeat(db, drive, suite, times, locked.repeat_thresholds(suite.data), asked)
            state, error = carry_on(db, data_dir, lock, repeat_id, suite, signals, 1, on_progress, on_run)
            return repeat_id, state, error
        finally:
            lock.release()


def carry_on(db, data_dir, lock, repeat_id, suite, signals, first, on_progress=None, on_run=None):
    """Run the set from position `first` to its last, under the held lock, then record how the set ended:
    done when every run ended done, else as the run that stopped it; cancelled when a cancel came between
    two runs. Returns (state, error)."""
    held = store.get_repeat(db, repeat_id)
    times, asked = held["times"], held["request"]
    state, error = "done", None
    for position in range(first, times + 1):
        if signals.received or store.repeat_cancel_requested(db, repeat_id):
            state, error = "cancelled", f"cancelled before run {position} of {times}"
            break
        try:
            drive, steps = runner.prepare_again(data_dir, suite, asked)
        except SsdbenchError as exc:
            if signals.received or store.repeat_cancel_requested(db, repeat_id):
                state, error = "cancelled", f"cancelled before run {position} of {times}"
            else:
                state, error = "failed", f"run {position} of {times} did not start: {exc}"
            break
        run_id = store.create_run(db, drive, suite, steps, request=asked, repeat=(repeat_id, position))
        if on_run:
            on_run(position, run_id)
        idle = set_idle(db, repeat_id) if position > 1 else None
        state, error = runner.run_under_lock(
            db, data_dir, lock, run_id, suite, drive, steps, signals, on_progress, idle
        )
        if state != "done":
            error = stopped_by(run_id, position, times, state, error)
            break
    store.finish_repeat(db, repeat_id, state, error)
    return state, error


def set_idle(db, repeat_id):
    """The idle temperature a later run of the set is judged against (a step begun hot): its first run's."""
    first = store.get_repeat(db, repeat_id)["runs"][0]["id"]
    recorded = (store.get_run(db, first)["environment"] or {}).get("idle") or {}
    return {"temperature_c": recorded.get("temperature_c"), "of_run": first}


def stopped_by(run_id, position, times, state, error):
    """Why a set ended when one of its runs did not end done."""
    return f"run {run_id} ({position} of {times}) ended {state}" + (f": {error}" if error else "")
