"""Storage Bench playback: a trace becomes fio replay jobs, and fio's per-IO logs become busy time.

Each segment of the trace (IOs that share one queue depth) is one fio job that replays
its own iolog with `replay_no_stall`, so idle time is cut out, at `iodepth` = the
segment's queue depth. fio cannot log issue times while it replays (read_iolog
overrides write_iolog), so each IO's issue time is rebuilt from fio's replay
discipline: the first `qd` IOs start together, and each completion, in the order of
the per-IO latency log, lets the next IO of the trace start. An IO's interval is its
issue time plus the latency fio measured for it.
"""

import os
from collections import defaultdict, deque

from . import parse, plan, traces
from .errors import SsdbenchError

DEVICE_NAME = "dut"  # the file name inside the replay iologs; replay_redirect points it at the drive
OPS = {"R": "read", "W": "write"}


def _write_replay(path, ios):
    with open(path, "w") as f:
        f.write(f"fio version 2 iolog\n{DEVICE_NAME} add\n{DEVICE_NAME} open\n")
        for op, offset, length in ios:
            f.write(f"{DEVICE_NAME} {OPS[op]} {offset} {length}\n")
        f.write(f"{DEVICE_NAME} close\n")


def prepare(step, out_dir, capacity, suite):
    """Generate the step's trace into its folder, and the fio job file that replays it."""
    os.makedirs(out_dir, exist_ok=True)
    spec = step.spec
    trace = traces.generate(spec["profile"], seed=spec["seed"], scale=spec["scale"])
    trace_path = os.path.join(out_dir, "trace.txt")
    traces.write(trace, trace_path)
    mapped, was_mapped = traces.map_to_capacity(trace, capacity)
    jobs = []
    for k, (qd, ios) in enumerate(traces.segments(mapped)):
        name = f"seg{k:04d}"
        _write_replay(os.path.join(out_dir, f"{name}.replay"), ios)
        jobs.append((name, {"read_iolog": f"{name}.replay", "replay_no_stall": 1,
                            "replay_redirect": f"${{{plan.DUT_VAR}}}", "iodepth": qd, "stonewall": 1,
                            **plan.DATA_OPTIONS["incompressible"], "write_lat_log": name, **plan.PER_IO_LOGS}))
    info = {"profile": spec["profile"], "label": trace.label, "synthetic": trace.synthetic, "seed": spec["seed"],
            "scale": spec["scale"], "file": "trace.txt", "sha256": traces.sha256(trace_path),
            "stats": traces.stats(trace), "segments": len(jobs), "mapped_to_capacity": was_mapped}
    return plan.job_file(suite, spec, jobs), info


def replayed_intervals(out_dir, name, qd):
    """(start µs, end µs, op, bytes) of every IO of one replay job; see the module's docstring."""
    with open(os.path.join(out_dir, f"{name}.replay")) as f:
        issued = [line.split() for line in f if line.startswith(f"{DEVICE_NAME} ")]
    order = [(fields[1], int(fields[2]), int(fields[3])) for fields in issued if fields[1] in ("read", "write")]
    logs = [p for p in os.listdir(out_dir) if p.startswith(f"{name}_lat.") and p.endswith(".log")]
    if len(logs) != 1:
        raise SsdbenchError(f"expected one per-IO latency log for {name}, found {len(logs)}")
    with open(os.path.join(out_dir, logs[0])) as f:
        completions = parse.fio_log(f.read())
    starts = {}  # trace position -> issue time (ns)
    outstanding = defaultdict(deque)  # (op, offset) -> trace positions in flight
    next_io = 0

    def issue(at):
        nonlocal next_io
        op, offset, _ = order[next_io]
        starts[next_io] = at
        outstanding[(op, offset)].append(next_io)
        next_io += 1

    while next_io < min(qd, len(order)):
        issue(0.0)
    intervals = []
    for c in completions:
        key = (("read", "write", "trim")[c.direction], c.offset)
        if not outstanding[key]:
            raise SsdbenchError(f"{logs[0]}: a completion at offset {c.offset} that the replay never issued")
        pos = outstanding[key].popleft()
        end = starts[pos] + c.value
        intervals.append((starts[pos] / 1000, end / 1000, key[0], c.bs))
        if next_io < len(order):
            issue(end)
    return intervals
