"""Logs a tester can send (appliance/logs, issue 34, item 4): the log keeper on real files and the host's real
kernel log, redacted, rotated, going on where it stopped, with a last round as it is stopped; the diagnostics
zip."""

import os
import signal
import subprocess
import sys
import zipfile

import pytest
from conftest import wait_until

from ssdbench.appliance import access, logs

TOKEN = "ssdb_0123456789abcdef"


@pytest.fixture
def appliance(tmp_path, monkeypatch):
    """A data folder with its PIN, the boot's settings with the lab's token, and a folder of service logs."""
    data_dir, sources = tmp_path / "data", tmp_path / "var-log"
    sources.mkdir()
    pin = access.pin(str(data_dir))
    settings = tmp_path / "env"
    settings.write_text(f"SSDBENCH_UPLOAD=https://lab.example/\nSSDBENCH_TOKEN={TOKEN}\n")
    monkeypatch.setattr(logs.clock, "SETTINGS_FILE", str(settings))
    monkeypatch.setattr(logs, "LOG_SOURCES", str(sources / "*.log"))
    return data_dir, sources, pin


def kept(data_dir, name):
    return (data_dir / logs.LOG_DIR / name).read_text()


def test_the_keeper_keeps_what_is_new_redacted_and_goes_on_where_it_stopped(appliance):
    data_dir, sources, pin = appliance
    runner = sources / "ssdbench-runner.log"
    runner.write_text(f"run 1: queued\nthe PIN {pin} and Bearer {TOKEN}\n")
    keeper = logs.Keeper(str(data_dir), sources=logs.LOG_SOURCES, kmsg="/nonexistent")
    keeper.round()
    text = kept(data_dir, "ssdbench-runner.log")
    assert text.startswith("--- boot ") and "run 1: queued" in text
    assert pin not in text and TOKEN not in text and text.count("<redacted>") == 2
    with open(runner, "a") as f:
        f.write("run 1: done\n")
    keeper.round()
    # Started again, as init does after a crash: it goes on from its place, nothing twice.
    logs.Keeper(str(data_dir), sources=logs.LOG_SOURCES, kmsg="/nonexistent").round()
    text = kept(data_dir, "ssdbench-runner.log")
    assert text.count("run 1: queued") == 1 and text.count("run 1: done") == 1 and text.count("--- boot ") == 1


def test_the_kernel_log_is_kept_and_its_echo_of_the_command_line_redacted(appliance):
    data_dir, _, _ = appliance
    if not os.access(logs.KMSG, os.R_OK):
        pytest.skip("no readable /dev/kmsg")
    keeper = logs.Keeper(str(data_dir))
    keeper.round()
    first = kept(data_dir, logs.KERNEL_LOG)
    assert first.startswith("--- boot ") and len(first.splitlines()) > 1
    keeper.round()  # nothing new twice
    assert kept(data_dir, logs.KERNEL_LOG).count("\n") - first.count("\n") < len(first.splitlines()) - 1
    assert "ssdbench.pin=<redacted>" in logs.Redactor(str(data_dir))("Command line: ro ssdbench.pin=424242")


def test_each_log_is_rotated_and_bounded(appliance, monkeypatch):
    data_dir, sources, _ = appliance
    monkeypatch.setattr(logs, "ROTATE_BYTES", 1000)
    web = sources / "ssdbench-web.log"
    keeper = logs.Keeper(str(data_dir), sources=logs.LOG_SOURCES, kmsg="/nonexistent")
    for n in range(40):
        with open(web, "a") as f:
            f.write(f"request {n:03d} " + "x" * 180 + "\n")
        keeper.round()
    names = sorted(os.listdir(data_dir / logs.LOG_DIR))
    assert names == [
        ".keeper.json",
        "ssdbench-web.log",
        "ssdbench-web.log.1",
        "ssdbench-web.log.2",
        "ssdbench-web.log.3",
    ]
    assert all(os.path.getsize(data_dir / logs.LOG_DIR / n) <= 1000 for n in names if n.startswith("ssdbench"))
    assert "request 039" in kept(data_dir, "ssdbench-web.log")


def test_the_keeper_keeps_a_last_round_as_it_is_stopped(appliance, tmp_path):
    """SIGTERM (S50ssdbench, at shutdown): what came after its last round is kept too."""
    data_dir, sources, _ = appliance
    runner = sources / "ssdbench-runner.log"
    runner.write_text("before\n")
    code = (
        "import sys; from ssdbench.appliance import logs; logs.LOG_SOURCES = sys.argv[2]; logs.KEEP_S = 3600;"
        " logs.keep(sys.argv[1])"
    )
    keeper = subprocess.Popen([sys.executable, "-c", code, str(data_dir), logs.LOG_SOURCES])
    try:
        wait_until(lambda: "before" in kept_or_empty(data_dir), "the keeper's first round", timeout=120)
        with open(runner, "a") as f:
            f.write("the last words\n")
        keeper.send_signal(signal.SIGTERM)
        assert keeper.wait(timeout=60) == 0
    finally:
        if keeper.poll() is None:
            keeper.kill()
    assert "the last words" in kept(data_dir, "ssdbench-runner.log")


def kept_or_empty(data_dir):
    path = data_dir / logs.LOG_DIR / "ssdbench-runner.log"
    return path.read_text() if path.exists() else ""


def test_the_diagnostics_zip_holds_the_logs_and_the_pc_redacted(appliance, tmp_path):
    data_dir, sources, pin = appliance
    (sources / "ssdbench-runner.log").write_text(f"token {TOKEN}, PIN {pin}\n")
    logs.Keeper(str(data_dir), sources=logs.LOG_SOURCES, kmsg="/nonexistent").round()
    path = logs.diagnostics(str(data_dir), str(tmp_path))
    assert os.path.basename(path).startswith("ssdbench-diagnostics-") and not os.path.exists(path + ".part")
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        assert {"logs/ssdbench-runner.log", "var-log/ssdbench-runner.log", "lspci-nnk.txt", "lsblk.txt"} <= set(names)
        assert {"dmesg.txt", "cmdline.txt", "drives.json", "clock.json"} <= set(names)
        for name in names:
            text = zf.read(name).decode(errors="replace")
            assert TOKEN not in text and pin not in text, name
        assert "<redacted>" in zf.read("var-log/ssdbench-runner.log").decode()
