"""The status screen (`ssdbench status`): on a real SQLite file, a real loop device and this host's network."""

import os
import subprocess
import sys

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


def many_drives(count):
    return [
        {"name": f"sd{chr(97 + i)}", "transport": "sas", "model": "SAS SSD", "serial": f"S{i}"}
        | {"capacity_bytes": 10**12, "eligible": True, "reason": "empty SAS drive"}
        for i in range(count)
    ]


def test_status_fits_the_screen_with_the_address_and_pin_on_top(tmp_path):
    """Issue 43, item 5: a server with 24 drives on an 80x25 console, and on a taller screen."""
    data_dir = str(tmp_path / "data")
    drives = console.drive_lines(many_drives(24))
    for height in (25, 40):
        lines = console.render(data_dir, 80, drives, store.connect(data_dir), height)
        # the status, its footer and the line the cursor rests on
        assert len(lines) + len(console.FOOTER) + 1 <= height, (height, lines)
        pin = next(i for i, line in enumerate(lines) if line.startswith("PIN:    "))
        assert lines[:2] == [f"ssdbench {console.__version__}", ""], lines
        assert pin > 2 and all(line.startswith("Web UI: ") for line in lines[2:pin]), lines
        shown = sum(1 for line in lines if line.startswith("  sd"))
        assert shown and f"  ... and {24 - shown} more drives: see the web UI" in lines, lines
        assert lines[-1] == "Run:    none yet"
    # All the drives when they fit, and no count.
    lines = console.render(data_dir, 80, console.drive_lines(many_drives(3)), store.connect(data_dir), 25)
    assert sum(1 for line in lines if line.startswith("  sd")) == 3 and not any("more drive" in x for x in lines)
    assert console.fit(console.drive_lines(many_drives(2)), 3) == [
        *console.drive_lines(many_drives(2))[0],
        ("  ... and 1 more drive: see the web UI"),
    ]


@needs_root()
def test_a_pc_with_no_wired_port_says_so_at_once(tmp_path):
    """Issue 43, item 5: in a network namespace of its own with its own sysfs, as a PC whose only port is Wi-Fi or
    none: loopback alone."""
    script = (
        "import sys; from ssdbench.appliance import console; from ssdbench.results import store; "
        f"print(chr(10).join(console.render({str(tmp_path)!r}, 80, [], store.connect({str(tmp_path)!r}))))"
    )
    in_its_own = ["unshare", "-n", "-m", "sh", "-c", 'mount -t sysfs sysfs /sys && exec "$@"', "sh"]
    proc = subprocess.run(
        [*in_its_own, sys.executable, "-c", script],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Web UI: no wired network port found: plug in a USB network adapter" in proc.stdout, proc.stdout
