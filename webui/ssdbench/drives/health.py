"""The drive's temperature once a second, and its health log before and after a run."""

from ..errors import SsdbenchError
from ..system import tools
from . import tool_output


def read_temperature(source):
    """Degrees Celsius from a drive's temperature source ('hwmon:PATH', 'nvme-smart-log:DEV',
    'smartctl:DEV'), or None when it cannot be read this second."""
    if not source:
        return None
    kind, _, target = source.partition(":")
    try:
        if kind == "hwmon":
            with open(target) as f:
                return int(f.read().strip()) / 1000.0
        if kind == "nvme-smart-log":
            return tool_output.nvme_smart_log(tools.run(["nvme", "smart-log", target, "-o", "json"], timeout=5))[
                "temperature_c"
            ]
        if kind == "smartctl":
            return tool_output.smartctl(tools.run(["smartctl", "-j", "-A", target], timeout=5, ok=None))[
                "temperature_c"
            ]
    except (OSError, ValueError, SsdbenchError):
        return None
    return None


def snapshot(drive):
    """The full health log as the tools print it, or why there is none."""
    try:
        if drive["transport"] == "nvme":
            text = tools.run(["nvme", "smart-log", drive.get("controller", drive["path"]), "-o", "json"], timeout=30)
            return from_log("nvme smart-log", tool_output.nvme_smart_log(text))
        if drive["transport"] in ("sata", "usb", "sas"):
            text = tools.run(["smartctl", "-j", "-x", drive["path"]], timeout=60, ok=None)
            return from_log("smartctl -x", tool_output.smartctl(text))
    except (SsdbenchError, ValueError) as exc:
        return {"tool": None, "unavailable": str(exc)}
    return {"tool": None, "unavailable": f"a {drive['transport']} device has no health log"}


def from_log(tool, parsed):
    """A snapshot of a health log as tool_output parsed it. `host_writes` says which counter gave the host
    bytes written and in what unit, so a reader can check the figure against the raw value."""
    return {
        "tool": tool,
        "log": parsed["raw"],
        "host_bytes_written": parsed["host_bytes_written"],
        "host_writes": parsed["host_writes"],
        "thermal": parsed["thermal"],
    }


def thermal_counters(drive):
    """The drive's counters of time spent hot as its health log holds them now (tool_output.NVME_THERMAL, ATA's
    Time in Over-Temperature), in the shape thermal_between compares: read before and after each step."""
    found = snapshot(drive)
    return {key: found[key] for key in ("tool", "thermal", "unavailable") if key in found}


def written_between(before, after):
    """Host bytes written from one snapshot to the next, or None when either has no counter or its counter's
    unit is unknown."""
    a, b = before.get("host_bytes_written"), after.get("host_bytes_written")
    return b - a if a is not None and b is not None else None


def thermal_between(before, after):
    """How the drive's counters of time spent hot (tool_output.NVME_THERMAL, ATA's Time in Over-Temperature)
    moved over a run: {"counters": {name: [before, after]}, "rose": [the names that rose]}, or
    {"unavailable": why} when one of the snapshots has none to compare."""
    if not before or not after:
        return {"unavailable": "the run failed, so no health log was read after it"}
    why = after.get("unavailable") or before.get("unavailable")
    if why:
        return {"unavailable": f"no health log: {why}"}
    a, b = before.get("thermal") or {}, after.get("thermal") or {}
    shared = [name for name in a if name in b]
    if not shared:
        return {"unavailable": f"the drive's {after.get('tool')} log holds no counter of time spent hot"}
    return {"counters": {name: [a[name], b[name]] for name in shared}, "rose": [n for n in shared if b[n] > a[n]]}
