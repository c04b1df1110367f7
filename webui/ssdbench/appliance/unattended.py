"""Unattended mode (ssdbench.auto=SUITE on the kernel command line): a suite on every empty drive, one
drive after another.

The runs go through the queue, so the runner service executes them as it does runs from the web UI, and
they show on the status screen and in the web UI. Only drives that need no confirmation are taken: a
drive holding partitions or file systems is skipped, since nobody is there to agree that its data goes.
"""

import time

from ..drives import discovery
from ..errors import SsdbenchError
from ..results import store
from ..run import queue
from ..suites import locked
from ..system import clock

POLL_S = 2


def run_all(data_dir, suite_name, say=print):
    """Queue the suite on each empty drive and wait for each run to end. Returns [(run id, state)]."""
    locked.load(suite_name)  # an unknown suite fails before anything is queued
    found = discovery.discover()
    targets = [d for d in found if d["eligible"] and not d["needs_wipe_confirmation"]]
    for d in found:
        if d not in targets:
            say(f"{d['path']}: skipped: {d['reason']}")
    if not targets:
        raise SsdbenchError("no empty drive to test")
    clock.wait_for_sync()  # the network came up as the system booted: the clock may be being set
    db = store.connect(data_dir)
    ended = []
    for d in targets:
        while store.busy_run(db) is not None:  # a run started from the web UI goes first
            time.sleep(POLL_S)
        run_id = queue.enqueue(db, data_dir, suite_name, d["path"], d["confirm_id"])
        say(f"run {run_id}: {suite_name} on {d['path']} ({d.get('model') or d['name']}) queued")
        while (state := store.run_state(db, run_id)) in store.ACTIVE:
            time.sleep(POLL_S)
        say(f"run {run_id}: {state}")
        ended.append((run_id, state))
    return ended
