"""Trace playback with real fio on a loop device: the trace plays a part at a time, and its iologs and per-IO
logs never lie unpacked on the data partition beyond one part; a trace that is not the locked one never
plays."""

import dataclasses
import glob
import os

import pytest
from conftest import needs_root

from ssdbench.errors import SsdbenchError
from ssdbench.run import plan, playback, workload
from ssdbench.suites import locked

pytestmark = needs_root()
CAPACITY = 64 * 2**20
# Bytes per IO of an iolog line and a latency log line, with room to spare: "dut write 33550336 131072",
# "12, 123456, 1, 131072, 33550336, 0".
LINE_BYTES = 64


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
    parts = playback.parts(sizes)
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
    # Before each part is packed, only that part's files are unpacked: its IOs' iolog and latency lines.
    assert len(peaks) == len(parts)
    assert all(0 < size <= ios * LINE_BYTES for size, ios in peaks), peaks
    assert unpacked(out) == 0 and playback.played(out, step) == 1.0
    assert sorted(glob.glob(os.path.join(out, "fio-*.json"))) == [
        os.path.join(out, f"fio-{n:02d}.json") for n in range(len(parts))
    ]
    assert info["sha256"] == smoke.traces[step.id] and info["stats"]["segments"] == len(sizes)


def test_a_cancel_stops_the_playback_between_or_inside_parts(loopdev, tmp_path, smoke, monkeypatch):
    monkeypatch.setattr(playback, "PART_IOS", 500)
    dev, _ = loopdev("64M")
    step, out = trace_step(smoke), str(tmp_path / "step")
    trace, job_text, _ = playback.prepare(step, out, CAPACITY, smoke, str(tmp_path))
    # stop as soon as the second part has started
    outcome = playback.play(
        trace, job_text, step, out, dev, lambda *a: None, lambda: os.path.exists(os.path.join(out, "fio-01.json"))
    )
    assert outcome.state == "cancelled"
    assert not os.path.exists(os.path.join(out, "fio-02.json"))
    assert unpacked(out) == 0
    # the progress counts the IOs of the segments that ended: the first part, and maybe some of the second
    sizes = [count for _, count in plan.trace_segments(step.spec)]
    first = sum(sizes[k] for k in playback.parts(sizes)[0])
    assert first / sum(sizes) <= playback.played(out, step) < 1


def test_a_trace_that_is_not_the_one_the_workload_hash_covers_is_refused(tmp_path, smoke):
    step = trace_step(smoke)
    other = dataclasses.replace(smoke, traces={step.id: "0" * 64})
    with pytest.raises(SsdbenchError, match="not the one the suite's workload hash covers"):
        playback.prepare(step, str(tmp_path / "step"), CAPACITY, other, str(tmp_path))
