"""The drive's temperature once a second, and its health log before and after a run."""

import json

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
            return {
                "tool": "nvme smart-log",
                "log": json.loads(text),
                "host_bytes_written": tool_output.nvme_smart_log(text)["host_bytes_written"],
            }
        if drive["transport"] in ("sata", "usb"):
            text = tools.run(["smartctl", "-j", "-x", drive["path"]], timeout=60, ok=None)
            return {
                "tool": "smartctl -x",
                "log": json.loads(text),
                "host_bytes_written": tool_output.smartctl(text)["host_bytes_written"],
            }
    except (SsdbenchError, ValueError) as exc:
        return {"tool": None, "unavailable": str(exc)}
    return {"tool": None, "unavailable": f"a {drive['transport']} device has no health log"}


def written_between(before, after):
    """Host bytes written from one snapshot to the next, or None when either has no counter."""
    a, b = before.get("host_bytes_written"), after.get("host_bytes_written")
    return b - a if a is not None and b is not None else None
