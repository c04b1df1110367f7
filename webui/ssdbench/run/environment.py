"""The environment fingerprint of a run: kernel, CPU, power state, tool versions, suite, drive."""

import glob
import os
import platform
import time

from .. import __version__
from ..system import clock, redact, sysfs, tools


def cpu_model():
    for line in sysfs.read("/proc/cpuinfo", "").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def governors():
    found = {sysfs.read(p, None) for p in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor")}
    found.discard(None)
    return sorted(found) or ["unavailable: no cpufreq driver (a VM, or frequency fixed by firmware)"]


def cstates():
    return {
        "cpuidle_driver": sysfs.read(
            "/sys/devices/system/cpu/cpuidle/current_driver", "unavailable: no cpuidle driver"
        ),
        "intel_idle_max_cstate": sysfs.read(
            "/sys/module/intel_idle/parameters/max_cstate", "unavailable: intel_idle not loaded"
        ),
        "states": sorted({sysfs.read(p, "?") for p in glob.glob("/sys/devices/system/cpu/cpu0/cpuidle/state*/name")}),
    }


def frequency():
    """The most cpufreq lets each CPU reach. The clock itself is recorded while each step runs, on fio's CPU
    (StepClock): an idle reading as the run begins says nothing of the clock under load."""
    found = {sysfs.read(p) for p in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/cpuinfo_max_freq")}
    found.discard(None)
    return {"max_mhz": sorted(int(k) / 1000 for k in found) or "unavailable: no cpufreq driver (a VM, or firmware)"}


def _cpuinfo_mhz(cpu):
    """`cpu MHz` of one processor in /proc/cpuinfo, and whether the CPU has the APERF and MPERF counters that
    make it a measure (x86: the kernel's reading of the clock it ran at) rather than the fixed TSC rate."""
    for block in sysfs.read("/proc/cpuinfo", "").split("\n\n"):
        fields = dict(line.split(":", 1) for line in block.splitlines() if ":" in line)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        if fields.get("processor") == str(cpu) and "cpu MHz" in fields:
            return float(fields["cpu MHz"]), "aperfmperf" in fields.get("flags", "").split()
    return None, False


class StepClock:
    """The clock of fio's CPU while a step runs: sampled at each of the step's ticks (twice a second) from 1 s
    after fio starts, the tick after fio has ended left out. From the cpufreq driver's scaling_cur_freq (on x86
    the kernel's measure from APERF and MPERF), else /proc/cpuinfo's `cpu MHz` where the CPU has those
    counters; else none, and the record says why."""

    def __init__(self, cpus):
        self.cpu = next(iter(cpus)) if cpus and len(cpus) == 1 else None
        self.started = time.monotonic()
        self.samples = []
        self.source, self.why = None, None
        if self.cpu is None:
            self.why = "fio ran on no one CPU (see controls.cpu_affinity)"
            return
        path = f"/sys/devices/system/cpu/cpu{self.cpu}/cpufreq/scaling_cur_freq"
        if sysfs.read(path, "").isdigit():
            self.source = path
        elif _cpuinfo_mhz(self.cpu)[1]:
            self.source = "/proc/cpuinfo"
        else:
            self.why = (
                "no cpufreq driver, and /proc/cpuinfo's cpu MHz is not a measure here (the CPU shows no APERF/MPERF "
                "counters: a VM, or not x86)"
            )

    def read(self):
        if self.source == "/proc/cpuinfo":
            return _cpuinfo_mhz(self.cpu)[0]
        khz = sysfs.read(self.source, "")
        return int(khz) / 1000 if khz.isdigit() else None

    def sample(self):
        if self.source and time.monotonic() - self.started >= 1.0:
            self.samples.append(self.read())

    def record(self):
        taken = [v for v in self.samples[:-1] if v is not None]  # the last tick comes after fio has ended
        if not self.source or not taken:
            why = self.why or "the step ran too short for a sample (the first is taken 1 s in)"
            return {"cpu": self.cpu, "unavailable": why}
        mean = sum(taken) / len(taken)
        summary = {"mean_mhz": round(mean, 1), "min_mhz": round(min(taken), 1), "max_mhz": round(max(taken), 1)}
        return {"cpu": self.cpu, "source": self.source, "samples": len(taken), **summary}


def vulnerabilities():
    """The kernel's word on each CPU vulnerability and its mitigation (/sys/devices/system/cpu/vulnerabilities):
    a mitigation's cost is in every IO's system call, so two runs of one CPU can differ by it."""
    folder = "/sys/devices/system/cpu/vulnerabilities"
    found = {os.path.basename(p): sysfs.read(p, "?") for p in sorted(glob.glob(f"{folder}/*"))}
    return found or f"unavailable: no {folder}"


def turbo():
    """Whether the CPU may clock above its base (Intel Turbo Boost, AMD Core Performance Boost): recorded, not
    set, as the methodology leaves it as the testbed ships."""
    no_turbo = sysfs.read("/sys/devices/system/cpu/intel_pstate/no_turbo")
    if no_turbo in ("0", "1"):
        return "on (intel_pstate no_turbo=0)" if no_turbo == "0" else "off (intel_pstate no_turbo=1)"
    boost = sysfs.read("/sys/devices/system/cpu/cpufreq/boost")
    if boost in ("0", "1"):
        return "on (cpufreq boost=1)" if boost == "1" else "off (cpufreq boost=0)"
    return "unavailable: neither intel_pstate's no_turbo nor cpufreq's boost exists (a VM, or no cpufreq driver)"


def iommu(drive, cmdline):
    """The IOMMU as the run had it: what the kernel line asks (iommu=pt passes devices through; AMD's default
    translation lowers NVMe IOPS at high queue depth) and the domain the drive's PCI function is in."""
    words = [w for w in cmdline.split() if w.startswith(("iommu=", "amd_iommu=", "intel_iommu="))]
    host = drive.get("host_controller")
    if not host:
        domain = "unavailable: the drive has no PCI function (a loop device)"
    else:
        domain = host["iommu"] or "unavailable: its PCI function is in no IOMMU group (no IOMMU, or it is off)"
    return {"kernel_line": " ".join(words) or "none", "passthrough": "iommu=pt" in words, "drive_domain": domain}


# UEFI's SecureBoot variable (efivarfs: 4 bytes of attributes, then 1 or 0), and the kernel's lockdown (securityfs),
# both mounted at boot (overlay/etc/inittab).
SECURE_BOOT_VAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
LOCKDOWN = "/sys/kernel/security/lockdown"


def secure_boot():
    """Whether the firmware booted the stick with Secure Boot on: a testbed that cannot turn it off runs signed
    code only, and the kernel locks itself down (lockdown())."""
    if not os.path.isdir("/sys/firmware/efi"):
        return "off: booted by BIOS (or a UEFI's legacy mode)"
    value = sysfs.read_bytes(SECURE_BOOT_VAR)
    if value is None or len(value) != 5:
        return "unavailable: UEFI's SecureBoot variable cannot be read (efivarfs not mounted)"
    return "on" if value[4] == 1 else "off"


def lockdown():
    """The kernel's lockdown mode, the bracketed word of "none [integrity] confidentiality": a Secure Boot kernel
    takes integrity, which refuses what would change the running kernel (docs/hardware.md says what)."""
    text = sysfs.read(LOCKDOWN)
    if text is None:
        return "unavailable: no lockdown in this kernel, or securityfs not mounted"
    chosen = [word.strip("[]") for word in text.split() if word.startswith("[")]
    return chosen[0] if chosen else f"unavailable: {text!r}"


def host():
    """What the PC and its software are, whatever the run: kernel, CPU, power state, tool versions, clock. The
    diagnostics zip carries it as the testbed record."""
    uname = os.uname()
    return {
        "kernel": {
            "release": uname.release,
            "version": uname.version,
            "machine": uname.machine,
            "cmdline": redact.command_line(sysfs.read("/proc/cmdline", "unavailable")),
            "secure_boot": secure_boot(),
            "lockdown": lockdown(),
        },
        "cpu": {
            "model": cpu_model(),
            "count": os.cpu_count(),
            "governor": governors(),
            "cstates": cstates(),
            "frequency": frequency(),
            "turbo": turbo(),
            "vulnerabilities": vulnerabilities(),
        },
        "tools": {
            "ssdbench": __version__,
            **{name: tools.version(name) for name in ("fio", "nvme", "hdparm", "smartctl")},
        },
        "python": platform.python_version(),
        # What set the wall clock that the run's times are read from (the appliance: NTP, the lab, the build date).
        "clock": clock.recorded(),
    }


def fingerprint(suite, drive):
    found = host()
    found["kernel"]["iommu"] = iommu(drive, sysfs.read("/proc/cmdline", "unavailable"))
    return {
        **found,
        "suite": {
            "name": suite.name,
            "version": suite.data["version"],
            "sha256": suite.sha256,
            "workload_sha256": suite.workload_sha256,
            "standard": suite.locked,
        },
        "drive": {
            k: drive.get(k)
            for k in (
                "path",
                "model",
                "serial",
                "firmware",
                "capacity_bytes",
                "logical_block_size",
                "physical_block_size",
                "transport",
                "link",
                "host_controller",
                "pcie_path",
                "trim_supported",
                "erase",
            )
        },
        "temperature_source": drive.get("temperature_source")
        or f"unavailable: no sensor found for this {drive['transport']} device (no hwmon, no health log)",
    }
