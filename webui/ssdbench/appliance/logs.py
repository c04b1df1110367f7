"""Logs a tester can send: the kernel's messages and the services' logs kept on SSDB-DATA as they go, and a
diagnostics zip of them with what the PC is.

The appliance runs from RAM: /var/log is in RAM and the kernel's ring buffer goes at power-off, so after a hang
there would be nothing to attach to a report. The log keeper (`ssdbench logs`, a service that init keeps running)
copies what is new in the kernel's log (/dev/kmsg) and in each service's log (LOG_SOURCES) into data_dir/logs/
every KEEP_S seconds, and once more as it stops (S50ssdbench stops it last, at shutdown): one file a source, a
line at the head of each boot, rotated at ROTATE_BYTES with ROTATIONS older files kept. Every line is redacted
first: the PIN's and the lab token's values, and each secret setting of a command line (the kernel's echo of
its own), as bundles are.

boot-log starts the keeper before the first init script, so that a boot that hangs in udev, S20dhcp or S30stick
keeps what it printed: until S30stick mounts SSDB-DATA on the data directory its logs are in RAM, and once it has,
the keeper keeps this boot's logs there again from their start. So that any PC can read them, every MIRROR_S
seconds (when something is new) and as it stops, the keeper copies the kept logs to the stick's FAT partition
(SSDBENCH, MIRROR_DIR), the one GRUB booted from even before S30stick has found it, but not while a run holds the
testbed; as it stops, this PC's diagnostics zip goes there too.
"""

import glob
import json
import os
import platform
import re
import signal
import subprocess
import threading
import time
import zipfile

from ..drives import discovery
from ..errors import SsdbenchError
from ..results import usbexport
from ..run import environment, quiet
from ..system import clock, durable, redact, settings, sysfs
from . import access

LOG_DIR = "logs"
LOG_SOURCES = "/var/log/*.log"
KMSG = "/dev/kmsg"
KERNEL_LOG = "kernel.log"
STATE = ".keeper.json"
KEEP_S = 5
ROTATE_BYTES = 1 << 20
ROTATIONS = 3
MIRROR_DIR = "ssdbench-logs"
MIRROR_S = 30
# What `diagnostics` runs, each answer a file of the zip: what the PC is and what the kernel made of it.
COMMANDS = {
    # -m (machine-readable: vendor and device IDs) and -k (the driver) are all BusyBox's lspci takes.
    "lspci-mk.txt": ["lspci", "-mk"],
    "lsblk.txt": ["lsblk", "-o", "NAME,SIZE,TYPE,TRAN,MODEL,SERIAL,FSTYPE,LABEL,MOUNTPOINT"],
    "dmesg.txt": ["dmesg"],
}


class Redactor:
    """Each line with the appliance's secrets out: the PIN's and the lab token's values, and every secret
    setting of a command line."""

    def __init__(self, data_dir):
        self.values = set()
        try:
            found = settings.services()
            self.values |= {found.get("SSDBENCH_PIN"), found.get("SSDBENCH_TOKEN")}
        except OSError:
            pass
        self.values.add(sysfs.read(os.path.join(data_dir, access.PIN_FILE)))
        self.values.discard(None)
        self.values.discard("")

    def __call__(self, text):
        for value in self.values:
            text = text.replace(value, redact.REDACTED)
        return redact.command_line(text)


def _append(folder, name, text):
    """`text` at the end of folder/name, rotated first when it would pass ROTATE_BYTES."""
    path = os.path.join(folder, name)
    if os.path.exists(path) and os.path.getsize(path) + len(text.encode()) > ROTATE_BYTES:
        for n in range(ROTATIONS - 1, 0, -1):
            if os.path.exists(f"{path}.{n}"):
                os.replace(f"{path}.{n}", f"{path}.{n + 1}")
        os.replace(path, f"{path}.1")
    with open(path, "a") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


class Keeper:
    """What is new since the last round, from each source, into data_dir/logs. Its place in each source (the
    kernel log's sequence number, each file's offset) is kept in STATE for this boot, so that a keeper started
    again goes on where the last one stopped. `stick`: where the logs are mirrored, a function that gives a stick
    as usbexport lists them, or None while there is none (boot_fat)."""

    def __init__(self, data_dir, sources=None, kmsg=KMSG, stick=None):
        self.data_dir, self.sources, self.kmsg = data_dir, sources or LOG_SOURCES, kmsg
        self.stick = stick or boot_fat
        self.boot = sysfs.read("/proc/sys/kernel/random/boot_id", "unknown")
        self.mirrored, self.mirrored_at = {}, None
        self._open()

    def _open(self):
        """The logs folder on what is mounted on the data directory now, and this boot's place in it."""
        self.folder = os.path.join(self.data_dir, LOG_DIR)
        os.makedirs(self.folder, exist_ok=True)
        self.device = os.stat(self.data_dir).st_dev
        try:
            with open(os.path.join(self.folder, STATE)) as f:
                state = json.load(f)
        except (OSError, ValueError):
            state = {}
        self.state = state if state.get("boot") == self.boot else {"boot": self.boot, "seq": -1, "offsets": {}}

    def round(self, last=False):
        # S30stick mounted SSDB-DATA (or RAM) on the data directory since the last round: this boot's logs go there
        if os.stat(self.data_dir).st_dev != self.device:
            self._open()
        # read again each round: S50ssdbench writes the settings after the keeper has started
        self.redact = Redactor(self.data_dir)
        self._kernel()
        for path in sorted(glob.glob(self.sources)):
            self._file(path)
        with open(os.path.join(self.folder, STATE), "w") as f:
            json.dump(self.state, f)
        if last or self.mirrored_at is None or time.monotonic() - self.mirrored_at >= MIRROR_S:
            self.mirror(last)

    def mirror(self, last=False):
        """The kept logs that changed since the last mirror, copied whole to the stick's MIRROR_DIR; the last time,
        this PC's diagnostics zip too. A stick not found yet, or in use by an export, waits for the next time."""
        names = [n for n in os.listdir(self.folder) if n.endswith(".log")]
        sizes = {n: os.path.getsize(os.path.join(self.folder, n)) for n in names}
        changed = {n: size for n, size in sizes.items() if self.mirrored.get(n) != size}
        # a run holds the testbed (its crash record is there): no mounts nor writes to the stick beside its steps
        if not (changed or last) or (not last and os.path.exists(os.path.join(self.data_dir, quiet.RECORD))):
            return
        self.mirrored_at = time.monotonic()  # found or not, written or not: the next try in MIRROR_S
        stick = self.stick()
        if stick is None:
            return
        try:
            with usbexport.mounted(stick, wait=False) as point:
                folder = os.path.join(point, MIRROR_DIR)
                os.makedirs(folder, exist_ok=True)
                for name, size in sorted(changed.items()):
                    with open(os.path.join(self.folder, name)) as f:
                        durable.replace_file(os.path.join(folder, name), f.read())
                    self.mirrored[name] = size
                if last:
                    beside_bundles(self.data_dir, folder)
        except (SsdbenchError, OSError) as exc:
            print(f"logs: not mirrored to {stick['device']}: {exc}", flush=True)

    def _head(self, name):
        """A line at the head of each boot's part of a log."""
        heads = self.state.setdefault("heads", [])
        if name in heads:
            return ""
        heads.append(name)
        return f"--- boot {self.boot}, kept from {clock.iso(time.time())} ---\n"

    def _kernel(self):
        try:
            fd = os.open(self.kmsg, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return
        lines = []
        try:
            while True:
                try:
                    record = os.read(fd, 8192).decode(errors="replace")
                except BlockingIOError:
                    break
                except BrokenPipeError:  # overwritten before it was read: the next one
                    continue
                head, _, message = record.partition(";")
                fields = head.split(",")
                seq = int(fields[1])
                if seq <= self.state["seq"]:
                    continue
                self.state["seq"] = seq
                lines.append(f"[{int(fields[2]) / 1e6:12.6f}] {message.splitlines()[0] if message else ''}\n")
        finally:
            os.close(fd)
        if lines:
            _append(self.folder, KERNEL_LOG, self._head(KERNEL_LOG) + self.redact("".join(lines)))

    def _file(self, path):
        name = os.path.basename(path)
        offset = self.state["offsets"].get(name, 0)
        if os.path.getsize(path) < offset:  # made anew
            offset = 0
        with open(path, errors="replace") as f:
            f.seek(offset)
            text = f.read()
            self.state["offsets"][name] = f.tell()
        if text:
            _append(self.folder, name, self._head(name) + self.redact(text))


def boot_fat():
    """The appliance's own stick's FAT partition (SSDBENCH), as usbexport lists sticks, or None while it is not
    known: found by the disk S30stick took for the stick, or before that by the UUID GRUB passed."""
    try:
        found = [s for s in usbexport.sticks() if s["boot"] and s["label"] == "SSDBENCH"]
    except SsdbenchError:
        return None
    return found[0] if len(found) == 1 else None


def keep(data_dir):
    """The log keeper service: a round every KEEP_S seconds, and a last one on SIGTERM."""
    keeper = Keeper(data_dir)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while True:
        keeper.round()
        if stop.wait(KEEP_S):
            keeper.round(last=True)
            return


def zip_prefix():
    """How this PC's diagnostics zips are named, before their time: by its host name, which S30stick makes the
    stick's own (from its FAT volume ID), so that appliances that share an export stick keep a zip each."""
    return f"ssdbench-diagnostics-{platform.node()}-"


def own_zips(folder):
    """The diagnostics zips in `folder` that this PC wrote: its prefix and a time, and nothing more, so that the
    zips of a host whose name starts with this one's (ssdbench, ssdbench-1a2b3c4d) are not taken for its own."""
    mine = re.compile(re.escape(zip_prefix()) + r"[0-9]{8}T[0-9]{6}Z\.zip")
    return {os.path.join(folder, name) for name in os.listdir(folder) if mine.fullmatch(name)}


def beside_bundles(data_dir, folder):
    """This PC's diagnostics zip in an export's folder on a stick (results/usbexport's `beside`), in place of the ones
    earlier exports from this PC left there."""
    earlier = own_zips(folder)
    try:
        path = diagnostics(data_dir, folder)
    except OSError as exc:
        raise SsdbenchError(
            f"the bundles are on the stick, verified, but the diagnostics zip could not be written there: {exc}"
        ) from exc
    for old in earlier - {path}:
        os.unlink(old)


def diagnostics(data_dir, folder):
    """A zip for a report, in `folder`: the kept logs, this boot's service logs, the kernel's log, lspci, lsblk,
    the kernel command line, the drives as ssdbench sees them and the testbed (kernel, CPU, tools, what set the
    clock), each redacted. Returns its path."""
    redactor = Redactor(data_dir)
    name = f"{zip_prefix()}{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.zip"
    path = os.path.join(folder, name)
    with zipfile.ZipFile(path + ".part", "w", zipfile.ZIP_DEFLATED) as zf:
        for kept in sorted(glob.glob(os.path.join(data_dir, LOG_DIR, "*.log*"))):
            zf.writestr(f"logs/{os.path.basename(kept)}", redactor(sysfs.read(kept, "")))
        for log in sorted(glob.glob(LOG_SOURCES)):
            zf.writestr(f"var-log/{os.path.basename(log)}", redactor(sysfs.read(log, "")))
        for member, argv in COMMANDS.items():
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
                text = proc.stdout + proc.stderr
            except (OSError, subprocess.TimeoutExpired) as exc:
                text = f"unavailable: {' '.join(argv)}: {exc}"
            zf.writestr(member, redactor(text))
        zf.writestr("cmdline.txt", redactor(sysfs.read("/proc/cmdline", "")))
        # how long the PC had been up, in seconds: what dmesg.txt's times count from
        zf.writestr("uptime.txt", sysfs.read("/proc/uptime", ""))
        zf.writestr("drives.json", redactor(json.dumps(discovery.discover(), indent=1, default=str)))
        zf.writestr("testbed.json", redactor(json.dumps(environment.host(), indent=1)))
    os.replace(path + ".part", path)
    return path
