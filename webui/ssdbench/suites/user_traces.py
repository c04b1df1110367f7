"""A tester's own traces: imported once into the data folder, listed, and played by a suite built around
each, which is never a standard one.

Each imported trace is two files in DATA/traces/: NAME.trace, in the ssdbench trace format (trace_file),
and NAME.json, what the lists show of it (format, source file, sha256, figures, segments). A run names
the trace by its name and its sha256, and plays it only if the file still has that sha256.
"""

import json
import os
import re
import time

from ..errors import SsdbenchError
from . import locked, trace_file, trace_import

FOLDER = "traces"
FORMATS = {
    "blktrace": lambda path, qd: trace_import.import_blkparse(path),
    "fio-iolog": trace_import.import_fio_iolog,
    "csv": lambda path, qd: trace_import.import_msr_csv(path),
}
SUITE_NAME = "user-trace"
# The steps of the standard suite that a user trace is played after, as standard plays its own: the purge,
# then the sequential fill (the drive filled, as a user's drive is).
BEFORE = ("purge", "fill-trace")


def folder(data_dir):
    return os.path.join(data_dir, FOLDER)


def name_from(path):
    """A trace name from a file name: lower-case letters, digits and dashes."""
    stem = os.path.splitext(os.path.basename(str(path)))[0]
    return re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")[:64] or "trace"


def _write_json(path, data):
    with open(f"{path}.part", "w") as f:
        json.dump(data, f, indent=1)
    os.replace(f"{path}.part", path)


class TraceExists(SsdbenchError):
    """A trace of that name is already imported."""


def import_file(data_dir, path, fmt, name=None, qd=1, source=None):
    """Import a trace file of `fmt` (a FORMATS key) as `name` (by default from the file's name); returns
    its entry. `source` names the file in the record when `path` is a temporary copy of it. A malformed
    file is refused with the line at fault; nothing is kept of it."""
    if fmt not in FORMATS:
        raise SsdbenchError(f"unknown trace format {fmt!r}; the formats: {', '.join(FORMATS)}")
    name = name_from(source or path) if name is None else name
    if not locked.valid_name(name):
        raise SsdbenchError(f"trace name {name!r}: use lower-case letters, digits and dashes, 64 at most")
    os.makedirs(folder(data_dir), exist_ok=True)
    target = os.path.join(folder(data_dir), f"{name}.trace")
    exists = TraceExists(f"a trace named {name} is already imported; give it another name")
    if os.path.exists(target):
        raise exists
    trace = FORMATS[fmt](str(path), qd)
    trace.meta["source"] = os.path.basename(str(source or path))
    try:
        trace_file.write(trace, target, replace=False)  # of two imports under one name at once, one is kept
    except FileExistsError:
        raise exists from None
    try:
        figures, digest = trace_file.measured(trace)  # the bytes just written, from the trace in memory
        entry = {
            "name": name,
            "label": trace.label,
            "format": trace.meta["format"],
            "source": trace.meta["source"],
            "qd": trace.meta["qd"],
            "sha256": digest,
            "imported_at": time.time(),
            "stats": figures,
            "segments": [[qd, len(ios)] for qd, ios in trace_file.segments(trace)],
        }
        _write_json(os.path.join(folder(data_dir), f"{name}.json"), entry)
    except BaseException:
        os.remove(target)
        raise
    return entry


def entries(data_dir):
    """(every imported trace's entry by name, and a line for each record that cannot be read)."""
    try:
        names = sorted(f[: -len(".json")] for f in os.listdir(folder(data_dir)) if f.endswith(".json"))
    except FileNotFoundError:
        return [], []
    found, problems = [], []
    for name in names:
        try:
            found.append(entry(data_dir, name))
        except (SsdbenchError, ValueError) as exc:
            problems.append(f"trace {name}: its record {name}.json cannot be read ({exc})")
    return found, problems


def entry(data_dir, name):
    if not locked.valid_name(name):
        raise SsdbenchError(f"no imported trace named {name!r}")
    try:
        with open(os.path.join(folder(data_dir), f"{name}.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        raise SsdbenchError(f"no imported trace named {name!r}; import it with `ssdbench trace import`") from None


def load(data_dir, spec):
    """The trace a step's `user_trace` names, checked: its file must still have the sha256 the step names."""
    path = os.path.join(folder(data_dir), f"{spec['name']}.trace")
    if not os.path.exists(path) or trace_file.sha256(path) != spec["sha256"]:
        raise SsdbenchError(f"the imported trace {spec['name']} is gone or changed since the run was planned")
    return trace_file.read(path)


def suite(data_dir, name):
    """The suite that plays an imported trace: the standard suite's fio settings, its purge and its fill, then
    the trace. It is not locked: its results are non-standard."""
    e = entry(data_dir, name)
    standard = locked.load("standard", allow_non_standard=True)
    steps = {step["id"]: step for step in standard.steps}
    s = e["stats"]
    data = {
        "format": locked.FORMAT,
        "name": SUITE_NAME,
        "version": 1,
        "title": f"The tester's own trace {name} (not a standard suite)",
        "comparable": False,
        "fio": standard.data.get("fio", {}),
        "estimate": standard.data.get("estimate", {}),
        "idle": standard.data["idle"],
        "steps": [steps[key] for key in BEFORE]
        + [
            {
                "id": "trace",
                "kind": "trace",
                "title": f"Trace playback: {name}, the tester's own trace ({e['format']}), not a standard trace",
                "cooldown": True,
                "user_trace": {
                    "name": name,
                    "sha256": e["sha256"],
                    "label": e["label"],
                    "reads": s["reads"],
                    "writes": s["writes"],
                    "bytes_read": s["bytes_read"],
                    "bytes_written": s["bytes_written"],
                    "segments": e["segments"],
                },
            }
        ],
    }
    locked.validate(data, f"the suite of trace {name}")
    return locked.Suite(SUITE_NAME, data, locked.suite_hash(data), False)
