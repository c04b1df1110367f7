"""Logs a tester can send: the kernel's messages and the services' logs kept on SSDB-DATA as they go, and a
diagnostics zip of them with what the PC is.

The appliance runs from RAM: /var/log is in RAM and the kernel's ring buffer goes at power-off, so after a hang
there would be nothing to attach to a report. The log keeper (`ssdbench logs`, a service that init keeps running)
copies what is new in the kernel's log (/dev/kmsg) and in each service's log (LOG_SOURCES) into data_dir/logs/
every KEEP_S seconds, and once more as it stops (S50ssdbench stops it last, at shutdown): one file a source, a
line at the head of each boot, rotated at ROTATE_BYTES with ROTATIONS older files kept. Every line is redacted
first: the PIN's and the lab token's values, and each secret setting of a command line (the kernel's echo of
its own), as bundles are.
"""

import glob
import json
import os
import platform
import signal
import subprocess
import threading
import time
import zipfile

from ..drives import discovery
from ..errors import SsdbenchError
from ..run import environment
from ..system import clock, redact, sysfs
from . import access

LOG_DIR = "logs"
LOG_SOURCES = "/var/log/*.log"
KMSG = "/dev/kmsg"
KERNEL_LOG = "kernel.log"
STATE = ".keeper.json"
KEEP_S = 5
ROTATE_BYTES = 1 << 20
ROTATIONS = 3
# What `diagnostics` runs, each answer a file of the zip: what the PC is and what the kernel made of it. The
# image's lspci is BusyBox's: -m (each device's IDs, one line each) and -k (its driver) are all it takes.
COMMANDS = {
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
            with open(clock.SETTINGS_FILE) as f:
                found = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
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
    again goes on where the last one stopped."""

    def __init__(self, data_dir, sources=None, kmsg=KMSG):
        self.folder = os.path.join(data_dir, LOG_DIR)
        os.makedirs(self.folder, exist_ok=True)
        self.sources, self.kmsg, self.redact = sources or LOG_SOURCES, kmsg, Redactor(data_dir)
        self.boot = sysfs.read("/proc/sys/kernel/random/boot_id", "unknown")
        try:
            with open(os.path.join(self.folder, STATE)) as f:
                state = json.load(f)
        except (OSError, ValueError):
            state = {}
        self.state = state if state.get("boot") == self.boot else {"boot": self.boot, "seq": -1, "offsets": {}}

    def round(self):
        self._kernel()
        for path in sorted(glob.glob(self.sources)):
            self._file(path)
        with open(os.path.join(self.folder, STATE), "w") as f:
            json.dump(self.state, f)

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


def keep(data_dir):
    """The log keeper service: a round every KEEP_S seconds, and a last one on SIGTERM."""
    keeper = Keeper(data_dir)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while True:
        keeper.round()
        if stop.wait(KEEP_S):
            keeper.round()
            return


def zip_prefix():
    """How this PC's diagnostics zips are named, before their time."""
    return f"ssdbench-diagnostics-{platform.node()}-"


def beside_bundles(data_dir, folder):
    """This PC's diagnostics zip in an export's folder on a stick (results/usbexport's `beside`), in place of the ones
    earlier exports from this PC left there."""
    earlier = set(glob.glob(os.path.join(folder, glob.escape(zip_prefix()) + "*.zip")))
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
        zf.writestr("drives.json", redactor(json.dumps(discovery.discover(), indent=1, default=str)))
        zf.writestr("testbed.json", redactor(json.dumps(environment.host(), indent=1)))
    os.replace(path + ".part", path)
    return path
