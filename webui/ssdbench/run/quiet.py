"""The quiet-OS controls of the locked configuration, applied before a run and recorded.

Each control ends up in the environment as applied (with the value set) or as
unavailable (with the reason): nothing is skipped silently. Controls that must be
held for the run's length (cpu_dma_latency) stay held until release(). Every
control that changes the testbed (the CPU governor, the drive's I/O scheduler and
merges, NVMe APST or SATA link power management, the ASPM policy, the drive's
write cache and the kernel's view of it, its interrupts' CPUs) records the state it
found, and restore() puts that back.

Before any of them changes a thing, what it will be put back to goes into the
crash record, data_dir/put-back.json (Record), written whole and synced; restore()
removes it. A runner that is killed leaves it behind, and the next start of a run
or of the runner service puts those values back first (recover()).
"""

import glob
import json
import os
import re
import struct
import tempfile
import time

from ..drives import discovery, tool_output
from ..errors import SsdbenchError
from ..system import durable, sysfs, tools

ASPM_POLICY = "/sys/module/pcie_aspm/parameters/policy"
# Under discovery.SYS: a NUMA node's CPUs; the CPUs' folder; a hybrid Intel CPU's P-cores and E-cores (the
# kernel's hybrid PMUs, since 5.13; neither exists on a CPU whose cores are all alike)
NODE_CPULIST = "{}/devices/system/node/node{}/cpulist"
CPUS = "devices/system/cpu"
P_CORES, E_CORES = "devices/cpu_core/cpus", "devices/cpu_atom/cpus"
# Under a CPU's folder: the CPUs of its physical core (its SMT threads), and how the firmware and the kernel rank
# its core, best first in this order: AMD's preferred-core ranking (amd-pstate, since 6.9), ACPI CPPC's highest
# performance (Intel's favoured cores that ITMT schedules to first, AMD's preferred cores before amd-pstate said
# so, hybrid cores), the scheduler's capacity (arm64, hybrid x86 since 6.x), and last the top clock
SIBLINGS = "topology/thread_siblings_list"
RANKS = (
    ("AMD's preferred-core ranking", "cpufreq/amd_pstate_prefcore_ranking"),
    ("ACPI CPPC highest_perf", "acpi_cppc/highest_perf"),
    ("the scheduler's cpu_capacity", "cpu_capacity"),
    ("cpuinfo_max_freq", "cpufreq/cpuinfo_max_freq"),
)
GOVERNORS = "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
RECORD = "put-back.json"
# The APST feature's data: 32 entries of 8 bytes, one per power state (NVMe base spec, Set Features 0Ch).
APST_TABLE_BYTES = 256


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


def put_files_back(changed, what, name=None):
    """Write back each file's value as found ({path: value}). What it became: the value, or with `name` (path
    to a label: cpu0, an IRQ's number) each file's by its label."""
    back = {path: _set_choice(path, value, what) for path, value in changed.items()}
    failed = [r["reason"] for r in back.values() if r["state"] != "applied"]
    if failed:
        return _unavailable("; ".join(failed))
    if name is None:
        return _applied(next(iter(back.values()))["value"])
    return _applied({name(path): r["value"] for path, r in back.items()})


def _cpu_of(path):
    return re.search(r"/(cpu\d+)/", path).group(1)


def _irq_of(path):
    return path.split("/")[3]


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
            # --value, not -v: nvme-cli 2.3 took -v for the value, later versions for --verbose (the value is -V)
            lambda on: ["nvme", "set-feature", ctrl, "-f", "6", f"--value={int(on)}"],
        )
    if transport == "sata":
        return (["hdparm", "-W", path], tool_output.hdparm_write_cache, lambda on: ["hdparm", f"-W{int(on)}", path])
    if transport == "sas":
        return "a SAS drive's write cache (WCE in its Caching mode page) is left as the drive has it"
    return f"a {transport} device has no drive cache of its own that ssdbench can reach"


def _set_cache(drive, state):
    """Turn the drive's write cache on or off, then read it: applied with what it reads, or unavailable."""
    read_argv, parse, set_argv = _cache_commands(drive)
    tools.run(set_argv(state == "on"), timeout=30)
    now = "on" if parse(tools.run(read_argv, timeout=30)) else "off"
    return _applied(now) if now == state else _unavailable(f"the drive's write cache: set {state}, it reads {now}")


def read_apst(ctrl):
    """The controller's APST as it is: (the feature's value, whose bit 0 says it is on; its table, the 256 bytes
    that say after how long idle each power state moves to which), by `nvme get-feature -f 0x0c`: the value as
    text, the table as the raw data buffer."""
    value = tool_output.nvme_feature_value(tools.run(["nvme", "get-feature", ctrl, "-f", "0x0c"], timeout=30))
    table = tools.run(
        ["nvme", "get-feature", ctrl, "-f", "0x0c", f"--data-len={APST_TABLE_BYTES}", "--raw-binary"],
        timeout=30,
        binary=True,
    )
    if len(table) != APST_TABLE_BYTES:
        raise SsdbenchError(f"nvme get-feature -f 0x0c --raw-binary gave {len(table)} bytes, not {APST_TABLE_BYTES}")
    return value, table


def set_apst(ctrl, value, table):
    """Set APST to `value` with `table` as its data (nvme-cli sends a data buffer with every Set Features 0Ch:
    left out, it sends zeros, and an APST turned on again would have no transition left). Returns the value
    it reads after."""
    with tempfile.NamedTemporaryFile(prefix="ssdbench-apst-") as f:
        f.write(table)
        f.flush()
        argv = ["nvme", "set-feature", ctrl, "-f", "0x0c", f"--value={value}", f"--data-len={len(table)}"]
        tools.run([*argv, f"--data={f.name}"], timeout=30)
    return read_apst(ctrl)[0]


def _apst_back(ctrl, value, table):
    now = set_apst(ctrl, value, table)
    if now & 1 != value & 1:
        return _unavailable(f"NVMe APST: set back to {value:#x}, it reads {now:#x}")
    return _applied("on" if now & 1 else "off")


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


def boot_id():
    return sysfs.read(BOOT_ID)


class Record:
    """The crash record: data_dir/put-back.json, what each control the run changes will be put back to, each
    entry written (whole, synced) before its change is made. Its entries, in the order set:
    {"control", "file": a sysfs or procfs path, "value": what it held, "of_drive": true where the file is the
    drive's (its queue, its interrupts)}, {"control", "apst": the NVMe controller, "value": the feature's value,
    "table": its 256 bytes in hex}, {"control", "cache": "on" or "off"}; with the run, its process, the boot
    it ran in (the kernel's boot_id) and the drive (path, transport, serial, NVMe controller)."""

    def __init__(self, data_dir, run_id, drive):
        self.path = os.path.join(data_dir, RECORD)
        fields = ("path", "transport", "controller", "volatile_write_cache")
        self.doc = {
            "format": 1,
            "run_id": run_id,
            "pid": os.getpid(),
            "boot_id": boot_id(),
            "drive": {**{k: drive.get(k) for k in fields}, "serial": discovery.serial_now(drive)},
            "put_back": [],
        }
        self.written = False

    def add(self, entry):
        self.doc["put_back"].append(entry)
        self.doc["written_at"] = time.time()
        durable.replace_file(self.path, json.dumps(self.doc, indent=1))
        self.written = True

    def remove(self):
        if self.written:
            durable.remove_file(self.path)
            self.written = False


class Quiet:
    """Holds the controls for the length of a run."""

    def __init__(self, drive, record=None):
        """record: the crash record (Record) each change is written to first; None writes none (a test)."""
        self.drive = drive
        self.record = record
        self.dma_fd = None
        self.cpus = None  # the drive's NUMA node's CPUs, its interrupts' (None: no node known)
        self.cpulist = None
        self.fio_cpus = None  # the one CPU fio runs on, as a set (None: fio may use every CPU)
        self.fio_core = None  # that CPU's physical core, as a cpulist: its threads (None: no CPU chosen)
        # (control, a function that puts back the state the run found and says what it became), in the order set
        self.undo = []

    def apply(self):
        name = os.path.basename(os.path.realpath(self.drive["path"]))
        queue = f"/sys/block/{name}/queue"
        found = {
            "governor": self.governor(),
            "cpu_dma_latency": self.hold_dma_latency(),
            "scheduler": self.switch("scheduler", f"{queue}/scheduler", "none", "I/O scheduler", of_drive=True),
            "nomerges": self.switch("nomerges", f"{queue}/nomerges", "2", "merges", of_drive=True),
            "power_management": self.link_power(),
            "cpu_affinity": self.numa_cpus(name),
            "swap": swap(),
            "background": background(),
            "aspm": self.switch("aspm", ASPM_POLICY, "performance", "PCIe ASPM policy"),
            "write_cache": self.drive_cache(),
            "kernel_write_cache": self.switch(
                "kernel_write_cache", f"{queue}/write_cache", "write back", "the kernel's write cache setting", True
            ),
            "irq_affinity": self.irq_affinity(),
        }
        # the link's L-states as the run has them: the ASPM policy just set decides them (results/testbed.py)
        found["aspm"]["l_states"] = discovery.link_states(name)
        return found

    def note(self, entry, what):
        """The crash record gets `entry` (what a change will be put back to) before the change is made. None
        once it is on the disk, else why the change must not be made (the record could not be written)."""
        if self.record is None:
            return None
        try:
            self.record.add(entry)
        except OSError as exc:
            return _unavailable(
                f"{what}: left as found, as the record to put it back after a crash could not be "
                f"written ({exc.strerror})"
            )
        return None

    def set_file(self, control, path, value, what, before, of_drive=False):
        """The one way a control changes a file of the kernel: the value found goes to the crash record first,
        then `value` is written. The caller puts it back (put_files_back) if the write was applied."""
        entry = {"control": control, "file": path, "value": before, **({"of_drive": True} if of_drive else {})}
        return self.note(entry, what) or _set_choice(path, value, what)

    def switch(self, control, path, value, what, of_drive=False):
        """Set a sysfs control to `value` for the run, and put back what it held after (restore): the record
        says the state found (`before`) and the state tested."""
        before = _selected(sysfs.read(path))
        if before is None:
            return _unavailable(f"{what}: {path} does not exist on this kernel/device")
        if before == value:
            return {**_applied(value), "before": before}
        result = self.set_file(control, path, value, what, before, of_drive)
        if result["state"] == "applied":
            self.undo.append((control, lambda: put_files_back({path: before}, what)))
        return {**result, "before": before}

    def governor(self):
        """The CPU governor `performance` on every CPU, each file put back to what it held after (restore); the
        record's `before` holds each CPU's governor as found."""
        paths = sorted(glob.glob(GOVERNORS), key=lambda p: int(_cpu_of(p)[3:]))
        if not paths:
            return _unavailable("no cpufreq driver: the frequency is set by firmware or the hypervisor")
        found = {path: _selected(sysfs.read(path)) for path in paths}
        changed, failed = {}, []
        for path, before in found.items():
            if before == "performance":
                continue
            if before is None:
                failed.append(f"governor: {path} could not be read: left as found")
                continue
            result = self.set_file("governor", path, "performance", "governor", before)
            if result["state"] == "applied":
                changed[path] = before
            else:
                failed.append(result["reason"])
        if changed:
            self.undo.append(("governor", lambda: put_files_back(changed, "governor", _cpu_of)))
        result = _unavailable("; ".join(failed)) if failed else _applied("performance on all CPUs")
        return {**result, "before": {_cpu_of(path): before for path, before in found.items()}}

    def drive_cache(self):
        """The drive's volatile write cache on for the run, as drives ship and as a user's system runs them; one
        found off is turned on, and off again after (restore)."""
        found = _cache_commands(self.drive)
        if isinstance(found, str):
            return _unavailable(f"the drive's write cache: {found}")
        read_argv, parse = found[:2]
        try:
            before = "on" if parse(tools.run(read_argv, timeout=30)) else "off"
        except SsdbenchError as exc:
            return _unavailable(f"the drive's write cache: reading it failed, so it is left as found: {exc}")
        if before == "on":
            return {**_applied("on"), "before": before}
        refused = self.note({"control": "write_cache", "cache": before}, "the drive's write cache")
        if refused:
            return {**refused, "before": before}
        # put back whatever the setting does: a command that fails after the drive took it leaves it changed
        self.undo.append(("write_cache", lambda: _set_cache(self.drive, before)))
        try:
            result = _set_cache(self.drive, "on")
        except SsdbenchError as exc:
            result = _unavailable(f"the drive's write cache: {exc}")
        return {**result, "before": before}

    def irq_affinity(self):
        """The drive's interrupts near fio. A controller with one interrupt for every IO (AHCI's) has it on fio's
        core (fio's CPU and its SMT sibling): each completion is handled where fio waits for it, on any board,
        NUMA or not. Several interrupts go on the CPUs of the drive's NUMA node: an IO completed on another
        node's CPU crosses between the nodes. The kernel refuses a change to interrupts it manages itself (NVMe's
        queues, each already on the CPUs that submit to it); those, and any it refuses, stay as found. The record
        holds each interrupt's CPUs as found (`before`) and as tested."""
        host = self.drive.get("host_controller")
        if not host:
            return _unavailable("IRQ affinity: the drive has no PCI function, so no interrupt of its own")
        found = {str(n): sysfs.read(f"/proc/irq/{n}/smp_affinity_list") for n in host["irqs"]}
        if not found:
            return _unavailable(f"IRQ affinity: {host['pci']} lists no interrupt")
        if len(found) == 1 and self.fio_core:
            cpus, cpulist, where = parse_cpulist(self.fio_core), self.fio_core, f"on fio's core, CPUs {self.fio_core}"
        elif self.cpus is not None:
            cpus, cpulist, where = self.cpus, self.cpulist, f"on node CPUs {self.cpulist}"
        else:
            why = "the drive reports no NUMA node to pin them to: left as found"
            return {**_unavailable(f"IRQ affinity: {why}"), "before": found, "tested": found}
        tested, refused, changed = dict(found), [], {}
        for irq, before in found.items():
            if before is None:
                refused.append(f"IRQ {irq}: its CPUs could not be read: left as found")
                continue
            if parse_cpulist(before) <= cpus:
                continue  # already there
            path = f"/proc/irq/{irq}/smp_affinity_list"
            result = self.set_file("irq_affinity", path, cpulist, f"IRQ {irq}", before, of_drive=True)
            if result["state"] != "applied":
                refused.append(result["reason"])
                continue
            tested[irq], changed[path] = result["value"], before
        if changed:
            self.undo.append(("irq_affinity", lambda: put_files_back(changed, "IRQ affinity", _irq_of)))
        record = {"before": found, "tested": tested}
        if refused:
            return {**_unavailable(f"IRQ affinity: {'; '.join(refused)}"), **record}
        return {**_applied(where), **record}

    def restore(self):
        """Put back every state the run changed, the last set first, then remove the crash record. Returns what
        each control became: none when the run changed nothing. Called once the steps end, and again (finding
        nothing left) by release()."""
        out = {}
        while self.undo:
            control, put_back = self.undo.pop()
            try:
                out[control] = put_back()
            except (SsdbenchError, OSError) as exc:
                out[control] = _unavailable(f"putting it back failed: {exc}")
        if self.record is not None:
            self.record.remove()
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
            return self.apst()
        if transport == "sata":
            port = (self.drive.get("link") or {}).get("port")
            if not port:
                return _unavailable("SATA link power management: the ATA port was not found")
            hosts = glob.glob(f"/sys/class/ata_port/{port}/device/host*/scsi_host/host*/link_power_management_policy")
            if not hosts:
                return _unavailable(f"SATA link power management: no policy file for {port}")
            return self.switch("power_management", hosts[0], "max_performance", "SATA link power management")
        return _unavailable(f"link power management: not applicable to a {transport} device")

    def apst(self):
        """NVMe APST off for the run: its value and table are read first, the table is sent again with the value
        0 (so that it is kept), and both are put back after (restore). `before` says whether it was on."""
        ctrl = self.drive.get("controller")
        if not self.drive.get("apst_supported"):
            return _unavailable("NVMe APST: the controller does not support it (APSTA=0), so it is already off")
        try:
            value, table = read_apst(ctrl)
        except SsdbenchError as exc:
            return _unavailable(f"NVMe APST: reading it failed, so it is left as found: {exc}")
        before = "on" if value & 1 else "off"
        if before == "off":
            return {**_applied("APST off"), "before": before}
        entry = {"control": "power_management", "apst": ctrl, "value": value, "table": table.hex()}
        refused = self.note(entry, "NVMe APST")
        if refused:
            return {**refused, "before": before}
        self.undo.append(("power_management", lambda: _apst_back(ctrl, value, table)))  # as for the write cache
        try:
            now = set_apst(ctrl, value & ~1, table)
        except SsdbenchError as exc:
            return {**_unavailable(f"NVMe APST: {exc}"), "before": before}
        if now & 1:
            return {**_unavailable(f"NVMe APST: set off, it reads {now:#x}"), "before": before}
        return {**_applied("APST off"), "before": before}

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
        self.fio_cpus, self.fio_core = {cpu}, _cpulist(siblings(cpu))
        record = {"cpu": cpu, "node": node if cpulist else None, "node_cpus": cpulist, "why": f"{place}; {why}"}
        return {**_applied(f"fio on CPU {cpu}"), **record}

    def release(self):
        if self.dma_fd is not None:
            os.close(self.dma_fd)
            self.dma_fd = None
        return self.restore()


def recover(data_dir):
    """Put back what a run that was killed had changed, from the crash record it left in `data_dir`, then remove
    the record. Only under the run lock (whoever holds it is the record's only writer). None when there is no
    record; else the run, its process, when the record was last written, and for each entry (the last set
    first) what it became, or why it was not put back:
    - a file of the kernel only in the boot that changed it: a restart starts them afresh (and an IRQ's number,
      a device's name, may mean another thing since);
    - the drive's own (its files, APST, its write cache) only to the same drive, by its serial: a drive gone, or
      another drive on its path, is left alone, and the start goes on."""
    path = os.path.join(data_dir, RECORD)
    try:
        with open(path) as f:
            doc = json.load(f)
        entries = list(doc["put_back"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return _forget(path, {"put_back": [], "error": f"{path} could not be read, so nothing was put back: {exc}"})
    drive = doc.get("drive") or {}
    same_boot = doc.get("boot_id") is not None and doc.get("boot_id") == boot_id()
    gone = _drive_gone(drive)
    done = []
    for entry in reversed(entries):
        what = {k: entry.get(k) for k in ("control", "file", "apst", "cache", "value") if k in entry}
        try:
            result = _recover_entry(entry, drive, same_boot, gone)
        except (SsdbenchError, OSError) as exc:
            result = _unavailable(f"putting it back failed: {exc}")
        done.append({**what, **{k: v for k, v in result.items() if k != "value"}, "now": result.get("value")})
    return _forget(path, {k: doc.get(k) for k in ("run_id", "pid", "written_at")} | {"put_back": done})


def _forget(path, recovered):
    """The record removed once it has been acted on; one that cannot be is said, and read again next time."""
    try:
        durable.remove_file(path)
    except OSError as exc:
        recovered["error"] = f"{path} could not be removed: {exc.strerror}"
    return recovered


def _drive_gone(drive):
    """Why the record's drive is not on its path any more, or None when it is."""
    if not drive.get("path") or not drive.get("transport"):
        return "the record names no drive"
    if drive.get("serial") is None:
        return f"the serial of the drive on {drive['path']} was not known, so it cannot be told to be the same drive"
    now = discovery.serial_now(drive)
    if now is None:
        return f"the drive on {drive['path']} (serial {drive['serial']}) is gone"
    if now != drive["serial"]:
        return f"{drive['path']} is now another drive (serial {now}), not the one the run changed ({drive['serial']})"
    return None


def _recover_entry(entry, drive, same_boot, gone):
    if "file" in entry:
        if not same_boot:
            return _unavailable("the machine has restarted since: the kernel's settings started afresh at boot")
        if entry.get("of_drive") and gone:
            return _unavailable(gone)
        now = _selected(sysfs.read(entry["file"]))
        if now is None:
            return _unavailable(f"{entry['file']} does not exist any more")
        if now == entry["value"]:
            return _applied(now)  # as found already: a write the kernel refused (EPERM), or made since
        return _set_choice(entry["file"], entry["value"], entry["control"])
    if gone:
        return _unavailable(gone)
    if "apst" in entry:
        return _apst_back(entry["apst"], entry["value"], bytes.fromhex(entry["table"]))
    if "cache" in entry:
        return _set_cache(drive, entry["cache"])
    return _unavailable(f"an entry of a kind this version does not know: {sorted(entry)}")


def recovered_lines(recovered):
    """What recover() did, a line per entry, for a log."""
    if recovered.get("error"):
        yield recovered["error"]
    head = f"run {recovered.get('run_id')} (pid {recovered.get('pid')}) ended without putting back what it changed"
    if recovered.get("put_back"):
        yield f"{head}: put back from its record"
    for e in recovered.get("put_back", []):
        where = e.get("file") or e.get("apst") or "the drive's write cache"
        if e["state"] == "applied":
            yield f"  {e['control']}: {where} is {e['now']!r} again"
        else:
            yield f"  {e['control']}: {where} not put back: {e['reason']}"


def parse_cpulist(text):
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def _cpulist(cpus):
    return ",".join(str(c) for c in sorted(cpus))


def siblings(cpu):
    """The CPUs of `cpu`'s physical core (its SMT threads, itself included): itself alone where sysfs shows no
    topology."""
    listed = sysfs.read(f"{discovery.SYS}/{CPUS}/cpu{cpu}/{SIBLINGS}")
    return parse_cpulist(listed) | {cpu} if listed else {cpu}


def fio_cpu(candidates, allowed=None):
    """The one CPU fio runs on for every step of a run, from `candidates` (the drive's node's CPUs, or every
    online CPU), and why that one: (cpu, why), or (None, why not). Only a CPU the runner may use itself
    (`allowed`, its own affinity). The first thread of a physical core, and not a thread of CPU
    0's core where another is left: CPU 0 takes most of the kernel's housekeeping interrupts, and its sibling
    shares its core. On a hybrid CPU whose E-cores the kernel lists apart (cpu_atom), a P-core. Then the best
    core as the firmware ranks them (RANKS: the first that tells the cores apart), then the lowest-numbered."""
    allowed = os.sched_getaffinity(0) if allowed is None else allowed
    pool = set(candidates) & set(allowed)
    if not pool:
        return None, f"none of CPUs {sorted(candidates)} is open to the runner (it may use {sorted(allowed)})"
    why = []
    cores = {}
    for cpu in sorted(pool):
        cores.setdefault(frozenset(siblings(cpu)), cpu)
    firsts = set(cores.values())
    zero = siblings(0)
    if firsts - zero:
        why.append(f"not CPU 0's core (CPUs {_cpulist(zero)}: the kernel's housekeeping)" if firsts & zero else "")
        firsts -= zero
    p_cores, e_cores = (sysfs.read(f"{discovery.SYS}/{f}") for f in (P_CORES, E_CORES))
    if p_cores and e_cores:
        on_p = firsts & parse_cpulist(p_cores)
        firsts = on_p or firsts
        why.append(f"{'a P-core' if on_p else 'no P-core among them'} (hybrid: P-cores {p_cores}, E-cores {e_cores})")
    for name, path in RANKS:
        read = {c: sysfs.read(f"{discovery.SYS}/{CPUS}/cpu{c}/{path}") for c in firsts}
        ranks = {c: int(v) for c, v in read.items() if v and v.isdigit()}
        if len(ranks) == len(firsts) and len(set(ranks.values())) > 1:
            top = max(ranks.values())
            firsts = {c for c, v in ranks.items() if v == top}
            why.append(f"the best-ranked core by {name} ({top}, where the others have {min(ranks.values())} to {top})")
            break
    else:
        why.append("its cores ranked alike" if any(read.values()) else "no ranking of its cores: taken as alike")
    cpu = min(firsts)
    core = siblings(cpu)
    why.append(f"the first thread of its core (CPUs {_cpulist(core)})" if len(core) > 1 else "a core of one thread")
    return cpu, ", ".join(w for w in why if w)


def idle(minimum_s, should_stop):
    """The idle before a step: the suite's fixed `minimum_s`, on every drive and testbed, whatever the drive's
    temperature (a wait to cool would give a drive on a poorly cooled testbed more time for its garbage
    collection than one on a cool testbed). The record says how many seconds it idled, and the minimum."""
    started = time.monotonic()
    while (idled := time.monotonic() - started) < minimum_s and not should_stop():
        time.sleep(min(0.5, minimum_s - idled))
    return {**_applied(f"{idled:.0f} s"), "idled_s": idled, "minimum_s": minimum_s}
