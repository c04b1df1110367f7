"""Storage Bench playback: a trace becomes fio replay jobs, played a part at a time.

Each segment of the trace (IOs that share one queue depth) is one fio job that replays its own iolog with
`replay_no_stall`, so idle time is cut out, at `iodepth` = the segment's queue depth, and logs every IO's
completion latency (clat: from its submission to the kernel to its completion, the time the kernel counts
the drive busy). fio is asked not to measure total and submission latency (`disable_lat`, `disable_slat`),
which would write two more per-IO logs and hold fio's own time before each submission.
`derive.replayed_intervals` turns the logs into busy time.

The Heavy trace's 4 million IOs make about 110 MB of iologs and 130 MB of latency logs: more than a
small stick's data partition holds. So the step's one job file is played in parts of about
PART_IOS IOs, one fio run each on those jobs (`--section`): a part's iologs are written just before it,
and when it ends they and its latency logs are packed with gzip (to about a fifth). Each part's fio JSON
is `fio-NN.json`, written without status documents, since each would list every job of the step (900
jobs: 5 MB a second). The trace itself is not written out: it is generated again from its profile and
seed, and the sha256 of its bytes is checked against the one the suite's workload hash covers.

The traces are in 512 B sectors. On a drive of larger logical blocks (4Kn) each IO that is not in whole
blocks is widened to them, its start rounded down and its end up, so that it still covers every byte the
trace names; the step records how many were.
"""

import gzip
import os
import shutil

from ..errors import SsdbenchError
from ..suites import trace_file, trace_generator, user_traces
from . import fio, plan

DEVICE_NAME = "dut"  # the file name inside the replay iologs; replay_redirect points it at the drive
OPS = {"R": "read", "W": "write"}
PART_IOS = 200_000  # about 12 MB of iologs and latency logs before they are packed


def job_name(k):
    return f"seg{k:04d}"


def replay_job(k, qd, data=plan.HASHED):
    """The fio job that replays segment k of a trace, at the segment's queue depth, with what `data` makes its
    writes: (name, options)."""
    name = job_name(k)
    return name, {
        "read_iolog": f"{name}.replay",
        "replay_no_stall": 1,
        "replay_redirect": f"${{{plan.DUT_VAR}}}",
        "iodepth": qd,
        "stonewall": 1,
        **data.mixed["incompressible"],
        "disable_lat": 1,
        "disable_slat": 1,
        "write_lat_log": name,
        **plan.PER_IO_LOGS,
    }


def _write_replay(path, ios):
    with open(path, "w") as f:
        f.write(f"fio version 2 iolog\n{DEVICE_NAME} add\n{DEVICE_NAME} open\n")
        for op, offset, length in ios:
            f.write(f"{DEVICE_NAME} {OPS[op]} {offset} {length}\n")
        f.write(f"{DEVICE_NAME} close\n")


def widen(ios, block):
    """The IOs in whole logical blocks of `block` bytes: each start rounded down, each end up."""
    out = []
    for op, offset, length in ios:
        start = offset // block * block
        out.append((op, start, -(-(offset + length) // block) * block - start))
    return out


def _widened(trace, block):
    """(trace, figures): the trace in whole logical blocks of `block` bytes, and how many IOs and bytes that
    changed (None: the drive's blocks are the trace's sectors, nothing to change). Counting takes a pass over
    the trace, made only for such drives."""
    if block == plan.SECTOR:
        return trace, None
    ios = widened = added = 0
    for _, seg in trace_file.segments(trace):
        played = widen(seg, block)
        ios += len(seg)
        widened += sum(a != b for a, b in zip(seg, played))
        added += sum(b[2] - a[2] for a, b in zip(seg, played))

    def source():
        for qd, seg in trace_file.segments(trace):
            yield qd, widen(seg, block)

    figures = {"block_bytes": block, "ios": widened, "of_ios": ios, "bytes_added": added} if widened else None
    return trace_file.Trace(trace.meta, source), figures


def prepare(step, out_dir, capacity, suite, data_dir, block=plan.SECTOR):
    """The trace the step plays, as mapped onto a drive of `capacity` bytes in logical blocks of `block`
    bytes, with the job file that replays it and what the step records of it: (trace, job file, info). A
    trace whose bytes are not the ones the suite's workload hash covers is refused. A tester's trace is read
    from the data folder's imported traces."""
    os.makedirs(out_dir, exist_ok=True)
    spec = step.spec
    if "user_trace" in spec:
        trace = user_traces.load(data_dir, spec["user_trace"])
    else:
        trace = trace_generator.generate(spec["profile"], spec["seed"])
    figures, digest = trace_file.measured(trace)
    expected = (suite.traces or {}).get(step.id)
    if expected is not None and digest != expected:
        raise SsdbenchError(
            f"the trace generated here (sha256 {digest[:16]}...) is not the one the suite's workload hash "
            f"covers ({expected[:16]}...): this Python or this ssdbench does not make the locked trace"
        )
    mapped, was_mapped = trace_file.map_to_capacity(trace, capacity)
    jobs = [replay_job(k, qd, step.data) for k, (qd, _) in enumerate(plan.trace_segments(spec))]
    info = {
        **{key: value for key, value in plan.trace_figures(spec).items() if key in ("profile", "seed", "name")},
        "label": trace.label,
        "synthetic": trace.synthetic,
        "sha256": digest,
        "stats": figures,
        "segments": len(jobs),
        "mapped_to_capacity": was_mapped,
    }
    if not trace.synthetic:
        info |= {key: trace.meta[key] for key in ("format", "source", "qd")}
    played, widened = _widened(mapped, block)
    if widened:
        info["widened"] = widened
    return played, plan.job_file(suite, spec, jobs), info


def parts(sizes):
    """The segments' indexes in consecutive parts, each of at least PART_IOS IOs but the last."""
    out, part, ios = [], [], 0
    for k, count in enumerate(sizes):
        part.append(k)
        ios += count
        if ios >= PART_IOS:
            out.append(part)
            part, ios = [], 0
    return out + [part] if part else out


def _pack(out_dir, names):
    """gzip a finished part's iologs and latency logs in place of them."""
    for name in names:
        for plain in [f"{name}.replay", *(f for f in os.listdir(out_dir) if f.startswith(f"{name}_clat."))]:
            path = os.path.join(out_dir, plain)
            if plain.endswith(".gz") or not os.path.exists(path):
                continue
            with open(path, "rb") as src, gzip.open(f"{path}.gz.part", "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst)
            os.replace(f"{path}.gz.part", f"{path}.gz")
            os.remove(path)


def play(trace, job_text, step, out_dir, device, on_tick, should_stop, cpus=None, watch=None):
    """Play the trace part by part (see the module docstring). Returns fio.Outcome: the last part's state
    and error, and one document with the jobs of every part."""
    segments = trace_file.segments(trace)
    sizes = [count for _, count in plan.trace_segments(step.spec)]
    docs, outcome = [], None
    for n, part in enumerate(parts(sizes)):
        names = [job_name(k) for k in part]
        for name in names:
            _, ios = next(segments)
            _write_replay(os.path.join(out_dir, f"{name}.replay"), ios)
        outcome = fio.run(
            job_text, step.id, out_dir, device, on_tick, should_stop, cpus, names, f"fio-{n:02d}", False, watch
        )
        _pack(out_dir, names)
        if outcome.doc is not None:
            docs.append(outcome.doc)
        if outcome.state != "done":
            break
    jobs = [job for doc in docs for job in doc["jobs"]]
    return fio.Outcome(outcome.state, outcome.error, {**docs[-1], "jobs": jobs} if docs else None)


def played(out_dir, step):
    """The share of the trace's IOs in segments that have ended: fio writes a segment's latency log as its
    job ends."""
    sizes = [count for _, count in plan.trace_segments(step.spec)]
    ended = {name[: len(job_name(0))] for name in os.listdir(out_dir) if "_clat." in name}
    return sum(count for k, count in enumerate(sizes) if job_name(k) in ended) / sum(sizes)


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
    with gzip.open(os.path.join(out_dir, f"{name}.replay.gz"), "rt") as f:
        for line in f:
            fields = line.split()
            if fields[0] == DEVICE_NAME and fields[1] in ("read", "write"):
                order.append((fields[1], int(fields[2]), int(fields[3])))
    return order
