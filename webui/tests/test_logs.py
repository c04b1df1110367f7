"""Logs a tester can send (appliance/logs, issue 34, item 4): the log keeper on real files and the host's real
kernel log, redacted, rotated, going on where it stopped, with a last round as it is stopped; the diagnostics
zip."""

import io
import json
import os
import signal
import subprocess
import sys
import zipfile

import pytest
from conftest import PIN, login, make_app, wait_until

from ssdbench.appliance import access, logs
from ssdbench.run import quiet

TOKEN = "ssdb_0123456789abcdef"
BOOT_LOG = os.path.join(os.path.dirname(__file__), "..", "..", "overlay", "usr", "libexec", "ssdbench", "boot-log")


@pytest.fixture
def appliance(tmp_path, monkeypatch):
    """A data folder with its PIN, the boot's settings with the lab's token, and a folder of service logs."""
    data_dir, sources = tmp_path / "data", tmp_path / "var-log"
    sources.mkdir()
    pin = access.pin(str(data_dir))
    settings = tmp_path / "env"
    settings.write_text(f"SSDBENCH_UPLOAD=https://lab.example/\nSSDBENCH_TOKEN={TOKEN}\n")
    monkeypatch.setattr(logs.settings, "ENV_FILE", str(settings))
    monkeypatch.setattr(logs, "LOG_SOURCES", str(sources / "*.log"))
    monkeypatch.setattr(logs, "boot_fat", lambda: None)  # no stick to mirror to, unless a test gives one
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
        assert {"logs/ssdbench-runner.log", "var-log/ssdbench-runner.log", "lspci-mk.txt", "lsblk.txt"} <= set(names)
        assert {"dmesg.txt", "cmdline.txt", "uptime.txt", "drives.json", "testbed.json"} <= set(names)
        for name in names:
            text = zf.read(name).decode(errors="replace")
            assert TOKEN not in text and pin not in text, name
        assert "<redacted>" in zf.read("var-log/ssdbench-runner.log").decode()


def test_the_web_ui_sends_the_diagnostics_zip_redacted(appliance):
    """The drives page's button: the zip of `ssdbench diagnostics`, behind the login and the CSRF token."""
    data_dir, sources, pin = appliance
    with open(logs.settings.ENV_FILE, "a") as f:
        f.write(f"SSDBENCH_PIN={PIN}\n")  # the web UI's PIN, from the kernel command line as on the appliance
    (sources / "ssdbench-web.log").write_text(f"PIN {PIN}, stored PIN {pin}, token {TOKEN}\n")
    app = make_app(data_dir)
    assert app.test_client().post("/diagnostics").status_code != 200  # no session: no zip
    client = app.test_client()
    csrf = login(client)
    page = client.get("/").get_data(as_text=True)
    assert 'action="/diagnostics"' in page and "Download the diagnostics zip" in page
    assert client.post("/diagnostics").status_code == 403  # no CSRF token
    response = client.post("/diagnostics", data={"csrf_token": csrf})
    assert response.status_code == 200 and response.mimetype == "application/zip"
    assert "attachment; filename=ssdbench-diagnostics-" in response.headers["Content-Disposition"]
    with zipfile.ZipFile(io.BytesIO(response.data)) as zf:
        names = set(zf.namelist())
        assert {"var-log/ssdbench-web.log", "lspci-mk.txt", "lsblk.txt", "cmdline.txt", "testbed.json"} <= names
        for name in names:
            text = zf.read(name).decode(errors="replace")
            assert PIN not in text and pin not in text and TOKEN not in text, name
        assert zf.read("var-log/ssdbench-web.log").decode().count("<redacted>") == 3
        assert json.loads(zf.read("testbed.json"))["kernel"]["release"] == os.uname().release


def test_the_boot_s_messages_reach_the_console_and_the_kept_logs_and_a_daemon_holds_up_nothing(appliance, tmp_path):
    """boot-log, as inittab runs rcS with it: each line on the console and in boot.log, which the keeper keeps;
    a daemon that an init script leaves running with the output open does not hold the boot up."""
    data_dir, sources, _ = appliance
    console = tmp_path / "console"
    rcs = "echo 'Looking for the ssdbench stick: found'; sleep 3600 & echo \"daemon $!\"; echo 'rcS done' >&2"
    env = {**os.environ, "BOOT_LOG": str(sources / "boot.log"), "BOOT_LOG_FIFO": str(tmp_path / "run" / "fifo")}
    env["BOOT_LOG_KEEPER"] = ""  # the keeper is the tests above'
    with open(console, "w") as out:
        subprocess.run([BOOT_LOG, "sh", "-c", rcs], stdout=out, stderr=subprocess.STDOUT, env=env, timeout=60)
    daemon = None
    try:
        wait_until(lambda: "rcS done" in console.read_text(), "rcS's last line on the console", timeout=60)
        daemon = int(console.read_text().split("daemon ")[1].split()[0])
        wait_until(lambda: "rcS done" in (sources / "boot.log").read_text(), "rcS's last line in boot.log", timeout=60)
    finally:
        if daemon:
            os.kill(daemon, signal.SIGTERM)
    assert console.read_text() == (sources / "boot.log").read_text()
    logs.Keeper(str(data_dir), sources=logs.LOG_SOURCES, kmsg="/nonexistent").round()
    assert "Looking for the ssdbench stick: found" in kept(data_dir, "boot.log")


def fat_stick(point, monkeypatch):
    """A stick as usbexport lists one, already mounted on `point`, and still there when mounted() looks again under
    its lock (so mounted() leaves it as it is)."""
    monkeypatch.setattr(logs.usbexport, "mount_point", {"/dev/sdz1": str(point)}.get)
    return lambda: {"device": "/dev/sdz1", "mountpoint": str(point), "label": "SSDBENCH", "boot": True}


def test_the_keeper_mirrors_the_kept_logs_to_the_sticks_fat_and_its_zip_as_it_stops(appliance, tmp_path, monkeypatch):
    """Every MIRROR_S what changed, whole, redacted as kept; the last round, this PC's diagnostics zip beside them,
    in place of its earlier one, and not another PC's, even one whose name starts with this one's."""
    data_dir, sources, pin = appliance
    fat = tmp_path / "fat"
    mirror = fat / logs.MIRROR_DIR
    mirror.mkdir(parents=True)
    monkeypatch.setattr(logs.platform, "node", lambda: "ssdbench")
    others = {mirror / f"ssdbench-diagnostics-{host}-20260101T000000Z.zip" for host in ("ssdbench-1a2b3c4d", "lab")}
    mine = mirror / "ssdbench-diagnostics-ssdbench-20260101T000000Z.zip"
    for path in [*others, mine]:
        path.write_bytes(b"a zip")
    (sources / "ssdbench-runner.log").write_text(f"first, token {TOKEN}\n")
    stick = fat_stick(fat, monkeypatch)
    keeper = logs.Keeper(str(data_dir), sources=logs.LOG_SOURCES, kmsg="/nonexistent", stick=stick)
    keeper.round()
    assert (mirror / "ssdbench-runner.log").read_text() == kept(data_dir, "ssdbench-runner.log")
    assert "first, token <redacted>" in (mirror / "ssdbench-runner.log").read_text()
    with open(sources / "ssdbench-runner.log", "a") as f:
        f.write("second\n")
    keeper.round()  # within MIRROR_S of the last: kept, not mirrored yet
    assert "second" in kept(data_dir, "ssdbench-runner.log")
    assert "second" not in (mirror / "ssdbench-runner.log").read_text()
    keeper.mirrored_at -= logs.MIRROR_S
    (data_dir / quiet.RECORD).write_text("{}")  # a run holds the testbed: nothing is mirrored beside its steps
    keeper.round()
    assert "second" not in (mirror / "ssdbench-runner.log").read_text()
    (data_dir / quiet.RECORD).unlink()
    keeper.round()
    assert "second" in (mirror / "ssdbench-runner.log").read_text()
    with open(sources / "ssdbench-runner.log", "a") as f:
        f.write("third\n")
    keeper.round(last=True)
    assert (mirror / "ssdbench-runner.log").read_text() == kept(data_dir, "ssdbench-runner.log")
    zips = set(mirror.glob("*.zip"))
    assert others < zips and mine not in zips and len(zips) == 3, zips
    [own] = zips - others
    assert own.name.startswith("ssdbench-diagnostics-ssdbench-2")
    with zipfile.ZipFile(own) as zf:
        assert not [n for n in zf.namelist() if TOKEN in zf.read(n).decode(errors="replace")]


def test_the_keeper_started_before_ssdb_data_keeps_this_boots_logs_there_once_it_is_mounted(appliance, tmp_path):
    """boot-log starts the keeper before S30stick mounts SSDB-DATA on the data directory: what it kept in RAM
    until then is hidden by the mount, and this boot's logs are kept again there, from their start."""
    data_dir, sources, _ = appliance
    (sources / "boot.log").write_text("Looking for the ssdbench stick: \n")
    keeper = logs.Keeper(str(data_dir), sources=logs.LOG_SOURCES, kmsg="/nonexistent")
    keeper.round()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "ssdb-data", str(data_dir)], check=True)
    try:
        with open(sources / "boot.log", "a") as f:
            f.write("SSDB-DATA: mounted\n")
        keeper.round()
        assert kept(data_dir, "boot.log").splitlines()[1:] == ["Looking for the ssdbench stick: ", "SSDB-DATA: mounted"]
    finally:
        subprocess.run(["umount", str(data_dir)], check=True)
