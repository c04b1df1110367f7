"""The quiet-OS controls of the locked configuration, applied before a run and recorded.

Each control ends up in the environment as applied (with the value set) or as
unavailable (with the reason): nothing is skipped silently. Controls that must be
held for the run's length (cpu_dma_latency) stay held until release().
"""

import glob
import os
import struct
import time

from ..drives import health
from ..errors import SsdbenchError
from ..system import sysfs, tools

COOL_DOWN_MAX_WAIT_S = 300
COOL_DOWN_MARGIN_C = 3.0


def _applied(value):
    return {"state": "applied", "value": value}


def _unavailable(reason):
    return {"state": "unavailable", "reason": reason}


def _set_sysfs(path, value, what):
    if not os.path.exists(path):
        return _unavailable(f"{what}: {path} does not exist on this kernel/device")
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError as exc:
        return _unavailable(f"{what}: writing {value!r} to {path} failed: {exc.strerror}")
    return _applied(sysfs.read(path))


def governor():
    paths = sorted(glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"))
    if not paths:
        return _unavailable("no cpufreq driver: the frequency is set by firmware or the hypervisor")
    failed = [r for r in (_set_sysfs(p, "performance", "governor") for p in paths) if r["state"] != "applied"]
    return failed[0] if failed else _applied("performance on all CPUs")


def swap():
    """No swap during a run: the appliance's image has none. Swap found active is recorded, not turned off: on a
    host that relies on it, turning it off could starve the host's other work."""
    active = [line.split()[0] for line in sysfs.read("/proc/swaps", "").splitlines()[1:] if line.strip()]
    if active:
        return _unavailable(f"swap is active on {', '.join(active)}: a page swapped in during a step adds to it")
    return _applied("none active (/proc/swaps)")


def background():
    """No background jobs: the appliance's image starts no cron, syslog or other timed work (its init scripts are
    a fixed list). What else the host was running shows in its load averages as the run began."""
    loads = sysfs.read("/proc/loadavg", "").split()[:3]
    if len(loads) < 3:
        return _unavailable("/proc/loadavg could not be read")
    return _applied(f"load averages {' '.join(loads)} (1, 5 and 15 min) as the run began")


class Quiet:
    """Holds the controls for the length of a run."""

    def __init__(self, drive):
        self.drive = drive
        self.dma_fd = None
        self.cpus = None

    def apply(self):
        name = os.path.basename(os.path.realpath(self.drive["path"]))
        queue = f"/sys/block/{name}/queue"
        return {
            "governor": governor(),
            "cpu_dma_latency": self.hold_dma_latency(),
            "scheduler": _set_sysfs(f"{queue}/scheduler", "none", "I/O scheduler"),
            "nomerges": _set_sysfs(f"{queue}/nomerges", "2", "merges"),
            "power_management": self.link_power(),
            "cpu_affinity": self.numa_cpus(name),
            "swap": swap(),
            "background": background(),
        }

    def hold_dma_latency(self):
        # The kernel honours the request only while the file stays open.
        try:
            self.dma_fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
            os.write(self.dma_fd, struct.pack("i", 0))
        except OSError as exc:
            return _unavailable(f"/dev/cpu_dma_latency: {exc.strerror}")
        return _applied("0 us, held for the run")

    def link_power(self):
        transport = self.drive["transport"]
        if transport == "nvme":
            ctrl = self.drive.get("controller")
            if not self.drive.get("apst_supported"):
                return _unavailable("NVMe APST: the controller does not support it (APSTA=0), so it is already off")
            try:
                tools.run(["nvme", "set-feature", ctrl, "-f", "0x0c", "-v", "0"], timeout=10)
            except SsdbenchError as exc:
                return _unavailable(f"NVMe APST: {exc}")
            return _applied("APST off")
        if transport == "sata":
            port = (self.drive.get("link") or {}).get("port")
            if not port:
                return _unavailable("SATA link power management: the ATA port was not found")
            hosts = glob.glob(f"/sys/class/ata_port/{port}/device/host*/scsi_host/host*/link_power_management_policy")
            if not hosts:
                return _unavailable(f"SATA link power management: no policy file for {port}")
            return _set_sysfs(hosts[0], "max_performance", "SATA link power management")
        return _unavailable(f"link power management: not applicable to a {transport} device")

    def numa_cpus(self, name):
        found = [
            sysfs.read(f"/sys/block/{name}/device/numa_node"),
            sysfs.read(f"/sys/block/{name}/device/device/numa_node"),
        ]
        node = next((int(n) for n in found if n and n.lstrip("-").isdigit()), -1)
        if node < 0:
            return _unavailable(
                "the drive reports no NUMA node (single-node system or virtual device): fio may use every CPU"
            )
        cpulist = sysfs.read(f"/sys/devices/system/node/node{node}/cpulist")
        if not cpulist:
            return _unavailable(f"NUMA node {node} lists no CPUs: fio may use every CPU")
        self.cpus = parse_cpulist(cpulist)
        return _applied(f"node {node}: CPUs {cpulist}")

    def release(self):
        if self.dma_fd is not None:
            os.close(self.dma_fd)
            self.dma_fd = None


def parse_cpulist(text):
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def cool_down(drive, idle_c, should_stop, minimum_s):
    """The idle before a step: the suite's fixed `minimum_s` on every drive, then, where the drive reports a
    temperature, until it is back within a margin of its idle temperature, for at most COOL_DOWN_MAX_WAIT_S more.
    The record says how many seconds it idled, the minimum, and whether the drive cooled (None: no temperature)."""
    max_wait_s = COOL_DOWN_MAX_WAIT_S
    started = time.monotonic()
    while (idled := time.monotonic() - started) < minimum_s and not should_stop():
        time.sleep(min(0.5, minimum_s - idled))
    record = {"idled_s": idled, "minimum_s": minimum_s, "cooled": None, "margin_c": COOL_DOWN_MARGIN_C}
    record["max_wait_s"] = max_wait_s
    source = drive.get("temperature_source")
    if not source or idle_c is None:
        return {**_applied(f"{idled:.0f} s; the drive's temperature cannot be read, so nothing to wait for"), **record}
    waited = time.monotonic()
    while time.monotonic() - waited < max_wait_s and not should_stop():
        temp = health.read_temperature(source)
        idled = time.monotonic() - started
        if temp is not None and temp <= idle_c + COOL_DOWN_MARGIN_C:
            done = f"{temp:.1f} C after {idled:.0f} s (idle {idle_c:.1f} C)"
            return {**_applied(done), **record, "idled_s": idled, "cooled": True}
        time.sleep(1)
    idled = time.monotonic() - started
    gave_up = f"gave up after {idled:.0f} s above idle {idle_c:.1f} C + {COOL_DOWN_MARGIN_C} C"
    return {**_applied(gave_up), **record, "idled_s": idled, "cooled": False}
