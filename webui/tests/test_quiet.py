"""Pieces of the quiet-OS controls that need no device."""

import glob
import json
import os

from conftest import data

from ssdbench.drives import discovery
from ssdbench.run import quiet
from ssdbench.system import tools


def data_folder(tmp_path):
    """An empty data folder, where a run keeps its record of what to put back."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    return data_dir


def test_cpulist():
    assert quiet.parse_cpulist("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}


def test_an_idle_idles_its_fixed_seconds_and_a_stop_ends_it():
    result = quiet.idle(1, lambda: False)
    assert result["state"] == "applied" and result["idled_s"] >= 1.0 and result["minimum_s"] == 1
    stopped = quiet.idle(3600, lambda: True)
    assert stopped["idled_s"] < 1 and stopped["minimum_s"] == 3600


# What each control changes is put back after the run, and after a killed run by the next start. The files of
# the governors stand in for cpufreq, which this host has not (the loop-device tests in test_testbed and
# test_runner change a real drive's queue files); nvme-cli is played by a fake controller, as neither this host
# nor QEMU (whose NVMe has no APST) has a controller with APST.


def cpufreq(tmp_path, governors):
    """A cpufreq tree: cpuN/cpufreq/scaling_governor holding each governor; quiet.GOVERNORS is pointed at it."""
    for n, governor in enumerate(governors):
        folder = tmp_path / "cpu" / f"cpu{n}" / "cpufreq"
        folder.mkdir(parents=True)
        (folder / "scaling_governor").write_text(governor + "\n")
    return str(tmp_path / "cpu" / "cpu[0-9]*" / "cpufreq" / "scaling_governor")


def governors(pattern):
    return [open(p).read().strip() for p in sorted(glob.glob(pattern))]


def record_of(data_dir):
    with open(os.path.join(data_dir, quiet.RECORD)) as f:
        return json.load(f)


LOOP = {"path": "/dev/loop-none", "transport": "loop", "host_controller": None}


def test_every_governor_is_set_recorded_first_and_put_back(tmp_path, monkeypatch):
    monkeypatch.setattr(quiet, "GOVERNORS", cpufreq(tmp_path, ["powersave", "performance", "schedutil"]))
    data_dir = data_folder(tmp_path)
    written = quiet._set_choice

    def after_the_record(path, value, what):
        # the file's value as found is in the record on the disk before the file is written
        if value == "performance":
            assert {"control": "governor", "file": path, "value": open(path).read().strip()} in record_of(data_dir)[
                "put_back"
            ]
        return written(path, value, what)

    monkeypatch.setattr(quiet, "_set_choice", after_the_record)
    controls = quiet.Quiet(LOOP, quiet.Record(data_dir, 7, LOOP))
    result = controls.governor()
    assert result == {
        "state": "applied",
        "value": "performance on all CPUs",
        "before": {"cpu0": "powersave", "cpu1": "performance", "cpu2": "schedutil"},
    }
    assert governors(quiet.GOVERNORS) == ["performance"] * 3
    record = record_of(data_dir)
    assert record["run_id"] == 7 and record["pid"] == os.getpid() and record["boot_id"] == quiet.boot_id()
    assert [(e["file"].split("/")[-3], e["value"]) for e in record["put_back"]] == [
        ("cpu0", "powersave"),
        ("cpu2", "schedutil"),
    ]
    assert controls.release() == {"governor": {"state": "applied", "value": {"cpu0": "powersave", "cpu2": "schedutil"}}}
    assert governors(quiet.GOVERNORS) == ["powersave", "performance", "schedutil"]
    assert not os.path.exists(data_dir / quiet.RECORD)  # removed once put back
    assert controls.release() == {}


def test_a_killed_runs_record_is_put_back_by_the_next_start(tmp_path, monkeypatch):
    monkeypatch.setattr(quiet, "GOVERNORS", cpufreq(tmp_path, ["powersave", "schedutil"]))
    data_dir = data_folder(tmp_path)
    assert quiet.recover(data_dir) is None  # no record: nothing to do
    quiet.Quiet(LOOP, quiet.Record(data_dir, 3, LOOP)).governor()  # and the runner dies: no restore
    assert governors(quiet.GOVERNORS) == ["performance", "performance"]
    recovered = quiet.recover(data_dir)
    assert governors(quiet.GOVERNORS) == ["powersave", "schedutil"]
    assert recovered["run_id"] == 3 and recovered["pid"] == os.getpid()
    assert [(e["control"], e["value"], e["state"], e["now"]) for e in recovered["put_back"]] == [
        ("governor", "schedutil", "applied", "schedutil"),  # the last set first
        ("governor", "powersave", "applied", "powersave"),
    ]
    assert not os.path.exists(data_dir / quiet.RECORD)
    assert quiet.recover(data_dir) is None
    lines = list(quiet.recovered_lines(recovered))
    assert lines[0] == f"run 3 (pid {os.getpid()}) ended without putting back what it changed: put back from its record"
    assert lines[1].endswith("cpu1/cpufreq/scaling_governor is 'schedutil' again")


def test_after_a_restart_the_kernels_files_are_left_as_the_boot_set_them(tmp_path, monkeypatch):
    monkeypatch.setattr(quiet, "GOVERNORS", cpufreq(tmp_path, ["powersave"]))
    data_dir = data_folder(tmp_path)
    quiet.Quiet(LOOP, quiet.Record(data_dir, 1, LOOP)).governor()
    (tmp_path / "boot_id").write_text("another-boot\n")
    monkeypatch.setattr(quiet, "BOOT_ID", str(tmp_path / "boot_id"))
    recovered = quiet.recover(data_dir)
    assert governors(quiet.GOVERNORS) == ["performance"]  # as this boot has it: not the last boot's value
    [entry] = recovered["put_back"]
    assert entry["state"] == "unavailable" and "restarted" in entry["reason"]
    assert not os.path.exists(data_dir / quiet.RECORD)


def test_nothing_is_changed_that_could_not_be_recorded_first(tmp_path, monkeypatch):
    monkeypatch.setattr(quiet, "GOVERNORS", cpufreq(tmp_path, ["powersave"]))
    controls = quiet.Quiet(LOOP, quiet.Record(tmp_path / "no-such-folder", 1, LOOP))
    result = controls.governor()
    assert (
        result["state"] == "unavailable"
        and "record to put it back after a crash could not be written" in (result["reason"])
    )
    assert governors(quiet.GOVERNORS) == ["powersave"] and controls.undo == []


class FakeController:
    """nvme-cli's get-feature and set-feature 0x0c on a controller with APST on: the value as nvme-cli 2.3 prints
    it (tests/data/nvme-get-feature-vwc.txt, the same line for feature 0x06), the table as its raw data buffer."""

    def __init__(self):
        self.value, self.table, self.sent = 1, bytes(range(256)), []

    def run(self, argv, timeout=60, ok=(0,), binary=False):
        assert argv[:2] in (["nvme", "get-feature"], ["nvme", "set-feature"]) and argv[2:5] == [
            "/dev/nvme0",
            "-f",
            "0x0c",
        ]
        if argv[1] == "set-feature":
            data = next(a for a in argv if a.startswith("--data="))[len("--data=") :]
            self.value = int(next(a for a in argv if a.startswith("--value="))[len("--value=") :])
            self.table = open(data, "rb").read()
            self.sent.append((self.value, self.table))
            return ""
        if "--raw-binary" in argv:
            assert binary
            return self.table
        return f"get-feature:0x0c (Autonomous Power State Transition), Current value:{self.value:#010x}\n"


NVME = {
    "path": "/dev/nvme0n1",
    "transport": "nvme",
    "controller": "/dev/nvme0",
    "apst_supported": True,
    "host_controller": None,
}


def test_apst_is_turned_off_with_its_table_kept_and_put_back_as_found(tmp_path, monkeypatch):
    nvme = FakeController()
    monkeypatch.setattr(tools, "run", nvme.run)
    monkeypatch.setattr(discovery, "serial_now", lambda drive: "S1")
    data_dir = data_folder(tmp_path)
    controls = quiet.Quiet(NVME, quiet.Record(data_dir, 5, NVME))
    assert controls.link_power() == {"state": "applied", "value": "APST off", "before": "on"}
    # off, its table sent again rather than nvme-cli's zeros, and the record holds both as found
    assert nvme.sent == [(0, bytes(range(256)))]
    [entry] = record_of(data_dir)["put_back"]
    assert entry == {"control": "power_management", "apst": "/dev/nvme0", "value": 1, "table": bytes(range(256)).hex()}
    assert record_of(data_dir)["drive"]["serial"] == "S1"
    assert controls.release() == {"power_management": {"state": "applied", "value": "on"}}
    assert (nvme.value, nvme.table) == (1, bytes(range(256)))
    assert not os.path.exists(data_dir / quiet.RECORD)
    # found off: nothing to change, nothing recorded
    controls = quiet.Quiet(NVME, quiet.Record(data_dir, 6, NVME))
    nvme.value = 0
    assert controls.link_power() == {"state": "applied", "value": "APST off", "before": "off"}
    assert len(nvme.sent) == 2 and not os.path.exists(data_dir / quiet.RECORD) and controls.release() == {}


def test_a_killed_runs_apst_is_put_back_to_the_same_drive_and_skipped_if_it_is_gone(tmp_path, monkeypatch):
    nvme = FakeController()
    monkeypatch.setattr(tools, "run", nvme.run)
    serial = {"now": "S1"}
    monkeypatch.setattr(discovery, "serial_now", lambda drive: serial["now"])
    data_dir = data_folder(tmp_path)
    quiet.Quiet(NVME, quiet.Record(data_dir, 5, NVME)).link_power()  # killed: no restore
    assert nvme.value == 0
    recovered = quiet.recover(data_dir)
    assert recovered["put_back"] == [
        {"control": "power_management", "apst": "/dev/nvme0", "value": 1, "state": "applied", "now": "on"}
    ]
    assert (nvme.value, nvme.table) == (1, bytes(range(256)))
    # Another drive on the path, or none: left alone, with why; the record goes, and the start goes on.
    for now, why in (("S2", "/dev/nvme0n1 is now another drive (serial S2)"), (None, "(serial S1) is gone")):
        serial["now"], nvme.value = "S1", 1
        quiet.Quiet(NVME, quiet.Record(data_dir, 6, NVME)).link_power()
        serial["now"] = now
        [entry] = quiet.recover(data_dir)["put_back"]
        assert entry["state"] == "unavailable" and why in entry["reason"] and nvme.value == 0
        assert not os.path.exists(data_dir / quiet.RECORD)


class FakeCache:
    """nvme-cli's get-feature and set-feature 6 (the volatile write cache), answering as the captures show."""

    def __init__(self, on):
        self.on = on

    def run(self, argv, timeout=60, ok=(0,), binary=False):
        assert argv[:3] in (["nvme", "get-feature", "/dev/nvme0"], ["nvme", "set-feature", "/dev/nvme0"])
        assert argv[3:5] == ["-f", "6"]
        if argv[1] == "set-feature":
            self.on = argv[5] == "--value=1"
            return ""
        return data("nvme-get-feature-vwc.txt" if self.on else "nvme-get-feature-vwc-off.txt")


def test_a_write_cache_found_off_is_put_back_off_after_the_run_and_after_a_killed_one(tmp_path, monkeypatch):
    drive = {**NVME, "volatile_write_cache": True}
    cache = FakeCache(on=False)
    monkeypatch.setattr(tools, "run", cache.run)
    monkeypatch.setattr(discovery, "serial_now", lambda drive: "S1")
    data_dir = data_folder(tmp_path)
    controls = quiet.Quiet(drive, quiet.Record(data_dir, 5, drive))
    assert controls.drive_cache() == {"state": "applied", "value": "on", "before": "off"}
    assert record_of(data_dir)["put_back"] == [{"control": "write_cache", "cache": "off"}]
    assert controls.release() == {"write_cache": {"state": "applied", "value": "off"}} and not cache.on
    quiet.Quiet(drive, quiet.Record(data_dir, 6, drive)).drive_cache()  # killed: no restore
    assert cache.on
    # the record's drive is enough to reach the cache again: the next start has no drive of its own to go by
    [entry] = quiet.recover(data_dir)["put_back"]
    assert (entry["state"], entry["now"]) == ("applied", "off") and not cache.on
