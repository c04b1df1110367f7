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


def fingerprint(suite, drive):
    uname = os.uname()
    return {
        "kernel": {
            "release": uname.release,
            "version": uname.version,
            "machine": uname.machine,
            "cmdline": redact.command_line(sysfs.read("/proc/cmdline", "unavailable")),
        },
        "cpu": {"model": cpu_model(), "count": os.cpu_count(), "governor": governors(), "cstates": cstates()},
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
                "trim_supported",
                "erase",
            )
        },
        "temperature_source": drive.get("temperature_source")
        or f"unavailable: no sensor found for this {drive['transport']} device (no hwmon, no health log)",
    }
