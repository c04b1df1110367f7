"""The consistency test (methodology 5) on drives whose steady state is known: a loop device whose writes the
block cgroup throttles (cgroup v1's blkio.throttle.write_iops_device, or cgroup v2's io.max, whichever is mounted)
writes at most that many IOs a second, however fast the file under it. At a constant limit that is a slow drive
with a low, flat steady state; a limit dropped while the step runs is a drive with a write cliff; a limit lowered
a little every round is a drive still declining slowly.

Each runs standard's consistency steps for real (`ssdbench run`, fio, the throttled device), scaled down as
smoke scales its consistency step: 6 s for every 128 MiB of span, rounds of 2 s. The run's process is put in the
cgroup before it starts, so fio, its child, writes from inside it."""

import json
import os
import statistics
import subprocess
import sys
import tomllib

import pytest
from conftest import BlockThrottle, fio_status, needs_root, show, wait_until

from ssdbench.results import headline, store
from ssdbench.run import fio_output, steady
from ssdbench.suites import locked

pytestmark = needs_root()

# Limits far below the loop device's own (tens of thousands of IOPS), and low enough that fio, pinned to one
# core of a busy 2-core host, need only run every few tens of milliseconds to keep its 32 IOs queued at them
# (at 2000 IOPS a busy host once left a second 20% short, inside the judged window).
FLAT_IOPS = 1000  # the slow drive
FRESH_IOPS, CLIFF_IOPS = 4000, 800  # the drive with a cliff: its fresh plateau, then its steady state
CLIFF_AT_S = 12  # the limit drops once fio says it has run this long (its elapsed rounds up): after 5 rounds
# A busy host's loop device falls a little short of its limit for a second now and then (measured: 7% under in
# single seconds, 2% over a window): the published figure is the limit within 5%.
TOLERANCE = 0.05
# The slowly declining drive: 2% less each round. PTS's limits pass it (a slope excursion of 8% across the window,
# under 10%); the decline rule does not.
DECLINE = 0.02


def toml(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(toml, value)) + "]"
    return "{ " + ", ".join(f"{k} = {toml(v)}" for k, v in value.items()) + " }"


def consistency_suite(folder, through="consistency-spare", round_s=None):
    """standard's section 5 (purge, preconditioning, consistency, and the same with 25% spare area), up to the
    step `through`, with its steps' time and rounds as smoke scales them, or rounds of `round_s` (the step's
    time as many times smoke's as its round is); everything else as standard has it."""
    standard = locked.load("standard").data
    smoke = next(s for s in locked.load("smoke").steps if s["id"] == "consistency")
    ids = [s["id"] for s in standard["steps"]]
    steps = standard["steps"][ids.index("purge-consistency") : ids.index(through) + 1]
    scale = round_s / smoke["steady"]["round_s"] if round_s else 1
    for s in steps:
        if "steady" in s:
            runtime, rounds = int(smoke["runtime"] * scale), {"round_s": int(smoke["steady"]["round_s"] * scale)}
            s.update(runtime=runtime, runtime_per=smoke["runtime_per"], steady=rounds)
    head = {"format": 1, "name": "consistency-test", "version": 1, "title": "standard's section 5, smoke-sized"}
    head["comparable"] = False
    tables = {key: standard[key] for key in ("fio", "repeat", "estimate")} | {"idle": {"seconds": 0}}
    lines = [f"{k} = {toml(v)}" for k, v in head.items()]
    for key, table in tables.items():
        lines += [f"[{key}]", *(f"{k} = {toml(v)}" for k, v in table.items())]
    for s in steps:
        lines += ["[[steps]]", *(f"{k} = {toml(v)}" for k, v in s.items())]
    path = folder / "consistency-suite.toml"
    path.write_text("\n".join(lines) + "\n")
    tomllib.loads(path.read_text())
    return str(path)


class Throttle(BlockThrottle):
    """A cgroup of its own in which writes to `dev` are held to a number of IOs a second, and the run in it. Never
    a skip (BlockThrottle): this is the proof that the steady-state figures are the drive's (issue 33)."""

    def __init__(self, dev, iops):
        super().__init__(dev, iops)
        self.proc = None

    def start(self, dev, data_dir, suite):
        """`ssdbench run` of the suite, joined to the cgroup before it runs anything."""
        argv = [sys.executable, "-m", "ssdbench.cli", "run", "--suite-file", suite, "--non-standard"]
        argv += ["--drive", dev, "--confirm", os.path.basename(dev), "--data-dir", str(data_dir)]
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=self.join
        )
        return self.proc

    def remove(self):
        if self.proc is not None and self.proc.poll() is None:  # a test that failed while its run ran
            self.proc.terminate()
            self.proc.communicate()
        super().remove()


@pytest.fixture
def throttle():
    made = []

    def make(dev, iops):
        made.append(Throttle(dev, iops))
        return made[-1]

    yield make
    for t in made:
        t.remove()


def finished(proc):
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return out


def step_of(run, key):
    s = next(s for s in run["steps"] if s["key"] == key)
    return s, {m["name"]: m for m in s["metrics"]}


def iops_log(data_dir, run, s):
    folder = data_dir / store.step_folder(run["id"], s["idx"], s["key"])
    with open(folder / f"{s['key']}_iops.1.log") as f:
        return [x.value for x in fio_output.fio_log(f.read()) if x.direction == 1]


def judged(data_dir, run, s, m):
    """The whole rounds of 2 s in the step's IOPS log, checked against the window the step says it judged, the
    final 5, and its figures against that window's seconds in the log. fio may log one second less than the
    step's time (its samples drift a millisecond a second and the last, partial one is dropped), so the count
    is read from the log."""
    values = iops_log(data_dir, run, s)
    rounds = len(values) // 2
    assert m["steady.rounds"]["value"] == rounds
    window = (2 * (rounds - 5), 2 * rounds)
    assert (m["steady.window_from_s"]["value"], m["steady.window_to_s"]["value"]) == window
    assert m["steady.avg_iops"]["value"] == pytest.approx(statistics.fmean(values[slice(*window)]), rel=1e-12)
    assert m["steady.min_iops"]["value"] == min(values[slice(*window)])
    assert m["steady.stddev_iops"]["value"] == pytest.approx(statistics.pstdev(values[slice(*window)]), rel=1e-9)
    return rounds


def drive_fills(data_dir, run, s, m, span):
    """The drive fills the step says were written before and within its judged window, checked against the
    preconditioning's two and the step's own writes in fio's bandwidth log, over the step's `span` of bytes; the
    fills within."""
    lo, hi = int(m["steady.window_from_s"]["value"]), int(m["steady.window_to_s"]["value"])
    with open(data_dir / store.step_folder(run["id"], s["idx"], s["key"]) / f"{s['key']}_bw.1.log") as f:
        bw = [x.value * 1024 for x in fio_output.fio_log(f.read()) if x.direction == 1]
    assert m["steady.fills_before"]["value"] == pytest.approx(2 + sum(bw[:lo]) / span, rel=1e-9)
    assert m["steady.fills_in_window"]["value"] == pytest.approx(sum(bw[lo:hi]) / span, rel=1e-9)
    return m["steady.fills_in_window"]["value"]


def test_a_slow_drive_reaches_steady_state_at_its_throttle_and_too_short_a_step_says_why(tmp_path, loopdev, throttle):
    dev, _ = loopdev("256M")
    data_dir = tmp_path / "data"
    finished(throttle(dev, FLAT_IOPS).start(dev, data_dir, consistency_suite(tmp_path)))
    run = show(1, data_dir)
    # 256 MiB: 12 s, at most 6 rounds of 2 s, judged from the first; the figures are the final window's.
    s, m = step_of(run, "consistency")
    rounds = judged(data_dir, run, s, m)
    assert "runtime=12\n" in s["job_file"] and rounds in (5, 6)
    assert m["steady.reached"]["value"] == 1, m["steady.reached"]["source"]
    assert m["steady.avg_iops"]["value"] == pytest.approx(FLAT_IOPS, rel=TOLERANCE)
    # flat from the start: the first window already passes, and the step says so
    assert m["steady.reached_s"]["value"] == steady.WINDOW * 2
    figure = next(f for f in headline.review(run) if f["id"] == "consistency")
    assert figure["value"] == m["steady.avg_iops"]["value"]
    # its proof beside it: the window's slope and the drive fills before and within it, as the step has them
    slope, before, within = (
        m[f"steady.{n}"]["value"] for n in ("slope_percent_per_min", "fills_before", "fills_in_window")
    )
    assert (
        figure["proof"] == f"slope {slope:+.2f}%/min, {before:.2f} drive fills before the window, {within:.2f} within"
    )
    # The preconditioning wrote the span twice, sequentially, before it.
    fill, f = step_of(run, "fill-consistency")
    assert "loops=2\n" in fill["job_file"] and f["write.io_bytes"]["value"] == 2 * 256 * 2**20
    # and the window says so: two fills before it and the step's own seconds before it; flat, so no decline
    drive_fills(data_dir, run, s, m, 256 * 2**20)
    assert ", a decline" not in m["steady.reached"]["source"]
    # 25% spare area: 192 MiB is 9 s, 4 whole rounds, too few for a window of 5. Not reached, and why.
    s, m = step_of(run, "consistency-spare")
    assert "runtime=9\n" in s["job_file"] and m["steady.reached"]["value"] == 0
    assert "steady.avg_iops" not in m and "steady.window_from_s" not in m
    why = "not reached: the step's 9 s held 4 whole rounds of 2 s, and a window is 5"
    assert m["steady.reached"]["source"].endswith(why)
    gone = {f["id"]: f["why"] for f in headline.not_reached(run)}
    assert gone == {"consistency-spare": m["steady.reached"]["source"]}


def test_a_drive_with_a_write_cliff_is_steady_only_after_it(tmp_path, loopdev, throttle):
    # 640 MiB: 30 s as smoke scales it, 14 or 15 rounds: the final window begins at 18 s or later, long after
    # the cliff at about 11 s, and a fresh plateau of 5 rounds fits before it.
    dev, _ = loopdev("640M")
    data_dir = tmp_path / "data"
    drive = throttle(dev, FRESH_IOPS)
    proc = drive.start(dev, data_dir, consistency_suite(tmp_path, through="consistency"))
    # The limit drops once fio's own clock says the step has run CLIFF_AT_S.
    step_dir = data_dir / store.step_folder(1, 2, "consistency")
    wait_until(
        lambda: proc.poll() is not None or any(d["jobs"][0]["elapsed"] >= CLIFF_AT_S for d in fio_status(step_dir)),
        f"the consistency step to run {CLIFF_AT_S} s",
    )
    drive.limit(CLIFF_IOPS)
    finished(proc)
    run = show(1, data_dir)
    s, m = step_of(run, "consistency")
    values = iops_log(data_dir, run, s)
    # The cliff: the last second still above 1.5 x the low limit (a window holding such a second fails the
    # rule's 20% range), after a fresh plateau that alone passes the rule: the first passing window.
    fresh = max(i for i, v in enumerate(values) if v > 1.5 * CLIFF_IOPS) + 1
    assert fresh >= steady.WINDOW * 2 and values[0] == pytest.approx(FRESH_IOPS, rel=0.05)
    assert steady.window_is_steady(steady.rounds(values, 2)[: steady.WINDOW])
    assert "runtime=30\n" in s["job_file"] and judged(data_dir, run, s, m) in (14, 15)
    assert m["steady.reached"]["value"] == 1, m["steady.reached"]["source"]
    # Steady state only after the cliff: the first window of the run that lasts to the end begins after it, and
    # so does the judged window, whose mean is the low limit.
    assert m["steady.reached_s"]["value"] - steady.WINDOW * 2 >= fresh
    assert m["steady.window_from_s"]["value"] >= fresh
    assert m["steady.avg_iops"]["value"] == pytest.approx(CLIFF_IOPS, rel=TOLERANCE)


def test_a_drive_still_declining_slowly_is_not_steady_and_the_window_shows_its_proof(tmp_path, loopdev, throttle):
    # Rounds of 3 s (a test's minute), 23 s for 320 MiB: 7 rounds, or 6 where fio logs a second less; the final
    # window leaves out the first round, in which fio starts. The limit falls DECLINE a round, set again at each
    # second that fio's status counts: a fall in steps of a round, each set when the status showed it (late by a
    # second or more on a busy host), put single rounds 3% off the line, and the decline within their scatter.
    dev, _ = loopdev("320M")
    data_dir = tmp_path / "data"
    drive = throttle(dev, FLAT_IOPS)
    proc = drive.start(dev, data_dir, consistency_suite(tmp_path, through="consistency", round_s=3))
    step_dir = data_dir / store.step_folder(1, 2, "consistency")

    def elapsed():
        return max((d["jobs"][0]["elapsed"] for d in fio_status(step_dir)), default=0)

    at = 0
    while proc.poll() is None and at < 23:
        wait_until(lambda: proc.poll() is not None or elapsed() > at, f"the consistency step to run past {at} s")
        at = elapsed()
        drive.limit(round(FLAT_IOPS * (1 - DECLINE) ** (at / 3)))
    finished(proc)
    run = show(1, data_dir)
    s, m = step_of(run, "consistency")
    rounds = len(iops_log(data_dir, run, s)) // 3
    assert "runtime=23\n" in s["job_file"] and m["steady.rounds"]["value"] == rounds and rounds in (6, 7)
    assert m["steady.reached"]["value"] == 0 and ", a decline (over 1% a round" in m["steady.reached"]["source"]
    assert m["steady.slope_percent_per_min"]["value"] * 3 / 60 == pytest.approx(-100 * DECLINE, abs=0.7)
    # the window's proof: about the limits' 4 KiB writes within it, 1000 IOPS falling 2% a round, 15 s
    within = drive_fills(data_dir, run, s, m, 320 * 2**20)
    assert within == pytest.approx(15 * 900 * 4096 / (320 * 2**20), rel=0.15)
