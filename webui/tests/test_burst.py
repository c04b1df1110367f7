"""Mixed Burst's background on a fixed clock (run/burst.py, derive.burst_metrics, methodology 8).

The plan and the replays it needs are checked as text; the clock with real fio on a loop device that the
kernel's block throttle (a cgroup's write IOPS limit) makes a slow drive: one that writes a burst in half a
period and idles the rest, and one that needs two periods for it and so overruns every one. Each figure is
re-derived here from fio's own files (the writers' replays and lat logs) and compared with what was stored.
"""

import collections
import os
import re

import pytest
from conftest import DATA, needs_root, ssdbench, throttled

from ssdbench.errors import SsdbenchError
from ssdbench.results import document, store
from ssdbench.run import burst, fio_output, plan, workload
from ssdbench.suites import locked

SUITE = os.path.join(DATA, "burst-suite.toml")
PERIOD_MS = 1000
WRITES = plan.burst_blocks({"burst": "4000000", "bs": "4k"})  # per period, 977


def burst_step(path=SUITE, capacity=512 << 20):
    suite = locked.load(path=path, allow_non_standard=True)
    return suite, next(s for s in plan.compile_plan(suite, capacity) if s.kind == "burst")


def test_the_background_replays_timed_writes_and_the_foreground_starts_with_its_clock():
    _, step = burst_step()
    writers = [opts for name, opts in step.jobs if name == "background"]
    assert [w["read_iolog"] for w in writers] == ["background1.replay", "background2.replay"]
    # QD 2 as two synchronous writers, one write outstanding each; no pause after a burst.
    assert all(w["ioengine"] == "psync" and w["iodepth"] == 1 for w in writers)
    assert "thinktime" not in step.job_file.split("[foreground]")[0]
    fg = dict(step.jobs)["foreground"]
    assert fg["startdelay"] == plan.CLOCK_START_S and fg["new_group"] == 1
    assert {"exitall=1", "exit_what=all", "group_reporting=1"} <= set(step.job_file.splitlines())
    assert (
        step.estimate_s
        == plan.CLOCK_START_S + 5 * plan.burst_blocks({"burst": "4000000", "bs": "64k"}) * 65536 / (200 * 1e6) + 5 * 1
    )


def test_each_writer_replays_its_share_of_every_period_after_a_wait_for_its_due_time(tmp_path):
    _, step = burst_step()
    info = burst.prepare(step, tmp_path)
    periods = burst.period_count(step)
    assert info["periods"] == periods == -(-burst.HOLD * step.estimate_s * 1000 // PERIOD_MS)
    lines = [(tmp_path / name).read_text().splitlines() for name in info["replays"]]
    for text in lines:
        assert text[:3] == ["fio version 2 iolog", "dut add", "dut open"] and text[-1] == "dut close"
        waits = [int(line.split()[2]) for line in text if line.split()[1] == "wait"]
        assert waits == [plan.CLOCK_START_S * 1000 + k * PERIOD_MS for k in range(periods)]
    planned = [burst.planned_writes(tmp_path / name) for name in info["replays"]]
    for k in range(periods):
        mine = [[(o, n) for p, o, n in writes if p == k] for writes in planned]
        assert [len(m) for m in mine] == [489, 488] and sum(map(len, mine)) == WRITES
        assert all(n == 4096 and o % 4096 == 0 and 0 <= o < 64 << 20 for m in mine for o, n in m)
    # The same seed, the same bytes; the bytes are in the workload hash.
    assert burst.replay_digests(step) == info["replays"]
    suite, ref = burst_step(capacity=workload.REFERENCE_CAPACITY)
    covered = dict(workload.parts(suite, workload.trace_digests(suite)))
    assert covered["burst/background1.replay"] == burst.replay_digests(ref)["background1.replay"]


def test_a_period_in_whole_milliseconds_is_taken_and_a_replay_too_big_for_the_disk_is_refused(tmp_path, monkeypatch):
    short = tmp_path / "short.toml"
    short.write_text(open(SUITE).read().replace("every_s = 1,", "every_s = 0.3,"))
    _, step = burst_step(short)
    assert burst.every_ms(step) == 300
    monkeypatch.setattr(burst, "MAX_WRITES", burst.period_count(step) * WRITES - 1)
    with pytest.raises(SsdbenchError, match=r"would replay \d+ writes .* shorten the step or its bursts"):
        burst.prepare(step, tmp_path)


def run_burst(dev, data_dir, join, suite=SUITE):
    """`ssdbench run` of the suite in a child that `join` puts in its cgroup: its exit, and the run's document
    (what the report draws, its series with their points)."""
    proc = ssdbench(
        "run", "--suite-file", str(suite), "--non-standard", "--drive", dev, "--confirm", os.path.basename(dev),
        data_dir=data_dir, preexec_fn=join,
    )  # fmt: skip
    db = store.connect(data_dir)
    try:
        run = document.run_document(db, 1)
    finally:
        db.close()
    return proc, run, run["steps"][0]


def writes_from_fio(out_dir):
    """Per writer, (period, issue, completion, planned writes of its period) of each write done, in Unix ms, from
    its replay and its lat log alone. One write outstanding per writer: the log lists its writes in the replay's
    order. fio logs a completion in whole ms; an issue is that less the write's latency."""
    out = []
    for k in (1, 2):
        planned = burst.planned_writes(os.path.join(out_dir, f"background{k}.replay"))
        [log] = [f for f in os.listdir(out_dir) if f.startswith(f"background{k}_lat.")]
        with open(os.path.join(out_dir, log)) as f:
            done = fio_output.fio_log(f.read())
        shares = collections.Counter(period for period, _, _ in planned)
        assert [io.offset for io in done] == [offset for _, offset, _ in planned[: len(done)]]
        out.append([(p, io.t_ms - io.value / 1e6, io.t_ms, shares[p]) for (p, _, _), io in zip(planned, done)])
    return out


def periods_from_fio(out_dir):
    """Per writer, per period: [first issue, last completion, writes done, writes planned]."""
    out = []
    for writes in writes_from_fio(out_dir):
        mine = {}
        for period, issue, end, planned in writes:
            p = mine.setdefault(period, [issue, end, 0, planned])
            p[0], p[1], p[2] = min(p[0], issue), end, p[2] + 1
        out.append(mine)
    return out


def due_and_whole(writers, out_dir):
    """When period 0 was due (the earliest write less its period's offset) and the whole periods before the
    foreground's last completion."""
    due = min(p[0] - k * PERIOD_MS for mine in writers for k, p in mine.items())
    [log] = [f for f in os.listdir(out_dir) if f.startswith("foreground_lat.")]
    with open(os.path.join(out_dir, log)) as f:
        end = max(io.t_ms for io in fio_output.fio_log(f.read()))
    return due, int((end - due) // PERIOD_MS)


def figures(step):
    return {m["name"]: m for m in step["metrics"]}


def throttled_burst(loopdev, data_dir, writes_per_s):
    """The burst suite run to done on a loop device whose writes are throttled: (run, its burst step's folder,
    each writer's periods from fio's logs, when the first was due, how many whole periods, the step's
    figures)."""
    dev, _ = loopdev()
    with throttled(dev, writes_per_s) as join:
        proc, run, step = run_burst(dev, data_dir, join)
    assert proc.returncode == 0 and step["state"] == "done", (proc.stderr, step["error"])
    out_dir = data_dir / step["out_dir"]
    writers = periods_from_fio(out_dir)
    due, whole = due_and_whole(writers, out_dir)
    return run, out_dir, writers, due, whole, figures(step)


@needs_root()
def test_a_drive_that_writes_a_burst_in_half_a_period_idles_the_rest_on_a_fixed_clock(loopdev, tmp_path):
    # 977 writes: about 0.5 s of a 1 s period
    run, out_dir, writers, due, whole, m = throttled_burst(loopdev, tmp_path / "data", 2000)
    assert whole >= 3 and m["background_periods"]["value"] == whole
    for k in range(whole):
        start = min(mine[k][0] for mine in writers)
        end = max(mine[k][1] for mine in writers)
        assert sum(mine[k][2] for mine in writers) == WRITES
        # It wrote for a good part of the period (the throttle), then idled until the next was due ...
        assert end - start > 0.3 * PERIOD_MS and end < due + (k + 1) * PERIOD_MS
        # ... and each period began when due: a pause after each burst, as thinktime makes, would have put
        # it a whole burst (about 500 ms) later than the one before.
        assert start - (due + k * PERIOD_MS) < 250
    assert m["overrun_periods"]["value"] == 0
    # The target: 977 writes of 4 KiB a second, every byte of them inside the whole periods.
    assert m["background_mb_s"]["value"] == pytest.approx(WRITES * 4096 / 1e6, rel=1e-9)
    assert all(f"background{k}_lat log" in m["overrun_periods"]["source"] for k in (1, 2))

    # The timeline: each read burst's service time, where it began, with the periods behind it.
    series = {s["name"]: s for s in run["series"]}
    reads = series["burst.read.service_s"]
    assert len(reads["x"]) == 5 and sum(reads["y"]) == pytest.approx(m["burst.read.service_s"]["value"], rel=1e-9)
    assert all(0 < x < whole * PERIOD_MS + 2 * PERIOD_MS for x in reads["x"]) and reads["x"] == sorted(reads["x"])
    periods = series["burst.write.period_s"]
    assert periods["x"][:whole] == pytest.approx([min(mine[k][0] for mine in writers) - due for k in range(whole)])
    assert periods["y"][:whole] == pytest.approx(
        [(max(mine[k][1] for mine in writers) - min(mine[k][0] for mine in writers)) / 1000 for k in range(whole)]
    )


@needs_root()
def test_a_drive_too_slow_for_the_target_overruns_every_period_and_the_next_starts_at_once(loopdev, tmp_path):
    # 977 writes: about 2 s of a 1 s period
    _, out_dir, writers, due, whole, m = throttled_burst(loopdev, tmp_path / "data", 500)
    assert whole >= 3 and m["overrun_periods"]["value"] == m["background_periods"]["value"] == whole
    for mine in writers:
        for k in sorted(mine)[1:]:
            # Late: it began as this writer's share of the one before ended, not a period after it.
            assert mine[k][0] > due + k * PERIOD_MS and mine[k][0] - mine[k - 1][1] < 250
    # What the drive managed (500 writes of 4 KiB a second), not the 4 MB/s it was asked for.
    assert m["background_mb_s"]["value"] == pytest.approx(500 * 4096 / 1e6, rel=0.1)
    # The bytes of the whole periods' writes that were done by the end of the last.
    horizon = due + whole * PERIOD_MS
    written = sum(4096 for mine in writes_from_fio(out_dir) for k, _, end, _ in mine if k < whole and end <= horizon)
    assert m["background_mb_s"]["value"] == pytest.approx(written / whole / 1e6, rel=1e-9)


@needs_root()
def test_a_foreground_that_outlasts_the_background_fails_the_step(loopdev, tmp_path):
    dev, _ = loopdev()
    text = open(SUITE).read().replace("write_mb_s = 200", "write_mb_s = 200\nread_mb_s = 100000")
    text = re.sub(r"every_s = 1,", "every_s = 0.5,", text).replace("bursts = 5, idle_s = 1", "bursts = 2, idle_s = 0.5")
    suite = tmp_path / "short.toml"
    suite.write_text(text)
    _, step_plan = burst_step(suite)
    # About 2 s estimated, so about 12 periods of 0.5 s; the reads, throttled to 5 a second, take 25 s.
    periods = burst.period_count(step_plan)
    assert periods * 0.5 < 10
    with throttled(dev, 5, "read") as join:
        proc, _, step = run_burst(dev, tmp_path / "data", join, suite)
    assert proc.returncode != 0 and step["state"] == "failed"
    assert f"outlasted the background's {periods} periods" in step["error"]
