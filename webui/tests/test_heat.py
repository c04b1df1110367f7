"""Heat is a flag, not a footnote (issue 32, item 3): each step's most temperature and its seconds at or above the
drive's warning temperature, from the run's own once-a-second reads; the drive's counters of time spent hot read
before and after each step; a step that reached the warning temperature, or moved a counter, is suspect (validity
rule 8); heat is a part of the testbed's class; and a SATA drive's temperature is read between its IO only. On real
loop devices with a sensor file as hwmon gives it, the real engine, and NVMe health logs captured from the real
tools (tests/data)."""

import copy
import os
import threading
import time

from conftest import ENGINE_SUITE, data, needs_root
from test_runner import run_series, run_with_sensor, set_sensor, wait_until

from ssdbench.drives import health, tool_output
from ssdbench.results import document, store, testbed, validity
from ssdbench.run import fio, runner
from ssdbench.suites import locked

WARNING_C = 45


@needs_root()
def test_a_step_held_above_the_warning_temperature_is_flagged_with_its_figures(loopdev, tmp_path, monkeypatch):
    """The sensor is held at 50 °C, above the drive's 45 °C warning temperature, through rand-read-4k's fio (3 s)
    only, and at 40 °C otherwise: that step, and only it, has a most of 50 °C, its seconds at or above 45 °C, and is
    suspect under rule 8; every step has its counters' delta (a loop device has none: unknown, said so); the run's
    testbed class says it ran hot, and so sets it apart from a cool run's."""
    dev, _ = loopdev()
    data_dir = tmp_path / "data"
    sensor = tmp_path / "temp1_input"
    set_sensor(sensor, 40)
    real = fio.run

    def hot_run(job_text, step_id, *args, **kwargs):
        if step_id != "rand-read-4k":
            return real(job_text, step_id, *args, **kwargs)
        set_sensor(sensor, 50)
        try:
            return real(job_text, step_id, *args, **kwargs)
        finally:
            set_sensor(sensor, 40)

    monkeypatch.setattr(fio, "run", hot_run)
    with run_with_sensor(dev, data_dir, sensor, warning_c=WARNING_C) as r:
        wait_until(lambda: not r.thread.is_alive(), "the run to end")
    assert r.outcome == ("done", None)
    run = document.run_document(store.connect(data_dir), r.id)
    for step in run["steps"]:
        metrics = {m["name"]: m for m in step["metrics"]}
        assert step["detail"]["thermal"] == {"unavailable": "no health log: a loop device has no health log"}
        heat = [w for w in step["suspect"] if "warning temperature" in w or "time spent hot" in w]
        if step["key"] == "rand-read-4k":
            assert metrics["temperature.max_c"]["value"] == 50.0
            # 3 s of fio at 50 °C, read once a second: 2 to 4 reads at or above 45 °C (the edges of a second).
            assert 2 <= metrics["temperature.at_or_above_warning_s"]["value"] <= 5, metrics
            assert (
                "at or above the drive's warning temperature, 45 °C"
                in (metrics["temperature.at_or_above_warning_s"]["source"])
            )
            assert len(heat) == 1 and heat[0].startswith("it reached the drive's warning temperature of 45 °C (")
            assert "at most 50.0 °C" in heat[0]
        else:
            # Every step is read, the purge of milliseconds too (a read as it ends), and none of them was hot.
            assert metrics["temperature.max_c"]["value"] == 40.0, step["key"]
            assert metrics["temperature.at_or_above_warning_s"]["value"] == 0.0
            assert heat == []
    # The hot seconds are in the run's series, within rand-read-4k's span.
    _, series = run_series(data_dir, r.id)
    assert [v for _, v in series["temperature.above_warning"]] and all(
        v == 50.0 for _, v in series["temperature.above_warning"]
    )
    # The testbed: ran hot, and a cool run of the same testbed stands apart in that part.
    assert testbed.heat(run) == "yes"
    cool = copy.deepcopy(run)
    for step in cool["steps"]:
        for m in step["metrics"]:
            if m["name"] == "temperature.max_c":
                m["value"] = 40.0
            if m["name"] == "temperature.at_or_above_warning_s":
                m["value"] = 0.0
    assert testbed.heat(cool) == "no"
    hot_class = testbed.of(run, validity.suspects(run))["classes"]
    cool_class = testbed.of(cool, validity.suspects(cool))["classes"]
    assert hot_class["heat"] == "yes" and cool_class["heat"] == "no"
    assert testbed.differences(cool_class, testbed.of(run, validity.suspects(run))) == [
        "ran hot: yes (the current run's: no)"
    ]
    # Unknown is never cool: without a warning temperature the reads judge nothing, and a loop device has no
    # counters, so its heat is not recorded: a class of its own, which matches neither hot nor cool.
    unknown = copy.deepcopy(cool)
    unknown["drive"]["warning_temp_c"] = None
    assert testbed.heat(unknown) == testbed.NOT_RECORDED
    for known in ("yes", "no"):
        assert testbed.differences({"heat": known}, {"classes": {"heat": testbed.heat(unknown)}}) == [
            f"ran hot: not recorded (the current run's: {known})"
        ]


def test_a_steps_thermal_counters_that_moved_flag_it():
    """NVMe's thermal management transitions and times and its warning and critical temperature time, as nvme-cli
    prints them (captured from QEMU's NVMe drive, which never throttles: the rise is set on the captured log's
    counters), read before and after a step: one that moved flags the step and the testbed, whatever its
    temperature read; counters that did not move, read, make the step known cool without a temperature."""
    before = health.from_log("nvme smart-log", tool_output.nvme_smart_log(data("nvme-smart-log.json")))
    after = health.from_log("nvme smart-log", tool_output.nvme_smart_log(data("nvme-smart-log-64mib.json")))
    assert set(before["thermal"]) == set(tool_output.NVME_THERMAL)
    hot = copy.deepcopy(after)
    hot["thermal"] |= {"thm_temp2_trans_count": 1, "thm_temp2_total_time": 7, "warning_temp_time": 1}

    def step(thermal):
        return {"key": "s", "kind": "fio", "state": "done", "metrics": [], "detail": {"thermal": thermal}}

    moved = step(health.thermal_between(before, hot))
    reasons = validity.heated(moved, {}, 70)
    assert reasons == [
        "the drive's counters of time spent hot moved during it (warning_temp_time 0 to 1, thm_temp2_trans_count 0 "
        "to 1, thm_temp2_total_time 0 to 7): it ran hot or throttled, so its figures may be its thermal limit's, not "
        "its own"
    ]
    still = step(health.thermal_between(before, after))
    assert validity.heated(still, {}, 70) == []
    drive = {"warning_temp_c": 70}
    assert testbed.heat({"drive": drive, "environment": {}, "steps": [still, still]}) == "no"
    assert testbed.heat({"drive": drive, "environment": {}, "steps": [still, moved]}) == "yes"
    # A step whose counters could not be read, and with no temperature read, is unknown.
    sata = health.from_log("smartctl -x", tool_output.smartctl(data("smartctl-sata-x.json")))
    unread = step(health.thermal_between(sata, sata))
    assert "holds no counter" in unread["detail"]["thermal"]["unavailable"]
    assert testbed.heat({"drive": drive, "environment": {}, "steps": [still, unread]}) == testbed.NOT_RECORDED
    # A step's most temperature at or above the warning flags it where no second was counted (a SATA drive's).
    assert validity.heated(unread, {"temperature.max_c": 70.0}, 70)[0] == (
        "it reached the drive's warning temperature of 70 °C (at most 70.0 °C): its figures may be its thermal "
        "limit's, not its own"
    )


@needs_root()
def test_a_sata_drives_temperature_is_read_between_its_io_only(loopdev, tmp_path):
    """A SATA drive's temperature read is a non-queued ATA command, which drains its NCQ queue: the sampler reads
    once as a step's IO starts and once as it ends, never during it, and resumes once a second after. The heat
    during the IO is then unseen by the reads (its counters, where the drive keeps them, still see it), and its
    figures say so and count no seconds."""
    dev, _ = loopdev()
    data_dir = tmp_path / "data"
    sensor = tmp_path / "temp1_input"
    set_sensor(sensor, 40)
    suite = locked.load(path=ENGINE_SUITE[1], allow_non_standard=True)
    db = store.connect(data_dir)
    drive, steps = runner.prepare(data_dir, suite, dev, os.path.basename(dev))
    run_id = store.create_run(db, drive, suite, steps)
    sata = drive | {"transport": "sata", "temperature_source": f"hwmon:{sensor}", "warning_temp_c": WARNING_C}
    main = threading.get_ident()
    with runner.TemperatureLog(data_dir, run_id, sata) as log:
        wait_until(lambda: len(log.reads) >= 2, "two reads")
        began = time.time()
        with log.between_io():
            entered = time.time()
            set_sensor(sensor, 50)
            time.sleep(3.5)
            during = [t for t, _ in log.reads if t > entered]
            set_sensor(sensor, 40)
        ended = time.time()
        # the read as the IO ended was the step's last: the step's own read at its end sends no second command
        mine, read = [], log.read
        log.read = lambda: mine.append(threading.get_ident() == main) or read()
        log.read_now()
        log.read = read
        assert not any(mine)
        wait_until(lambda: any(t > ended + 1.5 for t, _ in log.reads), "the once-a-second reads to resume")
    assert during == []
    edge = [v for t, v in log.reads if began <= t <= entered]
    assert edge == [40.0]
    figures = {m.name: m for m in log.figures(began, ended + 0.5)}
    assert set(figures) == {"temperature.max_c"} and figures["temperature.max_c"].value == 40.0
    assert "never during it" in figures["temperature.max_c"].source
    # Every read reached the run's series, the edges included, and no read was
    # taken in the 3.5 s of IO.
    series = next(s for s in store.get_run(db, run_id)["series"] if s["name"] == "temperature")
    points = store.series_points(db, series["id"])
    assert len(points) == len(log.reads)
    started_at = store.get_run(db, run_id)["started_at"]
    xs = sorted(x / 1000 + started_at for x, _ in points)
    assert max(b - a for a, b in zip(xs, xs[1:])) >= 3.4
    assert not any(t.name == f"run {run_id} temperature" for t in threading.enumerate())
    db.close()
