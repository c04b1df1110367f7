"""The runner end to end: real fio on real loop devices, results in a real SQLite file."""

import concurrent.futures
import contextlib
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from types import SimpleNamespace

import pytest
from conftest import (
    BLOCKS_SUITE,
    ENGINE_SUITE,
    fio_status,
    login,
    long_suite,
    make_app,
    needs_root,
    queue_files,
    set_queue_files,
    show,
    ssdbench,
    start_run,
    vanish,
    wait_for_step,
    wait_until,
)
from markupsafe import escape

from ssdbench.errors import SsdbenchError
from ssdbench.results import document, offline_report, store, validity
from ssdbench.run import fio_output, plan, quiet, runner, workload
from ssdbench.suites import locked, trace_file, trace_generator

pytestmark = needs_root()


def test_run_end_to_end_and_every_metric_traces_to_fio(loopdev, tmp_path):
    dev, _ = loopdev()
    data_dir = tmp_path / "data"
    proc = ssdbench("run", *ENGINE_SUITE, "--drive", dev, "--confirm", os.path.basename(dev), data_dir=data_dir)
    assert proc.returncode == 0, proc.stderr
    assert "run 1: done" in proc.stdout
    # On a pipe, progress is a log: a line as each step starts, and at most one more every 10 s of a step.
    lines = proc.stderr.splitlines()
    assert "\r" not in proc.stderr
    for n, key in enumerate(["purge", "seq-fill", "rand-read-4k", "rand-write-4k", "seq-read-128k"], 1):
        assert any(line.startswith(f"step {n}/6 {key} ") for line in lines), (key, lines)
    run = show(1, data_dir)
    elapsed = run["finished_at"] - run["started_at"]
    assert len(lines) <= 6 + 1 + elapsed / 10 + 6, lines
    assert run["state"] == "done" and run["percent"] == 100.0
    # the live view's samples: from the first second (the host's calibration, before step 1), the percent
    # never going back
    db = store.connect(data_dir)
    samples = db.execute("SELECT t_ms, percent FROM progress_samples WHERE run_id=1 ORDER BY t_ms").fetchall()
    assert samples[0]["percent"] == 0.0 and samples[0]["t_ms"] < 5000, samples[0]
    assert all(a["percent"] <= b["percent"] for a, b in zip(samples, samples[1:])), samples
    assert run["standard"] == 0 and run["suite_hash"] == run["environment"]["suite"]["sha256"]
    assert [s["state"] for s in run["steps"]] == ["done"] * 6
    assert run["steps"][0]["detail"]["method"].startswith("discard")
    env = run["environment"]
    assert env["kernel"]["release"] == os.uname().release and env["tools"]["fio"].startswith("fio-")
    engine = locked.load(path=ENGINE_SUITE[1], allow_non_standard=True)
    assert env["suite"]["workload_sha256"] == workload.workload_sha256(engine)
    assert {"cmdline", "version"} <= set(env["kernel"]) and {"model", "governor", "cstates"} <= set(env["cpu"])
    # Every quiet-OS control is recorded as applied or unavailable with a reason; none is skipped.
    controls = env["controls"]
    assert {"governor", "cpu_dma_latency", "scheduler", "nomerges", "power_management", "cpu_affinity"} <= set(controls)
    # no swap, no background jobs: recorded as this host has them (/proc/swaps, /proc/loadavg)
    swaps = [line.split()[0] for line in open("/proc/swaps").read().splitlines()[1:] if line.strip()]
    assert controls["swap"]["state"] == ("unavailable" if swaps else "applied")
    assert all(s in controls["swap"]["reason"] for s in swaps)
    assert controls["background"]["value"].startswith("load averages ")
    for c in controls.values():
        assert (c["state"], bool(c.get("value") or c.get("reason"))) in (("applied", True), ("unavailable", True))
    assert controls["scheduler"]["value"] == "none" and controls["nomerges"]["value"] == "2"
    # set for the run, and put back after it
    name = os.path.basename(dev)
    assert open(f"/sys/block/{name}/queue/nomerges").read().strip() == controls["nomerges"]["before"]
    # Each step records its idle as the suite asks (the fill that follows the purge: none) and the
    # drive's temperature as it began (a loop device has none).
    for step, spec in zip(run["steps"], locked.load(path=ENGINE_SUITE[1], allow_non_standard=True).steps):
        cool = step["detail"]["cool_down"]
        assert (cool["state"] != "not asked") == spec["cooldown"], step["key"]
        # The engine suite's fixed idle is 0 s.
        assert cool["idled_s"] < 1 and cool.get("minimum_s", 0) == 0 and cool.get("cooled") is None, step["key"]
        assert "began_at_c" in step["detail"] and step["detail"]["began_at_c"] is None
    # Nor a temperature series: with no source, nothing samples.
    assert not [s for s in run["series"] if s["step_id"] is None]
    for step in run["steps"][1:]:
        folder = data_dir / step["out_dir"]
        doc = fio_output.fio_result((folder / "fio.json").read_text())
        assert (folder / f"{step['key']}.fio").read_text() == step["job_file"]
        assert step["metrics"], step["key"]
        for m in step["metrics"]:
            if m["name"] in ("host_share_percent", "host_kernel_share_percent", "host.cpu_wait_percent"):
                continue  # the host's share and wait: test_host_cost traces them to both fio outputs and schedstat
            assert fio_output.source_value(doc, m["source"]) == m["value"], (step["key"], m)
        iops = {m["name"]: m["value"] for m in step["metrics"]}
        assert ("read.iops" in iops) == (step["key"] in ("rand-read-4k", "seq-read-128k"))
    # Per-second logs became series, and each point is a line of fio's log.
    db = store.connect(data_dir)
    series = [s for s in run["series"] if s["name"] == "write.iops" and s["step_id"] == run["steps"][3]["id"]]
    assert len(series) == 1
    log_name, _, direction = series[0]["source"].partition(":direction=")
    log = fio_output.fio_log((data_dir / run["steps"][3]["out_dir"] / log_name).read_text())
    assert store.series_points(db, series[0]["id"]) == [(s.t_ms, s.value) for s in log if s.direction == int(direction)]


def test_re_run_the_saved_job_file_with_plain_fio(loopdev, tmp_path):
    dev, _ = loopdev()
    data_dir = tmp_path / "data"
    ssdbench("run", *ENGINE_SUITE, "--drive", dev, "--confirm", os.path.basename(dev), data_dir=data_dir, check=True)
    step = show(1, data_dir)["steps"][2]
    job = tmp_path / "again.fio"
    job.write_text(step["job_file"])
    out = subprocess.run(
        ["fio", "--output-format=json", str(job)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=dict(os.environ, SSDBENCH_DUT=dev),
        check=True,
    ).stdout
    assert fio_output.fio_result(out)["jobs"][0]["read"]["total_ios"] > 0


def test_a_4kn_drive_runs_512_b_rows_and_trace_ios_rounded_up_to_its_blocks(loopdev, tmp_path):
    """A drive of 4096 B logical blocks refuses 512 B direct IO. Its 512 B and 2 KiB transfer-size rows run 4096 B
    blocks, its trace's IOs are widened to whole blocks, and the run says so; it does not fail."""
    dev, _ = loopdev("256M", sector_size=4096)
    # As the suite names it, a 512 B row is refused by such a drive.
    row = ["fio", "--name=row", f"--filename={dev}", "--direct=1", "--rw=read", "--bs=512", "--size=1M"]
    assert "Invalid argument" in subprocess.run(row, capture_output=True, text=True).stdout
    data_dir = tmp_path / "data"
    ssdbench("run", *BLOCKS_SUITE, "--drive", dev, "--confirm", os.path.basename(dev), data_dir=data_dir, check=True)
    run = show(1, data_dir)
    assert run["state"] == "done" and run["drive"]["logical_block_size"] == 4096
    steps = {s["key"]: s for s in run["steps"]}

    xfer = steps["xfer"]
    assert xfer["detail"]["adapted"] == [
        "bs 512 runs as 4096 B in read.bs512, write.bs512",
        "bs 2k runs as 4096 B in read.bs2k, write.bs2k",
    ]
    doc = fio_output.fio_result((data_dir / xfer["out_dir"] / "fio.json").read_text())
    ran = {job["jobname"]: job["job options"]["bs"] for job in doc["jobs"]}
    assert ran == {"read.bs512": "4096", "read.bs2k": "4096", "read.bs4k": "4k"} | {
        "write.bs512": "4096",
        "write.bs2k": "4096",
        "write.bs4k": "4k",
    }
    for job in doc["jobs"]:
        moved = job[job["jobname"].split(".")[0]]
        assert moved["io_bytes"] > 0 and moved["io_bytes"] % 4096 == 0, job["jobname"]
    # The curve draws only the rows that ran the size they name; the others keep their figures, by name.
    curves = [s for s in run["series"] if s["step_id"] == xfer["id"] and s["x_unit"] == "bytes"]
    db = store.connect(data_dir)
    assert sorted(s["name"] for s in curves) == ["read.mb_s", "write.mb_s"]
    assert all([x for x, _ in store.series_points(db, s["id"])] == [4096] for s in curves)
    assert {"read.bs512.read.mb_s", "write.bs2k.write.mb_s"} <= {m["name"] for m in xfer["metrics"]}

    # The trace as generated, against what was played: every IO in whole 4096 B blocks, covering its bytes.
    trace = steps["trace"]
    folder = data_dir / trace["out_dir"]
    generated = trace_generator.generate(trace["detail"]["trace"]["profile"], trace["detail"]["trace"]["seed"])
    mapped, _ = trace_file.map_to_capacity(generated, run["drive"]["capacity_bytes"])
    declared = [io for _, ios in trace_file.segments(mapped) for io in ios]
    played = [
        line.split()[1:]
        for replay in sorted(folder.glob("seg*.replay.gz"))
        for line in gzip.open(replay, "rt").read().splitlines()
        if line.split()[1] in ("read", "write")
    ]
    assert len(played) == len(declared)
    widened = added = 0
    for (op, offset, length), (kind, start, size) in zip(declared, played):
        start, size = int(start), int(size)
        assert kind == {"R": "read", "W": "write"}[op] and start % 4096 == 0 and size % 4096 == 0
        assert start <= offset and offset + length <= start + size < offset + length + 4096
        widened += (start, size) != (offset, length)
        added += size - length
    assert widened and trace["detail"]["trace"]["widened"] == {
        "block_bytes": 4096,
        "ios": widened,
        "of_ios": len(declared),
        "bytes_added": added,
    }
    assert trace["detail"]["adapted"] == [
        f"{widened} of {len(declared)} trace IOs widened to whole 4096 B blocks (start rounded down, end up): "
        f"{added} bytes more in all"
    ]
    # And each IO that fio logged ran whole blocks.
    logs = sorted(folder.glob("seg*_clat.*.log.gz"))
    logged = [s for log in logs for s in fio_output.fio_log(gzip.open(log, "rt").read())]
    assert logged and all(s.offset % 4096 == 0 and s.bs % 4096 == 0 for s in logged)
    # The run carries it as a warning, on its page and in its offline report; each step keeps its own notes.
    warning = (
        "adapted to the drive's 4096 B logical blocks: in Sequential MB/s against transfer size, QD1; Trace playback "
        "(synthetic smoke trace), the block sizes and trace IOs that are not whole logical blocks ran rounded up to "
        "them (each step says how)"
    )
    doc = document.run_document(db, 1)
    assert warning in doc["warnings"] and str(escape(warning)).encode() in offline_report.render(
        doc
    )  # as the report escapes it
    client = make_app(data_dir).test_client()
    login(client)
    assert str(escape(warning)).encode() in client.get("/runs/1").data  # as Jinja escapes it
    assert not [s for s in run["steps"] if s["key"] not in ("xfer", "trace") and "adapted" in s["detail"]]


@needs_root()
def test_random_steps_issue_the_same_offsets_every_run(loopdev, tmp_path):
    """The suite's randseed and norandommap: two runs of the same random step issue the same offsets, and
    an offset may come again before the span is covered (as in Iometer), unlike fio's default random map."""
    dev, _ = loopdev()
    suite = locked.load("smoke")
    step = next(s for s in plan.compile_plan(suite, 512 << 20) if s.id == "rand-read-4k")
    assert "norandommap=1" in step.job_file and "randseed=2011" in step.job_file
    offsets = []
    for n in range(2):
        job = tmp_path / f"run{n}.fio"
        job.write_text(step.job_file + f"write_iolog=run{n}.iolog\n")  # the step's one job is last
        env = dict(os.environ, SSDBENCH_DUT=dev)
        fio = ["fio", "--output-format=json", str(job)]
        subprocess.run(fio, cwd=tmp_path, env=env, capture_output=True, check=True)
        issued = fio_output.fio_iolog((tmp_path / f"run{n}.iolog").read_text())
        offsets.append([io.offset for io in issued])
    blocks = step.size // 4096
    common = min(len(offsets[0]), len(offsets[1]))
    assert common >= blocks, "too few IOs in the step's runtime to cover the span once"
    assert offsets[0][:common] == offsets[1][:common]
    assert len(set(offsets[0][:blocks])) < 0.8 * blocks  # a random map would make every one distinct


def set_sensor(path, celsius):
    """The test's drive sensor: millidegrees, as an hwmon temp1_input holds them, replaced whole so that a
    read never meets a half-written file."""
    new = path.with_name(path.name + ".new")
    new.write_text(f"{celsius * 1000}\n")
    os.replace(new, path)


@contextlib.contextmanager
def run_with_sensor(dev, data_dir, sensor, warning_c, suite_file=ENGINE_SUITE[1]):
    """The engine suite on `dev`, run in this process on a thread of its own, the drive as discovery sees it
    but with `sensor` as its temperature source and `warning_c` as its warning temperature: a loop device has
    neither. Yields the run: its `id`, its `thread`, and its `outcome` once the thread has ended. A check that
    fails meanwhile cancels it, so that no run is left idling for a sensor that will not cool."""
    suite = locked.load(path=suite_file, allow_non_standard=True)
    db = store.connect(data_dir)
    drive, steps = runner.prepare(data_dir, suite, dev, os.path.basename(dev))
    drive |= {"temperature_source": f"hwmon:{sensor}", "warning_temp_c": warning_c}
    lock = runner.RunLock(data_dir).acquire()
    run = SimpleNamespace(id=store.create_run(db, drive, suite, steps), outcome=None)

    def execute():
        own = store.connect(data_dir)
        try:
            signals = runner.StopSignals()  # not installed: only the main thread may take signals
            run.outcome = runner.run_under_lock(own, data_dir, lock, run.id, suite, drive, steps, signals)
        finally:
            own.close()
            lock.release()

    run.thread = threading.Thread(target=execute)
    run.thread.start()
    try:
        yield run
    finally:
        if run.thread.is_alive():
            store.request_cancel(db, run.id)
        run.thread.join()
        db.close()


def run_series(data_dir, run_id):
    """The run, and its run-level series by name as (ms since the run started, value) points."""
    db = store.connect(data_dir)
    try:
        run = store.get_run(db, run_id)
        series = {s["name"]: store.series_points(db, s["id"]) for s in run["series"] if s["step_id"] is None}
    finally:
        db.close()
    return run, series


def at_ms(run, t):
    """A time of the run (its steps' started_at and finished_at) in the series' x: ms since it started."""
    return (t - run["started_at"]) * 1000


def sampled_after(data_dir, run_id, key, after_s):
    """Whether the step `key` is running and the temperature series has a point `after_s` into it."""
    run, series = run_series(data_dir, run_id)
    step = next(s for s in run["steps"] if s["key"] == key)
    if step["state"] != "running":
        return False
    start = at_ms(run, step["started_at"])
    return any(x >= start + after_s * 1000 for x, _ in series.get("temperature", []))


class HeldIdle:
    """The run's idles held until release() (or a cancel), each then the real idle: the test acts while the drive
    idles before rand-read-4k, where no fio holds the loop device, at a state it waits for rather than in a
    window of fixed seconds. Only when an idle ends is the test's; the idle itself is the engine's."""

    def __init__(self, monkeypatch):
        self.released = threading.Event()
        real = quiet.idle

        def held(minimum_s, should_stop):
            while not self.released.wait(0.1) and not should_stop():
                pass
            return real(minimum_s, should_stop)

        monkeypatch.setattr(quiet, "idle", held)

    def reach(self, data_dir, run, seconds):
        """Wait until rand-read-4k's idle has lasted `seconds`, as the temperature series shows it."""
        wait_until(lambda: sampled_after(data_dir, run.id, "rand-read-4k", seconds), f"{seconds} s into the idle")

    def release(self):
        self.released.set()


def sampler_alive(run_id):
    return any(t.name == f"run {run_id} temperature" for t in threading.enumerate())


def idling_suite(folder, seconds):
    """The engine suite with a fixed idle of `seconds` before each step that idles."""
    path = folder / f"idle-{seconds}.toml"
    with open(ENGINE_SUITE[1]) as f:
        path.write_text(f.read().replace("[idle]\nseconds = 0", f"[idle]\nseconds = {seconds}", 1))
    return path


def test_every_idle_lasts_the_suites_seconds_only_and_a_step_begun_hot_is_flagged(loopdev, tmp_path):
    """Issue 33, item 2: every step that idles first idles the suite's fixed seconds and no more, whatever the
    drive's temperature: a drive held hot is not waited out (a hot testbed would give the drive more time for its
    background work). It begins its step hot, more than 3 °C above the run's idle temperature: the step is
    flagged, with both temperatures. A temperature that cannot be read is unknown, never hot."""
    dev, _ = loopdev()
    data_dir = tmp_path / "data"
    sensor = tmp_path / "temp1_input"
    set_sensor(sensor, 40)
    suite_file = idling_suite(tmp_path, 2)
    with run_with_sensor(dev, data_dir, sensor, warning_c=None, suite_file=suite_file) as r:
        wait_until(lambda: run_series(data_dir, r.id)[1].get("temperature"), "the first temperature point")
        set_sensor(sensor, 50)  # and never cools
        wait_until(lambda: not r.thread.is_alive(), "the run to end")
    assert r.outcome == ("done", None)
    run = document.run_document(store.connect(data_dir), r.id)
    assert run["environment"]["idle"] == {"temperature_c": 40}
    suite = locked.load(path=suite_file, allow_non_standard=True)
    idled = [s for s in run["steps"] if s["detail"]["cool_down"]["state"] != "not asked"]
    assert [s["key"] for s in idled] == [s["id"] for s in suite.steps if s["cooldown"]] and len(idled) == 4
    for step in idled:
        cool = step["detail"]["cool_down"]
        # The fixed 2 s, not the 300 s wait to cool that a hot drive was given before.
        assert cool["minimum_s"] == 2 and 2 <= cool["idled_s"] < 60 and "cooled" not in cool, cool
        assert step["detail"]["began_at_c"] == 50
        hot = "it began hot, at 50.0 °C, more than 3.0 °C above the drive's idle 40.0 °C after the suite's 2 s idle"
        assert any(w.startswith(hot) for w in step["suspect"]), step["suspect"]
        unknown = {**step, "detail": {**step["detail"], "began_at_c": None}}
        assert validity.unsettled(unknown, 40.0) == [] and validity.unsettled(step, None) == []
    # A step begun within the margin is not hot.
    warm = {**idled[0], "detail": {**idled[0]["detail"], "began_at_c": 43.0}}
    assert validity.unsettled(warm, 40.0) == []
    # The fixed idles are in the run's time estimate.
    plain = locked.load(path=ENGINE_SUITE[1], allow_non_standard=True)
    estimate = plan.estimate_seconds
    assert estimate(plan.compile_plan(suite, 1 << 30)) == estimate(plan.compile_plan(plain, 1 << 30)) + 4 * 2


def test_a_repeat_sets_later_run_idles_before_it_begins(loopdev, tmp_path):
    """Issue 25, item 1: the runs of a repeat set after the first idle the suite's seconds before their first
    step, and are judged against the first run's idle temperature (a loop device has none), rather than begin
    unseen in the heat the run before left."""
    dev, _ = loopdev()
    data_dir = tmp_path / "data"
    suite = ("--suite-file", str(idling_suite(tmp_path, 1)), "--non-standard")
    proc = start_run(dev, data_dir, "--times", "2", suite=suite, command="repeat")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, out + err
    first, second = show(1, data_dir), show(2, data_dir)
    assert "between_runs" not in first["steps"][0]["detail"]["cool_down"]
    between = second["steps"][0]["detail"]["cool_down"]
    assert between["between_runs"] and between["idled_s"] >= 1 and between["minimum_s"] == 1, between
    assert second["environment"]["idle"] == {"temperature_c": None, "of_run": 1}


def test_temperature_is_sampled_through_the_whole_run(loopdev, tmp_path, monkeypatch):
    """Once a second from the steps' start to their end, whatever the runner is doing: an idle with no fio
    running is sampled too. The drive idles hot (above its warning temperature) through the idle of rand-read-4k,
    which the test holds until it has cooled it. The purge of a loop device takes milliseconds, less than the
    second between samples, so it is checked as part of the whole: no gap over 3 s from the first step's start to
    the last one's end (the VM test checks an NVMe purge)."""
    dev, _ = loopdev()
    data_dir = tmp_path / "data"
    sensor = tmp_path / "temp1_input"
    set_sensor(sensor, 40)
    hold = HeldIdle(monkeypatch)
    with run_with_sensor(dev, data_dir, sensor, warning_c=45) as r:
        wait_until(lambda: run_series(data_dir, r.id)[1].get("temperature"), "the first temperature point")
        set_sensor(sensor, 50)
        hold.reach(data_dir, r, 2)
        set_sensor(sensor, 40)
        hold.release()
        wait_until(lambda: not r.thread.is_alive(), "the run to end")
    assert r.outcome == ("done", None)
    assert not sampler_alive(r.id)
    run, series = run_series(data_dir, r.id)
    steps = {s["key"]: s for s in run["steps"]}
    assert [s["state"] for s in run["steps"]] == ["done"] * 6
    cool = steps["rand-read-4k"]["detail"]["cool_down"]
    assert cool["state"] == "applied" and steps["rand-read-4k"]["detail"]["began_at_c"] == 40
    # Points through the held idle, where no fio status ticks.
    cool_from = at_ms(run, steps["rand-read-4k"]["started_at"])
    assert len([x for x, _ in series["temperature"] if cool_from <= x <= cool_from + 2000]) >= 2
    # The whole run: no gap over 3 s from the first step's start to the last step's end, and nothing after the
    # run ended.
    xs = [x for x, _ in series["temperature"]]
    edges = sorted([at_ms(run, run["steps"][0]["started_at"]), at_ms(run, run["steps"][-1]["finished_at"]), *xs])
    assert max(b - a for a, b in zip(edges, edges[1:])) < 3000, xs
    assert xs[0] >= 0 and xs[-1] <= at_ms(run, run["finished_at"])
    # The hot seconds, and only they, are marked above the warning temperature.
    hot = [p for p in series["temperature"] if p[1] > 45]
    assert hot and series["temperature.above_warning"] == hot


def test_another_drive_on_the_same_node_fails_the_run_before_its_next_step(loopdev, tmp_path, monkeypatch):
    """The serial is read again before every step. The run idles before rand-read-4k (the idle held), where no
    fio holds the loop device, and there the device node is given another backing file: a
    drive swapped on the same node. The step fails without touching it, and the steps before it stay."""
    dev, img = loopdev()
    other = tmp_path / "other.img"
    subprocess.run(["truncate", "-s", "512M", str(other)], check=True)
    data_dir = tmp_path / "data"
    sensor = tmp_path / "temp1_input"
    set_sensor(sensor, 40)
    hold = HeldIdle(monkeypatch)
    with run_with_sensor(dev, data_dir, sensor, warning_c=45) as r:
        hold.reach(data_dir, r, 1)
        subprocess.run(["losetup", "-d", dev], check=True)
        # udev may still hold the node open for a moment after the detach: attach once it is free.
        wait_until(lambda: subprocess.run(["losetup", dev, str(other)]).returncode == 0, f"{dev} to take {other}")
        hold.release()
        wait_until(lambda: not r.thread.is_alive(), "the run to end")
    error = f"{dev} is now another drive (serial {other}), not the one this run began on (serial {img})"
    assert r.outcome == ("failed", error)
    run, _ = run_series(data_dir, r.id)
    assert [s["state"] for s in run["steps"]] == ["done", "done", "failed", "skipped", "skipped", "skipped"]
    assert run["steps"][2]["error"] == error and run["error"] == error


def fill(folder):
    """Write a file into `folder` until its file system has no room left, as a run's results would."""
    subprocess.run(["dd", "if=/dev/zero", f"of={folder / 'filler'}", "bs=1M"], capture_output=True)
    assert store.free_bytes(folder) < store.FULL_BELOW


def full_error(data_dir):
    return f"data partition full: no room left in {data_dir} for the step's results; the steps before it are kept"


def test_a_partition_that_fills_while_the_drive_idles_fails_the_next_step_before_fio(
    loopdev, small_partition, monkeypatch
):
    """The run idles before rand-read-4k (the idle held), and there the data partition fills up:
    the step fails before fio starts, so nothing is written for it, and the steps before it stay."""
    dev, _ = loopdev()
    data_dir = small_partition("32M")
    sensor = data_dir.parent / "temp1_input"
    set_sensor(sensor, 40)
    hold = HeldIdle(monkeypatch)
    with run_with_sensor(dev, data_dir, sensor, warning_c=45) as r:
        hold.reach(data_dir, r, 1)
        fill(data_dir)
        hold.release()
        wait_until(lambda: not r.thread.is_alive(), "the run to end")
    assert r.outcome == ("failed", full_error(data_dir))
    run, _ = run_series(data_dir, r.id)
    assert [s["state"] for s in run["steps"]] == ["done", "done", "failed", "skipped", "skipped", "skipped"]
    assert run["steps"][2]["error"] == full_error(data_dir) and run["steps"][1]["metrics"]
    assert not os.path.exists(data_dir / run["steps"][2]["out_dir"])
    assert not os.path.exists(data_dir / store.RESERVE_NAME)


def test_a_full_data_partition_fails_the_step_and_the_run_can_still_be_exported_and_deleted(
    loopdev, small_partition, tmp_path
):
    """The partition fills up while fio runs a 300 s step. fio says nothing of the writes it cannot make (it
    exits 0, its JSON cut short), so the runner looks: it stops fio, and the step fails as "data partition
    full", long before its 300 s. The steps before it stay; the run, its filler still beside it, can be
    bundled and deleted."""
    dev, _ = loopdev()
    data_dir = small_partition("32M")
    proc = start_run(dev, data_dir, suite=long_suite(tmp_path, "rand-write-4k"))
    wait_for_step(data_dir, "rand-write-4k")
    wait_until(lambda: fio_status(data_dir / "runs" / "1" / "03-rand-write-4k"), "fio's first status")
    fill(data_dir)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1 and out.strip() == f"run 1: failed: {full_error(data_dir)}", err
    run = show(1, data_dir)
    assert run["state"] == "failed" and run["error"] == full_error(data_dir)
    assert [s["state"] for s in run["steps"]] == ["done", "done", "done", "failed", "skipped", "skipped"]
    failed = run["steps"][3]
    assert failed["error"] == full_error(data_dir) and not failed["metrics"]
    assert failed["finished_at"] - failed["started_at"] < 150  # stopped, not run to its end
    assert all(s["metrics"] for s in run["steps"][1:3])
    assert not os.path.exists(data_dir / store.RESERVE_NAME)

    bundle = ssdbench("bundle", "1", "-o", str(tmp_path), data_dir=data_dir, check=True).stdout.strip()
    assert ssdbench("verify", bundle).returncode == 0
    client = make_app(data_dir).test_client()
    assert client.delete("/api/runs/1", headers={"X-CSRF-Token": login(client)}).status_code == 204
    assert not os.path.exists(data_dir / "runs" / "1")


def test_cancel_during_an_idle_stops_the_sampler(loopdev, tmp_path, monkeypatch):
    """A cancel while the drive idles: the run ends cancelled, its sampler stopped before it returns, and no
    point after its end."""
    dev, _ = loopdev()
    data_dir = tmp_path / "data"
    sensor = tmp_path / "temp1_input"
    set_sensor(sensor, 40)
    hold = HeldIdle(monkeypatch)
    with run_with_sensor(dev, data_dir, sensor, warning_c=None) as r:
        hold.reach(data_dir, r, 1)  # never released: rand-read-4k idles until the cancel
        assert sampler_alive(r.id)
        db = store.connect(data_dir)
        store.request_cancel(db, r.id)
        db.close()
        wait_until(lambda: not r.thread.is_alive(), "the run to end")
        # The run returns only once its sampler has stopped.
        assert r.outcome == ("cancelled", runner.STOPPED) and not sampler_alive(r.id)
    run, series = run_series(data_dir, r.id)
    assert [s["state"] for s in run["steps"]][2:] == ["cancelled", "skipped", "skipped", "skipped"]
    assert series["temperature"][-1][0] <= at_ms(run, run["finished_at"])
    assert "temperature.above_warning" not in series  # no warning temperature, no marks


def test_second_run_is_refused_while_one_is_active(loopdev, tmp_path):
    dev, _ = loopdev()
    other, _ = loopdev(name="other.img")
    data_dir = tmp_path / "data"
    first = start_run(dev, data_dir, suite=long_suite(tmp_path, "rand-read-4k"))
    try:
        wait_for_step(data_dir, "rand-read-4k")
        second = ssdbench(
            "run", *ENGINE_SUITE, "--drive", other, "--confirm", os.path.basename(other), data_dir=data_dir
        )
        assert second.returncode == 2
        assert f"another run is active (run 1 on {dev}" in second.stderr
    finally:
        ssdbench("cancel", data_dir=data_dir)
        first.wait(timeout=120)
    assert show(1, data_dir)["state"] == "cancelled"


def test_cancel_stops_fio_cleanly(loopdev, tmp_path):
    dev, _ = loopdev()
    data_dir = tmp_path / "data"
    proc = start_run(dev, data_dir, suite=long_suite(tmp_path, "rand-read-4k"))
    wait_for_step(data_dir, "rand-read-4k")
    wait_until(lambda: fio_status(data_dir / "runs" / "1" / "02-rand-read-4k"), "fio's first status")
    cancelled = ssdbench("cancel", data_dir=data_dir)
    assert cancelled.returncode == 0 and "asked run 1 to stop" in cancelled.stdout
    proc.wait(timeout=60)
    assert proc.returncode == 1
    run = show(1, data_dir)
    assert run["state"] == "cancelled"
    states = [s["state"] for s in run["steps"]]
    assert states[:2] == ["done", "done"] and states[2] == "cancelled" and set(states[3:]) == {"skipped"}
    # fio stopped on SIGINT and still wrote its result for the partial step.
    assert run["steps"][2]["metrics"]


def run_exists(data_dir, run_id):
    if not os.path.exists(store.db_path(data_dir)):
        return False
    db = store.connect(data_dir)
    try:
        return db.execute("SELECT 1 FROM runs WHERE id=?", (run_id,)).fetchone() is not None
    finally:
        db.close()


def test_sigterm_at_any_moment_cancels_and_never_fails(loopdev, tmp_path):
    """20 moments, from the run's first instant to well into its third step: quieting the OS, the purge,
    fio starting before its files exist, fio stopping, the parsing of its output. The run is then
    always cancelled: never failed, never left running. The moments come as offsets after the run
    appears in the database; whichever phase each one lands in, the answer must be the same. Two lanes of
    moments, each on its own drive and data folder, take turns side by side: most of a moment is a process
    starting."""

    def lane(first):
        dev, _ = loopdev(name=f"disk{first}.img")
        data_dir = tmp_path / f"data{first}"
        for run_id, n in enumerate(range(first, 20, 2), 1):
            proc = start_run(dev, data_dir)
            wait_until(lambda: run_exists(data_dir, run_id) or proc.poll() is not None, f"run {run_id} to start")
            time.sleep(n * 0.15)
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
            run = show(run_id, data_dir)
            assert (proc.returncode, run["state"], run["error"]) == (1, "cancelled", "stopped by cancel"), (n, err)
            assert "failed" not in {s["state"] for s in run["steps"]}, (n, run["steps"])
            assert f"run {run_id}: cancelled" in out

    with concurrent.futures.ThreadPoolExecutor(2) as lanes:
        for done in [lanes.submit(lane, first) for first in (0, 1)]:
            done.result()


def _backing(dev):
    return open(f"/sys/block/{os.path.basename(dev)}/loop/backing_file").read().strip()


def test_drive_that_vanishes_fails_its_step_with_fios_message(loopdev, tmp_path):
    dev, _ = loopdev()
    data_dir = tmp_path / "data"
    proc = start_run(dev, data_dir, suite=long_suite(tmp_path, "rand-write-4k"))
    wait_for_step(data_dir, "rand-write-4k")
    # fio is writing once it has printed a status with I/O done.
    step_dir = data_dir / "runs" / "1" / "03-rand-write-4k"
    wait_until(lambda: any(d["jobs"][0]["write"]["io_bytes"] for d in fio_status(step_dir)), "fio to write")
    vanish(dev)
    proc.wait(timeout=60)
    assert proc.returncode == 1
    run = show(1, data_dir)
    assert run["state"] == "failed"
    step = run["steps"][3]
    assert step["state"] == "failed"
    assert f"the drive {dev} vanished during the step; fio said: fio: io_u error on file {dev}" in step["error"]
    assert [s["state"] for s in run["steps"][:3]] == ["done"] * 3


def test_mounted_loop_device_is_refused(loopdev, tmp_path):
    dev, _ = loopdev("64M")
    subprocess.run(["mkfs.ext4", "-q", dev], check=True)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", dev, str(mnt)], check=True)
    try:
        proc = ssdbench(
            "run", "--suite", "smoke", "--drive", dev, "--confirm", os.path.basename(dev), data_dir=tmp_path / "data"
        )
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
    assert proc.returncode == 2
    assert f"is not a valid target: has mounted file systems ({dev} on {mnt})" in proc.stderr


def test_existing_data_and_wrong_confirmation_are_refused(loopdev, tmp_path):
    dev, _ = loopdev("64M")
    wrong = ssdbench("run", "--suite", "smoke", "--drive", dev, "--confirm", "SOMETHING", data_dir=tmp_path)
    assert wrong.returncode == 2 and f"--confirm {os.path.basename(dev)}" in wrong.stderr
    subprocess.run(["mkfs.ext4", "-q", dev], check=True)
    kept = ssdbench("run", "--suite", "smoke", "--drive", dev, "--confirm", os.path.basename(dev), data_dir=tmp_path)
    assert kept.returncode == 2 and "needs --destroy-data" in kept.stderr


def test_tampered_suite_file_is_refused_by_run(loopdev, tmp_path):
    dev, _ = loopdev("64M")
    from importlib import resources

    f = tmp_path / "smoke.toml"
    f.write_text(
        (resources.files("ssdbench") / "suites" / "smoke.toml").read_text().replace("iodepth = 3", "iodepth = 4")
    )
    proc = ssdbench(
        "run", "--suite-file", str(f), "--drive", dev, "--confirm", os.path.basename(dev), data_dir=tmp_path / "data"
    )
    assert proc.returncode == 2 and "the file was changed" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_fio_and_not_root_are_clear_errors(loopdev, tmp_path):
    dev, _ = loopdev("64M")
    args = ["run", "--suite", "smoke", "--drive", dev, "--confirm", os.path.basename(dev)]
    no_fio = ssdbench(*args, data_dir=tmp_path, env=dict(os.environ, PATH="/nonexistent"))
    assert no_fio.returncode == 2
    assert no_fio.stderr.strip() == "ssdbench: error: fio is not installed (not found in PATH); install the fio package"
    as_nobody = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            sys.executable,
            "-m",
            "ssdbench.cli",
            *args,
            "--data-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=os.environ,
    )
    assert as_nobody.returncode == 2
    assert "must run as root" in as_nobody.stderr and "Traceback" not in as_nobody.stderr


def leftovers(run_dir):
    """The processes whose working folder is in the run's folder: the run's fio and its jobs."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/cwd").startswith(str(run_dir) + os.sep):
                found.append(int(pid))
    return found


def test_a_run_killed_in_a_step_resumes_from_its_purge_and_its_bundle_says_so(loopdev, tmp_path):
    """The runner killed in a step, as a crash or a power cut: the run is left with its steps, the next start puts
    back what it changed, and resumes it from its purge. About 40 s: the engine suite's purge, fill and first
    read twice, and the host-cost calibration twice."""
    dev, _ = loopdev()
    # The drive's files the run sets hold something else first, so that the run changes every one of them.
    set_queue_files(dev, scheduler="mq-deadline", nomerges="0", write_cache="write through")
    found = queue_files(dev)
    data_dir = tmp_path / "data"
    suite = long_suite(tmp_path, "rand-write-4k")
    proc = start_run(dev, data_dir, suite=suite)
    wait_for_step(data_dir, "rand-write-4k")
    run_dir = store.run_dir(data_dir, 1)
    step_dir = data_dir / "runs" / "1" / "03-rand-write-4k"
    wait_until(lambda: any(d["jobs"][0]["write"]["io_bytes"] for d in fio_status(step_dir)), "fio to write")
    proc.kill()  # as a crash would
    proc.wait()
    cut_at = time.time()
    assert show(1, data_dir)["state"] == "running"
    # Killed, it put nothing back: the files hold what it set, and its crash record what they held.
    assert queue_files(dev) == {"scheduler": "none", "nomerges": "2", "write_cache": "write back"}
    with open(data_dir / quiet.RECORD) as f:
        record = json.load(f)
    assert record["run_id"] == 1 and record["pid"] == proc.pid and record["drive"]["serial"] == str(_backing(dev))
    queue = f"/sys/block/{os.path.basename(dev)}/queue"
    held = {e["file"]: e["value"] for e in record["put_back"]}
    assert {f"{queue}/{n}": v for n, v in found.items()}.items() <= held.items()

    # The next start resumes it: it marks the killed run, puts back what it changed before it sets them again
    # (its controls found them as they were), ends the fio job the killed run left writing, and starts again
    # from the purge before the step that was cut.
    argv = [*suite, "--drive", dev, "--confirm", os.path.basename(dev), "--data-dir", str(data_dir)]
    again = subprocess.Popen(
        [sys.executable, "-m", "ssdbench.cli", "run", *argv, "--resume", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def started_again():
        db = store.connect(data_dir)
        try:
            row = db.execute("SELECT state, started_at FROM steps WHERE key='rand-write-4k'").fetchone()
        finally:
            db.close()
        return row[0] == "running" and row[1] > cut_at and fio_status(step_dir)

    wait_until(lambda: again.poll() is not None or started_again(), "the step to start again")
    assert again.poll() is None, again.communicate()
    again.send_signal(signal.SIGTERM)  # the resumed step has shown what it starts from: the test ends it
    out, err = again.communicate(timeout=120)
    assert "run 1: cancelled" in out, err
    run = show(1, data_dir)
    [entry] = run["environment"]["resumed"]
    assert entry["cut_step"] == "rand-write-4k" and entry["from_step"] == "purge" and entry["cut_at"] >= cut_at
    steps = {s["key"]: s for s in run["steps"]}
    # The step starts again from the state it declares: the purge and every step after it ran again, after the cut.
    for key in ("purge", "seq-fill", "rand-read-4k"):
        assert steps[key]["state"] == "done" and steps[key]["started_at"] >= cut_at, key
        assert steps[key]["detail"]["resumed"].startswith("run again before rand-write-4k: the run was cut off")
    assert all(s["metrics"] for s in run["steps"][1:3])
    assert steps["rand-write-4k"]["started_at"] >= steps["rand-read-4k"]["finished_at"]
    assert steps["rand-write-4k"]["detail"]["resumed"].startswith("the step that was cut off: ")
    assert not leftovers(run_dir)  # the cut run's fio job was ended before the purge, and the cancelled one's too
    recovered = run["environment"]["recovered"]
    assert (recovered["run_id"], recovered["pid"]) == (1, proc.pid)
    back = {e["file"]: e for e in recovered["put_back"]}
    assert set(back) == set(held)
    for path, value in held.items():
        assert (back[path]["state"], back[path]["now"]) == ("applied", value), back[path]
    controls = run["environment"]["controls"]
    assert (controls["scheduler"]["before"], controls["nomerges"]["before"]) == ("mq-deadline", "0")
    assert controls["kernel_write_cache"]["before"] == "write through"
    assert queue_files(dev) == found and not os.path.exists(data_dir / quiet.RECORD)
    warning = "resumed: the run was cut off (crash or power loss) in step rand-write-4k and resumed from step purge"
    assert any(w.startswith(warning) for w in document.run_document(store.connect(data_dir), 1)["warnings"])
    # The bundle says so: its result.json and its report.
    written = ssdbench("bundle", "1", "-o", str(tmp_path), data_dir=data_dir, check=True).stdout.strip()
    with zipfile.ZipFile(written) as zf:
        result = json.loads(zf.read("result.json"))
        report = zf.read("report.html").decode()
    assert result["environment"]["resumed"] == [entry]
    assert any(w.startswith(warning) for w in result["warnings"]) and str(escape(warning)) in report


def test_a_run_resumes_from_the_last_purge_at_or_before_the_step_that_was_cut():
    kinds = ["purge", "fio", "fio", "purge", "fio", "trace"]
    keys = [f"s{i}-{k}" for i, k in enumerate(kinds)]

    def cut(states):
        run = {
            "id": 1,
            "finished_at": 5.0,
            "steps": [
                {"idx": i, "key": key, "kind": k, "state": state}
                for i, (key, k, state) in enumerate(zip(keys, kinds, states))
            ],
        }
        entry = runner.resume_entry(run)
        return entry["cut_step"], entry["from_step"]

    done = ["done"] * 6
    assert cut(done[:5] + ["interrupted"]) == ("s5-trace", "s3-purge")
    assert cut(done[:3] + ["interrupted", "skipped", "skipped"]) == ("s3-purge", "s3-purge")  # a purge cut: itself
    assert cut(done[:2] + ["interrupted"] + ["skipped"] * 3) == ("s2-fio", "s0-purge")
    assert cut(done[:4] + ["skipped", "skipped"]) == ("s4-fio", "s3-purge")  # cut between steps: the next one
    kinds[0] = "fio"  # no purge before it: the run's first step
    assert cut(done[:2] + ["interrupted"] + ["skipped"] * 3) == ("s2-fio", "s0-purge")
    with pytest.raises(SsdbenchError, match="no step left to run"):
        cut(done)
