"""The environment fingerprint of a run: kernel, CPU, power state, tool versions, suite, drive."""

import glob
import os
import platform

from .. import __version__
from ..system import redact, sysfs, tools


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
    """Each CPU's clock as the run begins: `cpu MHz` in /proc/cpuinfo (on x86 the kernel's measure of the clock
    the CPU ran at, from its APERF and MPERF counters), and the most cpufreq lets it reach."""
    mhz = [float(line.split(":", 1)[1]) for line in sysfs.read("/proc/cpuinfo", "").splitlines() if "cpu MHz" in line]
    found = {sysfs.read(p) for p in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/cpuinfo_max_freq")}
    found.discard(None)
    return {
        "mhz": mhz or "unavailable: /proc/cpuinfo gives no cpu MHz",
        "max_mhz": sorted(int(k) / 1000 for k in found) or "unavailable: no cpufreq driver (a VM, or firmware)",
    }


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


def fingerprint(suite, drive):
    uname = os.uname()
    cmdline = sysfs.read("/proc/cmdline", "unavailable")
    return {
        "kernel": {
            "release": uname.release,
            "version": uname.version,
            "machine": uname.machine,
            "cmdline": redact.command_line(cmdline),
            "iommu": iommu(drive, cmdline),
        },
        "cpu": {
            "model": cpu_model(),
            "count": os.cpu_count(),
            "governor": governors(),
            "cstates": cstates(),
            "frequency": frequency(),
            "turbo": turbo(),
        },
        "tools": {
            "ssdbench": __version__,
            **{name: tools.version(name) for name in ("fio", "nvme", "hdparm", "smartctl")},
        },
        "python": platform.python_version(),
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
                "trim_supported",
                "erase",
            )
        },
        "temperature_source": drive.get("temperature_source")
        or f"unavailable: no sensor found for this {drive['transport']} device (no hwmon, no health log)",
    }
