"""The status screen (`ssdbench status`): on a real SQLite file, a real loop device and this host's network."""

import os
import subprocess

from conftest import add_run, needs_root, ssdbench, wait_until

from ssdbench.appliance import access, console
from ssdbench.drives import discovery
from ssdbench.results import store


@needs_root()
def test_status_shows_address_pin_drives_and_the_running_run(loopdev, tmp_path):
    dev, _ = loopdev()
    data_dir = str(tmp_path / "data")
    run_id = add_run(data_dir, state="running")
    lines = console.render(
        data_dir, 8080, console.drive_lines(discovery.discover(named=[dev])), store.connect(data_dir)
    )
    text = "\n".join(lines)
    assert all(len(line) <= console.WIDTH for line in lines)
    assert f"PIN:    {access.pin(data_dir)}" in text
    for _, ip in console.addresses():
        assert f"Web UI: http://{ip}:8080/" in text
    assert "Drives (as found before the run):" in text
    assert os.path.basename(dev) in text and "ELIGIBLE: loop device" in text
    assert f"Run {run_id}: standard on /dev/nvme0n1: running" in text
    assert "step 4/4 sweep-clean   42.5%  ETA 0:20:34" in text
    assert "5,000 IOPS  20.5 MB/s  41 C" in text


@needs_root()
def test_each_port_shows_its_link():
    """Issue 34, item 2, on a real veth pair: its near end shows no cable until its far end is up, then a cable
    and its speed."""
    near, far = f"ssdb{os.getpid() % 100000}a", f"ssdb{os.getpid() % 100000}b"
    subprocess.run(["ip", "link", "add", near, "type", "veth", "peer", "name", far], check=True)
    try:
        subprocess.run(["ip", "link", "set", near, "up"], check=True)
        assert console.ports([near]) == {near: "no cable"}
        subprocess.run(["ip", "link", "set", far, "up"], check=True)
        wait_until(lambda: console.ports([near]) == {near: "cable 10000 Mb/s"}, "the veth's carrier", timeout=60)
    finally:
        subprocess.run(["ip", "link", "del", near], check=True)


def test_status_says_why_the_stick_was_not_used_or_grown(tmp_path, monkeypatch):
    """S30stick's note (issue 34, item 3), whole, folded to the screen's width."""
    note = tmp_path / "stick-note"
    said = "sda not grown: what was written at 65535 MiB of the 65536 MiB it claims did not read back: fake capacity"
    note.write_text(said + "\n")
    monkeypatch.setattr(console, "STICK_NOTE", str(note))
    data_dir = str(tmp_path / "data")
    lines = console.render(data_dir, 80, [], store.connect(data_dir))
    at = next(i for i, line in enumerate(lines) if line.startswith("Stick:  "))
    assert lines[at - 1].startswith("Data:   ") and all(len(line) <= console.WIDTH for line in lines)
    assert " ".join(line[8:] for line in lines[at : at + 2]) == said and lines[at + 1].startswith("        ")


def test_status_names_results_kept_in_ram():
    assert "results are LOST at power-off" in console.storage("/dev/shm")


def test_status_watch_needs_a_positive_interval(tmp_path):
    proc = ssdbench("status", "--watch", "0", data_dir=tmp_path)
    assert proc.returncode == 2 and "--watch takes a number of seconds above 0" in proc.stderr


def test_status_shows_no_terminal_escape_from_a_drive_string(tmp_path):
    # A firmware answers what it likes: ESC sequences would clear the screen or retitle the terminal.
    data_dir = str(tmp_path / "data")
    drive = {
        "name": "sdz",
        "transport": "sata",
        "model": "EVIL\x1b[2J\x1b]0;owned\x07 SSD",
        "serial": "S\x9b31m\u202eX\r\n",
        "capacity_bytes": 10**12,
        "eligible": False,
        "reason": "has mounted file systems (/dev/sdz1 on /mnt/\x1bc)",
    }
    lines = console.render(data_dir, 80, console.drive_lines([drive]), store.connect(data_dir))
    text = "\n".join(lines)
    assert not [ch for ch in text if ch != "\n" and (ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F or ch == "\u202e")]
    assert "EVIL?[2J?]0;owned? SSD" in text
