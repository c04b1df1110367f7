"""Trace playback with real fio on a loop device: the trace plays a part at a time, and its iologs and per-IO
logs never lie unpacked on the data partition beyond three parts; its segments play back to back, and the gaps
between them are measured and flagged; a trace that is not the locked one never plays."""

import dataclasses
import glob
import os

import pytest
from conftest import needs_root

from ssdbench.errors import SsdbenchError
from ssdbench.results import validity
from ssdbench.run import derive, plan, playback, workload
from ssdbench.suites import locked, trace_file

pytestmark = needs_root()
CAPACITY = 64 * 2**20
# Bytes per IO of an iolog line and a latency log line, with room to spare: "dut write 33550336 131072",
# "1795824415692, 123456, 1, 131072, 33550336, 0" (its time on the wall clock, in ms).
LINE_BYTES = 80


def trace_step(suite):
    return next(st for st in plan.compile_plan(suite, CAPACITY) if st.kind == "trace")


def unpacked(out_dir):
    return sum(
        os.path.getsize(p)
        for p in glob.glob(os.path.join(out_dir, "seg*"))
        if not p.endswith(".gz") and not p.endswith(".part")
    )


@pytest.fixture
def smoke():
    return workload.verified(locked.load("smoke"))


def test_the_trace_plays_a_part_at_a_time_and_is_packed_after_each(loopdev, tmp_path, smoke, monkeypatch):
    monkeypatch.setattr(playback, "PART_IOS", 500)
    dev, _ = loopdev("64M")
    step, out = trace_step(smoke), str(tmp_path / "step")
    trace, job_text, info = playback.prepare(step, out, CAPACITY, smoke, str(tmp_path))
    sizes = [count for _, count in plan.trace_segments(step.spec)]
    parts = list(playback.parts(trace_file.segments(trace)))
    assert len(parts) >= 5 and [k for part in parts for k in part] == list(range(len(sizes)))
    peaks, pack = [], playback._pack

    def measured_pack(out_dir, names):
        peaks.append((unpacked(out_dir), sum(sizes[int(n[3:])] for n in names)))
        pack(out_dir, names)

    monkeypatch.setattr(playback, "_pack", measured_pack)
    outcome = playback.play(trace, job_text, step, out, dev, lambda *a: None, lambda: False)
    assert outcome.state == "done", outcome.error
    assert [job["jobname"] for job in outcome.doc["jobs"]] == [playback.job_name(k) for k in range(len(sizes))]
    assert sum(job["read"]["total_ios"] + job["write"]["total_ios"] for job in outcome.doc["jobs"]) == sum(sizes)
    # Before each part is packed, only that part's files and the next two parts' are unpacked.
    assert len(peaks) == len(parts)
    ios = [count for _, count in peaks] + [0, 0]
    assert all(0 < size <= sum(ios[n : n + 3]) * LINE_BYTES for n, (size, _) in enumerate(peaks)), peaks
    assert unpacked(out) == 0 and playback.played(out, step) == 1.0
    assert sorted(glob.glob(os.path.join(out, "fio-*.json"))) == [
        os.path.join(out, f"fio-{n:02d}.json") for n in range(len(parts))
    ]
    assert info["sha256"] == smoke.traces[step.id] and info["stats"]["segments"] == len(sizes)


def test_a_cancel_stops_the_playing_part_and_the_one_waiting_on_it(loopdev, tmp_path, smoke, monkeypatch):
    monkeypatch.setattr(playback, "PART_IOS", 1200)
    dev, _ = loopdev("64M")
    step, out = trace_step(smoke), str(tmp_path / "step")
    trace, job_text, _ = playback.prepare(step, out, CAPACITY, smoke, str(tmp_path))
    parts = list(playback.parts(trace_file.segments(trace)))
    assert len(parts) >= 3 and len(parts[0]) >= 2
    # stop at fio's first tick: the first part's later jobs and the second part's all wait on their FIFOs
    outcome = playback.play(trace, job_text, step, out, dev, lambda *a: None, lambda: True)
    assert outcome.state == "cancelled"
    assert not os.path.exists(os.path.join(out, "fio-02.json"))
    assert unpacked(out) == 0 and not glob.glob(os.path.join(out, "*.go"))
    # no job after the first one played: they read the end of their FIFO and did no IO
    assert playback.played(out, step) * sum(count for _, count in plan.trace_segments(step.spec)) <= len(
        next(trace_file.segments(trace))[1]
    )


def test_the_segments_play_back_to_back_and_a_replay_with_gaps_is_flagged(loopdev, tmp_path, smoke, monkeypatch):
    dev, _ = loopdev("64M")
    step = trace_step(smoke)
    segments = len(plan.trace_segments(step.spec))

    def replayed(name):
        out = str(tmp_path / name)
        trace, job_text, _ = playback.prepare(step, out, CAPACITY, smoke, str(tmp_path))
        outcome = playback.play(trace, job_text, step, out, dev, lambda *a: None, lambda: False)
        assert outcome.state == "done", outcome.error
        metrics, _ = derive.step_results(step, out, outcome.doc, True)
        assert {m.name for m in metrics} >= {"replay.wall_s", "replay.gaps_s", "replay.gap_percent"}
        return {m.name: m.value for m in metrics}

    # Each job takes over from the one before it at once: fio's start of a job, which sleeps 100 ms before it
    # looks whether the job is ready, is not in the gaps (on a busy 2-core host a handoff took 1.4 to 93 ms, most
    # under 5 ms).
    handed = replayed("handed")
    assert 0 < handed["replay.gaps_s"] < (segments - 1) * 0.1
    assert handed["fio.read.total_ios"] + handed["fio.write.total_ios"] == sum(
        count for _, count in plan.trace_segments(step.spec)
    )

    # As before: each segment a job that fio starts once the one before it has ended (stonewall).
    handoff_job = playback.replay_job

    def walled(k, qd, data, last=False):
        name, options = handoff_job(k, qd, data, last)
        return name, {**{o: v for o, v in options.items() if not o.startswith("exec_")}, "stonewall": 1}

    monkeypatch.setattr(playback, "replay_job", walled)
    gapped = replayed("stonewall")
    assert gapped["replay.gaps_s"] > (segments - 1) * 0.1 > handed["replay.gaps_s"]
    reasons = validity.paused(gapped)
    assert len(reasons) == 1 and reasons[0].startswith(f"its replay took {gapped['replay.wall_s']:,.3f} s")
    # the figures of both replays are fio's: the same IOs, logged by fio
    assert gapped["all.ios"] == handed["all.ios"] and gapped["all.bytes"] == handed["all.bytes"]


def test_a_trace_that_is_not_the_one_the_workload_hash_covers_is_refused(tmp_path, smoke):
    step = trace_step(smoke)
    other = dataclasses.replace(smoke, traces={step.id: "0" * 64})
    with pytest.raises(SsdbenchError, match="not the one the suite's workload hash covers"):
        playback.prepare(step, str(tmp_path / "step"), CAPACITY, other, str(tmp_path))
