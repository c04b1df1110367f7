"""Trace playback with real fio on a loop device: the trace plays a part at a time, and its iologs and per-IO
logs never lie unpacked on the data partition beyond three parts; its segments play back to back, and the gaps
between them are measured and flagged; a trace that is not the locked one never plays."""

import dataclasses
import glob
import os
import subprocess

import pytest
from conftest import needs_root

from ssdbench.errors import SsdbenchError
from ssdbench.results import bundle, validity
from ssdbench.run import derive, handoff, plan, playback, workload
from ssdbench.suites import locked, trace_file
from ssdbench.system import tools

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

    def replayed(name, native=True):
        out = str(tmp_path / name)
        trace, job_text, _ = playback.prepare(step, out, CAPACITY, smoke, str(tmp_path), native=native)
        outcome = playback.play(trace, job_text, step, out, dev, lambda *a: None, lambda: False)
        assert outcome.state == "done", outcome.error
        metrics, _ = derive.step_results(step, out, outcome.doc, True)
        assert {m.name for m in metrics} >= {"replay.wall_s", "replay.gaps_s", "replay.gap_percent"}
        return {m.name: m.value for m in metrics} | {"job_text": job_text}

    # Each job takes over from the one before it at once: fio's start of a job, which sleeps 100 ms before it
    # looks whether the job is ready, is not in the gaps. Through fio's own start_fifo and done_fifo (our patch)
    # a handoff is a thread woken through a pipe: 0.4 to 0.8 ms here on a quiet host, on a clock of whole ms;
    # through a stock fio's shell commands it is two shells, 1.8 to 2.2 ms, up to 93 ms when a neighbour took the
    # CPU.
    handed = replayed("handed")
    shell = replayed("shell", native=False)
    assert "start_fifo" in handed["job_text"] and "exec_prerun" not in handed["job_text"]
    assert handed["replay.gaps_s"] < shell["replay.gaps_s"] < (segments - 1) * 0.1
    assert handed["fio.read.total_ios"] + handed["fio.write.total_ios"] == sum(
        count for _, count in plan.trace_segments(step.spec)
    )

    # As before: each segment a job that fio starts once the one before it has ended (stonewall).
    handoff_job = playback.replay_job

    def walled(k, qd, data, last=False, native=True):
        name, options = handoff_job(k, qd, data, last, native)
        handoffs = playback.handoff_options(k, last, native)
        return name, {**{o: v for o, v in options.items() if o not in handoffs}, "stonewall": 1}

    monkeypatch.setattr(playback, "replay_job", walled)
    gapped = replayed("stonewall")
    assert gapped["replay.gaps_s"] > (segments - 1) * 0.1 > handed["replay.gaps_s"]
    reasons = validity.paused(gapped)
    assert len(reasons) == 1 and reasons[0].startswith(f"its replay took {gapped['replay.wall_s']:,.3f} s")
    # the figures of both replays are fio's: the same IOs, logged by fio
    assert gapped["all.ios"] == handed["all.ios"] and gapped["all.bytes"] == handed["all.bytes"]


def test_a_stock_fio_hands_over_through_shell_commands_and_rerun_sh_plays_either_one_job_after_another(
    tmp_path, smoke, monkeypatch
):
    assert tools.fio_knows("start_fifo"), "run make fio and put build/fio/bin first on PATH"
    step = trace_step(smoke)
    segments = len(plan.trace_segments(step.spec))
    texts = {}
    for native in (True, False):
        _, texts[native], info = playback.prepare(
            step, str(tmp_path / str(native)), CAPACITY, smoke, str(tmp_path), native=native
        )
        assert info["handoff"] == playback.handoff_record(native)
    assert "why" in info["handoff"] and handoff.FIO_PATCH in info["handoff"]["why"]
    # rerun.sh's edit leaves no handoff, a stonewall before every segment but the first, and a job file that the
    # run's fio takes
    for native, text in texts.items():
        edited = subprocess.run(
            ["sed", *(a for e in bundle.RERUN_SED for a in ("-e", e))], input=text, capture_output=True, text=True
        ).stdout
        handoff_options = ("start_fifo=", "done_fifo=", "exec_prerun=", "exec_postrun=")
        assert not [line for line in edited.splitlines() if line.startswith(handoff_options)], native
        assert edited.count("\nstonewall=1\n") == segments - 1, native
        job = tmp_path / f"rerun-{native}.fio"
        job.write_text(edited)
        parsed = subprocess.run(
            ["fio", "--parse-only", str(job)],
            capture_output=True,
            text=True,
            env=dict(os.environ, SSDBENCH_DUT="/dev/null"),
        )
        assert parsed.returncode == 0, parsed.stderr
    # Debian's own fio (/usr/bin/fio) lacks our patch: a run there hands over through the shell, and says why
    (tmp_path / "fio").symlink_to("/usr/bin/fio")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert not tools.fio_knows("start_fifo")


def test_a_trace_that_is_not_the_one_the_workload_hash_covers_is_refused(tmp_path, smoke):
    step = trace_step(smoke)
    other = dataclasses.replace(smoke, traces={step.id: "0" * 64})
    with pytest.raises(SsdbenchError, match="not the one the suite's workload hash covers"):
        playback.prepare(step, str(tmp_path / "step"), CAPACITY, other, str(tmp_path))
