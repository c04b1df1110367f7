"""Storage Bench playback: a trace becomes fio replay jobs.

Each segment of the trace (IOs that share one queue depth) is one fio job that replays
its own iolog with `replay_no_stall`, so idle time is cut out, at `iodepth` = the
segment's queue depth, and logs every IO's latency. `derive.replayed_intervals` turns
those logs into busy time.

The traces are in 512 B sectors. On a drive of larger logical blocks (4Kn) each IO that is
not in whole blocks is widened to them, its start rounded down and its end up, so that it
still covers every byte the trace names; the step records how many were.
"""

import os

from ..suites import trace_file, trace_generator
from . import plan

DEVICE_NAME = "dut"  # the file name inside the replay iologs; replay_redirect points it at the drive
OPS = {"R": "read", "W": "write"}


def _write_replay(path, ios):
    with open(path, "w") as f:
        f.write(f"fio version 2 iolog\n{DEVICE_NAME} add\n{DEVICE_NAME} open\n")
        for op, offset, length in ios:
            f.write(f"{DEVICE_NAME} {OPS[op]} {offset} {length}\n")
        f.write(f"{DEVICE_NAME} close\n")


def replay_job(k, qd):
    """The fio job that replays segment k of a trace, at the segment's queue depth: (name, options)."""
    name = f"seg{k:04d}"
    return name, {
        "read_iolog": f"{name}.replay",
        "replay_no_stall": 1,
        "replay_redirect": f"${{{plan.DUT_VAR}}}",
        "iodepth": qd,
        "stonewall": 1,
        **plan.DATA_OPTIONS["incompressible"],
        "write_lat_log": name,
        **plan.PER_IO_LOGS,
    }


def widen(ios, block):
    """The IOs in whole logical blocks of `block` bytes: each start rounded down, each end up."""
    out = []
    for op, offset, length in ios:
        start = offset // block * block
        out.append((op, start, -(-(offset + length) // block) * block - start))
    return out


def prepare(step, out_dir, capacity, suite, block=plan.SECTOR):
    """Generate the step's trace into its folder, and the fio job file that replays it on a drive of
    `capacity` bytes in logical blocks of `block` bytes."""
    os.makedirs(out_dir, exist_ok=True)
    spec = step.spec
    trace = trace_generator.generate(spec["profile"], seed=spec["seed"], scale=spec["scale"])
    trace_path = os.path.join(out_dir, "trace.txt")
    trace_file.write(trace, trace_path)
    mapped, was_mapped = trace_file.map_to_capacity(trace, capacity)
    jobs, count, widened, added = [], 0, 0, 0
    for k, (qd, ios) in enumerate(trace_file.segments(mapped)):
        played = widen(ios, block)
        count += len(ios)
        widened += sum(a != b for a, b in zip(ios, played))
        added += sum(b[2] - a[2] for a, b in zip(ios, played))
        jobs.append(replay_job(k, qd))
        _write_replay(os.path.join(out_dir, f"{jobs[-1][0]}.replay"), played)
    info = {
        "profile": spec["profile"],
        "label": trace.label,
        "synthetic": trace.synthetic,
        "seed": spec["seed"],
        "scale": spec["scale"],
        "file": "trace.txt",
        "sha256": trace_file.sha256(trace_path),
        "stats": trace_file.stats(trace),
        "segments": len(jobs),
        "mapped_to_capacity": was_mapped,
    }
    if widened:
        info["widened"] = {"block_bytes": block, "ios": widened, "of_ios": count, "bytes_added": added}
    return plan.job_file(suite, spec, jobs), info


def adaptation_notes(info):
    """What fitting the trace to the drive's logical block changed, in sentences (none: nothing)."""
    w = info.get("widened")
    if not w:
        return []
    return [
        f"{w['ios']} of {w['of_ios']} trace IOs widened to whole {w['block_bytes']} B blocks (start rounded down, "
        f"end up): {w['bytes_added']} bytes more in all"
    ]


def replay_order(out_dir, name):
    """The (op, offset, length) of a replay job's IOs, in the order its iolog gives fio."""
    order = []
    with open(os.path.join(out_dir, f"{name}.replay")) as f:
        for line in f:
            fields = line.split()
            if fields[0] == DEVICE_NAME and fields[1] in ("read", "write"):
                order.append((fields[1], int(fields[2]), int(fields[3])))
    return order
