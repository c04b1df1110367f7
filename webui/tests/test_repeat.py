"""Repeat sets from the console: `ssdbench repeat` runs a suite N times with real fio on a loop device, and its
summary is computed from the runs' own stored figures; a cancel stops the set, not just one run."""

import json
import os
import signal
import statistics
import subprocess
import sys
from types import SimpleNamespace

import pytest
from conftest import ENGINE_SUITE, needs_root, show, ssdbench, start_run, wait_until

from ssdbench.results import store
from ssdbench.run import runner

pytestmark = needs_root()

# The engine suite's headline figures: each fio job's throughput (IOPS random, MB/s sequential) and average
# latency; a latency at QD1 has the suite's QD1 threshold.
ENGINE_FIGURES = {
    "seq-fill/write.mb_s": 2.5,
    "seq-fill/write.lat_mean": 2.5,
    "rand-read-4k/read.iops": 2.5,
    "rand-read-4k/read.lat_mean": 2.5,
    "rand-write-4k/write.iops": 2.5,
    "rand-write-4k/write.lat_mean": 2.5,
    "seq-read-128k/read.mb_s": 2.5,
    "seq-read-128k/read.lat_mean": 3.0,
    "seq-write-128k/write.mb_s": 2.5,
    "seq-write-128k/write.lat_mean": 3.0,
}


def test_a_repeat_of_three_runs_the_suite_three_times_and_sums_up_the_runs_own_figures(finished_repeat):
    data_dir, dev, summary = finished_repeat
    assert summary["state"] == "done" and summary["error"] is None and summary["times"] == 3
    assert [r["position"] for r in summary["runs"]] == [1, 2, 3] and {r["state"] for r in summary["runs"]} == {"done"}
    assert summary["counted"] == [r["id"] for r in summary["runs"]]
    assert summary["thresholds"] == {"cov_percent": 2.5, "qd1_latency_cov_percent": 3.0}
    runs = [show(run_id, data_dir) for run_id in summary["counted"]]
    for position, run in enumerate(runs, 1):
        # Each run is the whole suite, from its own purge, on the drive named.
        assert run["repeat"] == {"id": summary["id"], "position": position}
        assert [s["state"] for s in run["steps"]] == ["done"] * 6 and run["steps"][0]["kind"] == "purge"
        assert run["drive"]["path"] == dev
    assert {f["key"]: f["threshold_percent"] for f in summary["figures"]} == ENGINE_FIGURES
    for figure in summary["figures"]:
        # Every value is the one stored in its run, and every statistic is computed from those values.
        stored = [
            next(
                m["value"]
                for s in run["steps"]
                if s["key"] == figure["step"]
                for m in s["metrics"]
                if m["name"] == figure["name"]
            )
            for run in runs
        ]
        assert figure["values"] == stored and figure["runs"] == summary["counted"] and figure["n"] == 3
        assert figure["mean"] == statistics.fmean(stored) and figure["stdev"] == statistics.stdev(stored)
        assert figure["cov_percent"] == pytest.approx(100 * statistics.stdev(stored) / statistics.fmean(stored))
        assert (figure["min"], figure["max"]) == (min(stored), max(stored))
        assert figure["flagged"] == (figure["cov_percent"] > figure["threshold_percent"])
    assert summary["flagged"] == sum(f["flagged"] for f in summary["figures"])
    # The same summary later, from the store, as JSON and as a table; and the set in the list.
    assert (
        json.loads(ssdbench("repeats", str(summary["id"]), "--json", data_dir=data_dir, check=True).stdout) == summary
    )
    table = ssdbench("repeats", str(summary["id"]), data_dir=data_dir, check=True).stdout
    assert f"repeat set {summary['id']}: done" in table and "rand-read-4k/read.iops" in table
    assert f"{summary['flagged']} of 10 headline figures flagged" in table
    listed = json.loads(ssdbench("repeats", "--json", data_dir=data_dir, check=True).stdout)
    assert [(r["id"], r["state"], r["times"], r["runs"]) for r in listed] == [(summary["id"], "done", 3, 3)]


def second_run_measuring(data_dir):
    if not os.path.exists(store.db_path(data_dir)):
        return False
    db = store.connect(data_dir)
    try:
        row = db.execute(
            """SELECT steps.state FROM steps JOIN repeat_runs ON repeat_runs.run_id = steps.run_id
               WHERE repeat_runs.position = 2 AND steps.key = 'rand-read-4k'"""
        ).fetchone()
    finally:
        db.close()
    return row is not None and row[0] == "running"


def test_a_cancel_stops_the_set_not_just_the_run_it_comes_in(loopdev, tmp_path):
    dev, _ = loopdev()
    data_dir = tmp_path / "data"
    proc = start_run(dev, data_dir, "--times", "3", command="repeat")
    try:
        wait_until(lambda: second_run_measuring(data_dir), "the second run of the set to measure")
        cancelled = ssdbench("cancel", data_dir=data_dir)
        assert cancelled.returncode == 0 and "asked run 2 and its repeat set 1 to stop" in cancelled.stdout
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err
    db = store.connect(data_dir)
    held = store.get_repeat(db, 1)
    assert held["state"] == "cancelled" and held["error"].startswith("run 2 (2 of 3) ended cancelled")
    assert [(r["position"], r["state"]) for r in held["runs"]] == [(1, "done"), (2, "cancelled")]
    assert store.list_runs(db)[-1]["id"] == 2  # no third run was made
    # The first run's figures stand alone: one run, no spread.
    assert "repeat set 1: cancelled" in out and "0 of 10 headline figures flagged" in out
    # The lock is free and nothing is left active.
    runner.RunLock(data_dir).acquire().release()
    assert store.busy_run(db) is None and store.busy_repeat(db) is None


def test_a_cancel_between_two_runs_stops_the_set(tmp_path):
    """The moment between two runs of a set: no run is active, but the set is; `ssdbench cancel` asks the set,
    and signals its process (here a stand-in, which SIGTERM ends)."""
    data_dir = tmp_path / "data"
    db = store.connect(data_dir)
    suite = SimpleNamespace(name="engine-test", sha256="c" * 64, locked=False)
    stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        drive = {"path": "/dev/loop9", "capacity_bytes": 2**29, "transport": "loop"}
        repeat_id = store.create_repeat(db, drive, suite, 3, {"cov_percent": 2.5, "qd1_latency_cov_percent": 3.0}, {})
        db.execute("UPDATE repeats SET pid=? WHERE id=?", (stand_in.pid, repeat_id))
        assert store.active_run(db) is None
        cancelled = ssdbench("cancel", data_dir=data_dir)
        assert cancelled.returncode == 0 and f"asked repeat set {repeat_id} to stop" in cancelled.stdout
        assert stand_in.wait(timeout=60) == -signal.SIGTERM
        assert store.repeat_cancel_requested(db, repeat_id)
    finally:
        if stand_in.poll() is None:
            stand_in.send_signal(signal.SIGKILL)
            stand_in.wait()


@pytest.mark.parametrize("times", ["1", "0", "21"])
def test_a_repeat_of_fewer_than_two_runs_or_more_than_twenty_is_refused(loopdev, tmp_path, times):
    dev, _ = loopdev()
    proc = ssdbench(
        "repeat", *ENGINE_SUITE, "--times", times, "--drive", dev, "--confirm", os.path.basename(dev), data_dir=tmp_path
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "2 to 20 times" in proc.stderr
    assert not os.path.exists(store.db_path(tmp_path)) or store.list_repeats(store.connect(tmp_path)) == []
