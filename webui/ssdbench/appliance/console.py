"""The appliance's status screen (`ssdbench status`), on its screen and serial console: the version, the
web UI's address and PIN, where results are kept, the drives with their verdicts, and the current run.

Plain text for an 80-column console, redrawn only when something changed, so that a serial line carries
little. The address and the PIN come first, and the drive list is cut to the screen's height (25 lines on a
serial line, which tells none), with a count of the drives left out, so that nothing scrolls them off. The
drive list is read again only while no run is active: identifying drives queries them (smartctl, hdparm,
nvme-cli), and a run must not be disturbed.
"""

import fcntl
import os
import select
import shutil
import socket
import struct
import sys
import textwrap
import time

from .. import __version__
from ..drives import discovery
from ..errors import SsdbenchError
from ..human import clock, printable, size
from ..results import store
from ..system import mounts, settings, sysfs
from . import access

WIDTH = 80
# The lines of a screen that does not tell its size (a serial line), and those under the status (show).
HEIGHT = 25
FOOTER = ["", "Press Enter for a shell."]
SIOCGIFADDR = 0x8915
DRIVES_EVERY_S = 30
CLEAR = "\033[H\033[2J"
# Why S30stick did not use or did not grow the stick's SSDB-DATA, when it did not.
STICK_NOTE = "/run/ssdbench/stick-note"


def addresses():
    """(interface, IPv4 address) of every interface that has one, loopback aside."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            if name == "lo":
                continue
            try:
                reply = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:  # no IPv4 address (yet)
                continue
            found.append((name, socket.inet_ntoa(reply[20:24])))
    return found


def ports(names=None, net="/sys/class/net"):
    """Each wired port's link, {"eth0": "cable 1000 Mb/s", "eth1": "no cable"}: the physical interfaces (those
    with a device), or those `names`."""
    found = {}
    for name in names or sorted(os.listdir(net)):
        if names is None and (not os.path.exists(f"{net}/{name}/device") or os.path.exists(f"{net}/{name}/wireless")):
            continue
        if sysfs.read(f"{net}/{name}/carrier") != "1":  # 0, or unreadable while the port is down
            found[name] = "no cable"
            continue
        speed = sysfs.read(f"{net}/{name}/speed", "")
        found[name] = "cable" + (f" {speed} Mb/s" if speed.isdigit() else "")
    return found


def storage(data_dir):
    """Where the results are kept: the file system mounted on the data directory, if one is."""
    real = os.path.realpath(data_dir)
    for device, point, fstype in reversed(mounts.table()):
        if point == real:
            if fstype == "tmpfs":
                return f"{data_dir} in RAM: results are LOST at power-off"
            return f"{data_dir} on {device} ({fstype})"
    return data_dir


def drive_lines(found):
    """The drives' lines, two a drive, as one list a drive, so that a screen cut short shows whole drives."""
    if not found:
        return [["  no NVMe, SATA, SAS or USB drive found"]]
    return [
        [
            f"  {d['name']:<8} {d['transport']:<5} {(d.get('model') or '-')[:26]:<26} "
            f"{(d.get('serial') or '-')[:20]:<20} {size(d['capacity_bytes']):>9}",
            f"           {'ELIGIBLE' if d['eligible'] else 'not eligible'}: {d['reason']}",
        ]
        for d in found
    ]


def fit(drives, room):
    """As many whole drives of `drives` (drive_lines) as fit in `room` lines, and a line that counts the rest."""
    shown = []
    for at, lines in enumerate(drives):
        # the last drive needs no line for the rest
        if len(shown) + len(lines) + (at < len(drives) - 1) > room:
            hidden = len(drives) - at
            return shown + [f"  ... and {hidden} more drive{'s' if hidden > 1 else ''}: see the web UI"]
        shown += lines
    return shown


def run_lines(db):
    """The queued or running run with its progress, else the last run's outcome."""
    runs = store.list_runs(db)
    if not runs:
        return ["Run:    none yet"]
    busy = [r for r in runs if r["state"] in store.ACTIVE]
    run = busy[0] if busy else runs[-1]
    head = f"{'Run' if busy else 'Last run'} {run['id']}: {run['suite']} on {run['path']}: {run['state']}"
    progress = store.run_progress(db, run["id"])
    if run["state"] != "running" or not progress["step_count"]:
        return [head]
    index = min(progress["step_index"] or 0, progress["step_count"] - 1)
    step = progress["steps"][index]["key"] if index < len(progress["steps"]) else ""
    lines = [
        head,
        f"  step {index + 1}/{progress['step_count']} {step}  "
        f"{progress['percent'] or 0:5.1f}%  ETA {clock(progress['eta_s'])}",
    ]
    rate = []
    if progress["cur_iops"] is not None:
        rate.append(f"{progress['cur_iops']:,.0f} IOPS  {(progress['cur_bw'] or 0) / 1e6:,.1f} MB/s")
    if progress["temperature"]:
        rate.append(f"{progress['temperature']['value']:.0f} C")
    if rate:
        lines.append("  " + "  ".join(rate))
    return lines


def render(data_dir, port, drives, db, height=HEIGHT):
    """The status in at most `height` lines with the FOOTER: the address and the PIN first, the drives
    (drive_lines) cut to the room left."""
    suffix = "" if port == 80 else f":{port}"
    addrs = addresses()
    lines = [f"ssdbench {__version__}", ""]
    links = ports()
    for name, ip in addrs:
        about = [name, links.pop(name, None)]
        if ip.startswith("169.254."):  # no DHCP answer: udhcpc.script's, for a computer on a direct cable
            about.append("link-local: a direct cable")
        lines.append(f"Web UI: http://{ip}{suffix}/   ({', '.join(a for a in about if a)})")
    if not addrs:
        lines.append(
            "Web UI: no network address yet (DHCP on every wired port)"
            if links
            else "Web UI: no wired network port found: plug in a USB network adapter"
        )
    lines.append(f"PIN:    {access.pin(data_dir)}")
    lines += [f"Port:   {name}: {link}, no address yet" for name, link in links.items()]
    busy = store.busy_run(db) is not None
    lines += [
        f"Data:   {storage(data_dir)}",
        *textwrap.wrap(sysfs.read(STICK_NOTE, ""), WIDTH, initial_indent="Stick:  ", subsequent_indent="        "),
        *(
            line
            for problem in settings.problems()
            for line in textwrap.wrap(problem, WIDTH, initial_indent="Settings: ", subsequent_indent="          ")
        ),
        "",
        "Drives (as found before the run):" if busy else "Drives:",
    ]
    run = [""] + run_lines(db)
    # the screen's last line stays empty: the cursor sits there, and a line written on it would scroll the top off
    room = height - len(lines) - len(run) - len(FOOTER) - 1
    lines += fit(drives, room) + run
    return [printable(line)[:WIDTH] for line in lines]


class Screen:
    """The status, with the drive list read again at most every DRIVES_EVERY_S, and only while idle."""

    def __init__(self, data_dir, port):
        self.data_dir = data_dir
        self.port = port
        self.db = store.connect(data_dir)
        self.drives_text = None
        self.drives_at = 0.0

    def drives(self):
        stale = time.monotonic() - self.drives_at >= DRIVES_EVERY_S
        if self.drives_text is None or (stale and store.busy_run(self.db) is None):
            try:
                self.drives_text = drive_lines(discovery.discover())
            except SsdbenchError as exc:
                self.drives_text = [[f"  cannot list the drives: {exc}"]]
            self.drives_at = time.monotonic()
        return self.drives_text

    def text(self, height=HEIGHT):
        return "\n".join(render(self.data_dir, self.port, self.drives(), self.db, height))


def show(data_dir, port=80, watch=None):
    """Print the status once; with `watch`, redraw it every `watch` seconds when it changed, until Enter."""
    screen = Screen(data_dir, port)
    if watch is None:
        print(screen.text())
        return
    shown = None
    keys = [sys.stdin]
    while True:
        # a serial line tells no size (0 lines): HEIGHT then; a screen tells its own, which a new mode changes
        text = screen.text(shutil.get_terminal_size((WIDTH, HEIGHT)).lines)
        if text != shown:
            sys.stdout.write(CLEAR + text + "\n" + "\n".join(FOOTER) + "\n")
            sys.stdout.flush()
            shown = text
        if select.select(keys, [], [], watch)[0]:
            if sys.stdin.readline():
                return
            keys = []  # no terminal to read Enter from: redraw until stopped
