"""The quiet-OS controls of the locked configuration, applied before a run and recorded.

Each control ends up in the environment as applied (with the value set) or as
unavailable (with the reason): nothing is skipped silently. Controls that must be
held for the run's length (cpu_dma_latency) stay held until release(). What the
run changes of the testbed (the ASPM policy, the drive's write cache, its
interrupts' CPUs) records the state it found, and restore() puts that back.
"""

import glob
import os
import re
import struct
import time

from ..drives import discovery, tool_output
from ..errors import SsdbenchError
from ..system import sysfs, tools

ASPM_POLICY = "/sys/module/pcie_aspm/parameters/policy"
# Under discovery.SYS: a NUMA node's CPUs; the CPUs' folder; a hybrid Intel CPU's P-cores and E-cores (the
# kernel's hybrid PMUs, since 5.13; neither exists on a CPU whose cores are all alike)
NODE_CPULIST = "{}/devices/system/node/node{}/cpulist"
CPUS = "devices/system/cpu"
P_CORES, E_CORES = "devices/cpu_core/cpus", "devices/cpu_atom/cpus"


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


def _selected(text):
    """The value a sysfs choice file holds: the word in brackets of "[default] performance", else the text."""
    found = re.search(r"\[([^\]]+)\]", text or "")
    return found.group(1) if found else text


def _set_choice(path, value, what):
    """_set_sysfs for a file that shows its choices ("[none] mq-deadline"): the record holds the one chosen."""
    result = _set_sysfs(path, value, what)
    return {**result, "value": _selected(result["value"])} if result["state"] == "applied" else result


def _cache_commands(drive):
    """How to read and set the drive's own volatile write cache: (argv that reads it, its parser, a function
    from on or off to the argv that sets it), or why there is no way."""
    transport, path = drive["transport"], drive["path"]
    if transport == "nvme":
        if not drive.get("volatile_write_cache"):
            return "the controller has none (VWC bit 0 is 0): a write it acknowledges is already safe"
        ctrl = drive.get("controller", path)
        return (
            ["nvme", "get-feature", ctrl, "-f", "6"],
            lambda text: tool_output.nvme_feature_value(text) & 1 == 1,
            lambda on: ["nvme", "set-feature", ctrl, "-f", "6", "-v", str(int(on))],
        )
    if transport == "sata":
        return (["hdparm", "-W", path], tool_output.hdparm_write_cache, lambda on: ["hdparm", f"-W{int(on)}", path])
    return f"a {transport} device has no drive cache of its own that ssdbench can reach"


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
        self.cpus = None  # the drive's NUMA node's CPUs, its interrupts' (None: no node known)
        self.cpulist = None
        self.fio_cpus = None  # the one CPU fio runs on, as a set (None: fio may use every CPU)
        # (control, a function that puts back the state the run found and says what it became), in the order set
        self.undo = []

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
            "aspm": self.switch("aspm", ASPM_POLICY, "performance", "PCIe ASPM policy"),
            "write_cache": self.drive_cache(),
            "kernel_write_cache": self.switch(
                "kernel_write_cache", f"{queue}/write_cache", "write back", "the kernel's write cache setting"
            ),
            "irq_affinity": self.irq_affinity(),
        }

    def switch(self, control, path, value, what):
        """Set a sysfs control to `value` for the run, and put back what it held after (restore): the record
        says the state found (`before`) and the state tested."""
        before = _selected(sysfs.read(path))
        if before is None:
            return _unavailable(f"{what}: {path} does not exist on this kernel/device")
        if before == value:
            return {**_applied(value), "before": before}
        result = _set_choice(path, value, what)
        if result["state"] == "applied":
            self.undo.append((control, lambda: _set_choice(path, before, what)))
        return {**result, "before": before}

    def drive_cache(self):
        """The drive's volatile write cache on for the run, as drives ship and as a user's system runs them; one
        found off is turned on, and off again after (restore)."""
        found = _cache_commands(self.drive)
        if isinstance(found, str):
            return _unavailable(f"the drive's write cache: {found}")
        read_argv, parse, set_argv = found

        def read():
            return "on" if parse(tools.run(read_argv, timeout=30)) else "off"

        def turn(state):
            tools.run(set_argv(state == "on"), timeout=30)
            now = read()
            return (
                _applied(now) if now == state else _unavailable(f"the drive's write cache: set {state}, it reads {now}")
            )

        try:
            before = read()
            result = _applied("on") if before == "on" else turn("on")
        except SsdbenchError as exc:
            return _unavailable(f"the drive's write cache: {exc}")
        if before != "on":
            self.undo.append(("write_cache", lambda: turn(before)))
        return {**result, "before": before}

    def irq_affinity(self):
        """The drive's interrupts on the CPUs fio is pinned to (the DUT's NUMA node): an IO completed on another
        node's CPU crosses between the nodes. The kernel refuses a change to interrupts it manages itself (NVMe's
        queues, each already on the CPUs that submit to it); those, and any it refuses, stay as found. The record
        holds each interrupt's CPUs as found (`before`) and as tested."""
        host = self.drive.get("host_controller")
        if not host:
            return _unavailable("IRQ affinity: the drive has no PCI function, so no interrupt of its own")
        found = {str(n): sysfs.read(f"/proc/irq/{n}/smp_affinity_list") for n in host["irqs"]}
        if not found:
            return _unavailable(f"IRQ affinity: {host['pci']} lists no interrupt")
        if self.cpus is None:
            why = "the drive reports no NUMA node to pin them to: left as found"
            return {**_unavailable(f"IRQ affinity: {why}"), "before": found, "tested": found}
        tested, refused, changed = dict(found), [], {}
        for irq, before in found.items():
            if before is not None and parse_cpulist(before) <= self.cpus:
                continue  # already on the node
            result = _set_sysfs(f"/proc/irq/{irq}/smp_affinity_list", self.cpulist, f"IRQ {irq}")
            if result["state"] != "applied":
                refused.append(result["reason"])
                continue
            tested[irq], changed[irq] = result["value"], before
        if changed:
            self.undo.append(("irq_affinity", lambda: self.put_irqs_back(changed)))
        record = {"before": found, "tested": tested}
        if refused:
            return {**_unavailable(f"IRQ affinity: {'; '.join(refused)}"), **record}
        return {**_applied(f"on node CPUs {self.cpulist}"), **record}

    def put_irqs_back(self, changed):
        back = {
            irq: _set_sysfs(f"/proc/irq/{irq}/smp_affinity_list", cpus, f"IRQ {irq}") for irq, cpus in changed.items()
        }
        failed = [r["reason"] for r in back.values() if r["state"] != "applied"]
        return _unavailable("; ".join(failed)) if failed else _applied({irq: r["value"] for irq, r in back.items()})

    def restore(self):
        """Put back every state the run changed, the last set first. Returns what each control became: none when
        the run changed nothing. Called once the steps end, and again (finding nothing left) by release()."""
        out = {}
        while self.undo:
            control, put_back = self.undo.pop()
            try:
                out[control] = put_back()
            except (SsdbenchError, OSError) as exc:
                out[control] = _unavailable(f"putting it back failed: {exc}")
        return out

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
        """fio on one CPU for every step of the run (`cpu`), and the drive's NUMA node (`node`, its CPUs
        `node_cpus`) that its interrupts are pinned to. The node is that of the nearest PCI function above the
        block device (an NVMe drive's controller, a SATA drive's AHCI adapter: a SATA disk's `device` is its SCSI
        device, which has no node of its own). fio's CPU is one of the node's CPUs, or of every CPU where the
        drive reports no node; chosen by fio_cpu."""
        functions = discovery.pci_functions(name)
        node = int(sysfs.read(f"{functions[0]}/numa_node") or -1) if functions else -1
        cpulist = sysfs.read(NODE_CPULIST.format(discovery.SYS, node)) if node >= 0 else None
        if node < 0:
            where = f"its PCI function {os.path.basename(functions[0])}" if functions else "it has no PCI function"
            place = f"the drive reports no NUMA node ({where}): any CPU"
        elif not cpulist:
            place = f"NUMA node {node} lists no CPUs: any CPU"
        else:
            self.cpus, self.cpulist = parse_cpulist(cpulist), cpulist
            place = f"NUMA node {node} (CPUs {cpulist}, from {os.path.basename(functions[0])})"
        cpu, why = fio_cpu(self.cpus or parse_cpulist(sysfs.read(f"{discovery.SYS}/{CPUS}/online") or "0"))
        if cpu is None:
            return {**_unavailable(f"fio's CPU: {why}: fio may use every CPU"), "node": node if cpulist else None}
        self.fio_cpus = {cpu}
        record = {"cpu": cpu, "node": node if cpulist else None, "node_cpus": cpulist, "why": f"{place}; {why}"}
        return {**_applied(f"fio on CPU {cpu}"), **record}

    def release(self):
        if self.dma_fd is not None:
            os.close(self.dma_fd)
            self.dma_fd = None
        return self.restore()


def parse_cpulist(text):
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def fio_cpu(candidates, allowed=None):
    """The one CPU fio runs on for every step of a run, from `candidates` (the drive's node's CPUs, or every
    online CPU), and why that one: (cpu, why), or (None, why not). Only a CPU the runner may use itself
    (`allowed`, its own affinity). On a hybrid CPU a P-core: /sys/devices/cpu_core/cpus where the kernel lists
    E-cores apart (cpu_atom); otherwise, among the CPUs with the highest cpuinfo_max_freq (a hybrid CPU the
    kernel does not split, AMD's compact cores; all alike elsewhere). Not CPU 0 where another is left: it takes
    most of the kernel's housekeeping interrupts. Then the lowest-numbered."""
    allowed = os.sched_getaffinity(0) if allowed is None else allowed
    pool = set(candidates) & set(allowed)
    if not pool:
        return None, f"none of CPUs {sorted(candidates)} is open to the runner (it may use {sorted(allowed)})"
    why = []
    p_cores, e_cores = (sysfs.read(f"{discovery.SYS}/{f}") for f in (P_CORES, E_CORES))
    if p_cores and e_cores:
        on_p = pool & parse_cpulist(p_cores)
        pool = on_p or pool
        why.append(f"{'a P-core' if on_p else 'no P-core among them'} (hybrid: P-cores {p_cores}, E-cores {e_cores})")
    else:
        max_khz = {c: sysfs.read(f"{discovery.SYS}/{CPUS}/cpu{c}/cpufreq/cpuinfo_max_freq") for c in pool}
        known = {c: int(k) for c, k in max_khz.items() if k and k.isdigit()}
        if known and len(set(known.values())) > 1:
            top = max(known.values())
            pool = {c for c, k in known.items() if k == top}
            why.append(f"of the fastest ({top / 1000:.0f} MHz most, cpuinfo_max_freq)")
        else:
            why.append("all alike" if known else "no cpufreq: the CPUs' top clocks are unknown, taken as alike")
    if len(pool) > 1 and 0 in pool:
        pool.discard(0)
        why.append("not CPU 0 (the kernel's housekeeping)")
    return min(pool), ", ".join(why)


def idle(minimum_s, should_stop):
    """The idle before a step: the suite's fixed `minimum_s`, on every drive and testbed, whatever the drive's
    temperature (a wait to cool would give a drive on a poorly cooled testbed more time for its garbage
    collection than one on a cool testbed). The record says how many seconds it idled, and the minimum."""
    started = time.monotonic()
    while (idled := time.monotonic() - started) < minimum_s and not should_stop():
        time.sleep(min(0.5, minimum_s - idled))
    return {**_applied(f"{idled:.0f} s"), "idled_s": idled, "minimum_s": minimum_s}
