"""Storage Bench playback: a trace becomes fio replay jobs that play one after another with no gap between them.

Each segment of the trace (IOs that share one queue depth) is one fio job that replays its own iolog with
`replay_no_stall`, so idle time is cut out, at `iodepth` = the segment's queue depth, and logs every IO's
completion latency (clat: from its submission to the kernel to its completion, the time the kernel counts
the drive busy) with its time on the wall clock (`log_unix_epoch`), from which derive measures the gaps between
segments. fio is asked not to measure total and submission latency (`disable_lat`, `disable_slat`),
which would write two more per-IO logs and hold fio's own time before each submission.
`derive.replayed_intervals` turns the logs into busy time.

The segments do not wait for fio to start each job in turn: fio starts a job only after polling, twice 100 ms,
so 900 segments one after another (`stonewall`) left the drive idle about 0.3 s each. Instead the jobs of a
part start together, as threads of one fio, and set up at once (their iolog read, their buffers made), and
each then waits for the one before it to end through a FIFO of its own (`segNNNN.go`, the handoff module):
fio's own `start_fifo` and `done_fifo` (our patch), well under a millisecond, where a stock fio's `exec_prerun`
and `exec_postrun` start a shell each, a few ms, and only after the job's logs are written. A stock fio's job
waiting in its prerun is inside system(), which ignores SIGINT in all of fio: a part is stopped with SIGTERM,
fio's other clean stop, which ends a wait in start_fifo too.

The Heavy trace's 4 million IOs make about 110 MB of iologs and 130 MB of latency logs: more than a
small stick's data partition holds. So the step's one job file is played in parts of about
PART_IOS IOs, one fio run each on those jobs (`--section`): a part's iologs are written, and its fio started,
as the part two before it ends, while the one before it plays, so that its first job is waiting when that
part's last ends, and takes over from it as the others do. When a
part ends its iologs and latency logs are packed with gzip (to about a fifth). Each part's fio JSON
is `fio-NN.json`, written without status documents, since each would list every job of the step (900
jobs: 5 MB a second). The trace itself is not written out: it is generated again from its profile and
seed, and the sha256 of its bytes is checked against the one the suite's workload hash covers.

The traces are in 512 B sectors. On a drive of larger logical blocks (4Kn) each IO that is not in whole
blocks is widened to them, its start rounded down and its end up, so that it still covers every byte the
trace names; the step records how many were.
"""

import contextlib
import gzip
import os
import shutil
import signal
import subprocess

from ..errors import SsdbenchError
from ..suites import trace_file, trace_generator, user_traces
from . import fio, handoff, plan

DEVICE_NAME = "dut"  # the file name inside the replay iologs; replay_redirect points it at the drive
OPS = {"R": "read", "W": "write"}
PART_IOS = 200_000  # about 12 MB of iologs and latency logs before they are packed
# A part's jobs set up together, each thread with iodepth buffers of its largest IO: at most so many jobs and
# so many bytes of buffers in a part, and three parts at once for a moment (one ending, one playing, the next).
PART_JOBS = 64
PART_BUFFER_BYTES = 128 * 2**20
SHELL_WHY = (
    f"this fio has no start_fifo ({handoff.FIO_PATCH}): each segment's job waits for the one before it, and lets "
    "the next one start, through a shell command (exec_prerun, exec_postrun), a few ms each and only once its logs "
    "are written: gaps that the replay measures and validity rule 7 flags over 1%"
)


def job_name(k):
    return f"seg{k:04d}"


def segment_fifo(k):
    """The FIFO that segment k's job waits on before its first IO."""
    return handoff.fifo(job_name(k))


def handoff_options(k, last, native=True):
    """The options with which segment k's job waits for k - 1 to end and lets k + 1 start (none after the
    `last`): fio's own start_fifo and done_fifo (`native`, our patch), or a stock fio's shell commands."""
    return handoff.options(segment_fifo(k) if k else None, None if last else segment_fifo(k + 1), native)


def handoff_record(native):
    """What the step records of its handoffs: fio's own, or a stock fio's shell commands and why."""
    return handoff.record(native, "exec_prerun, exec_postrun", SHELL_WHY)


def replay_job(k, qd, data=plan.HASHED, last=False, native=True):
    """The fio job that replays segment k of a trace, at the segment's queue depth, with what `data` makes its
    writes, after segment k - 1 and before k + 1 (none after the `last`), handing over as `native` says
    (handoff_options): (name, options)."""
    name = job_name(k)
    options = {
        "read_iolog": f"{name}.replay",
        "replay_no_stall": 1,
        "replay_redirect": f"${{{plan.DUT_VAR}}}",
        "iodepth": qd,
        "thread": 1,
        **data.mixed["incompressible"],
        "disable_lat": 1,
        "disable_slat": 1,
        "write_lat_log": name,
        **plan.PER_IO_LOGS,
        "log_unix_epoch": 1,
        **handoff_options(k, last, native),
    }
    return name, options


def replay_jobs(spec, data=plan.HASHED, native=True):
    """Every replay job of a trace step, in order, its writes made as `data` makes them, handing over as `native`
    says."""
    segments = plan.trace_segments(spec)
    return [replay_job(k, qd, data, k == len(segments) - 1, native) for k, (qd, _) in enumerate(segments)]


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


def prepare(step, out_dir, capacity, suite, data_dir, block=plan.SECTOR, native=True):
    """The trace the step plays, as mapped onto a drive of `capacity` bytes in logical blocks of `block`
    bytes, with the job file that replays it (its handoffs fio's own where `native`, else a stock fio's shell
    commands) and what the step records of it: (trace, job file, info). A
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
    jobs = replay_jobs(spec, step.data, native)
    info = {
        **{key: value for key, value in plan.trace_figures(spec).items() if key in ("profile", "seed", "name")},
        "label": trace.label,
        "synthetic": trace.synthetic,
        "sha256": digest,
        "stats": figures,
        "segments": len(jobs),
        "mapped_to_capacity": was_mapped,
        "handoff": handoff_record(native),
    }
    if not trace.synthetic:
        info |= {key: trace.meta[key] for key in ("format", "source", "qd")}
    played, widened = _widened(mapped, block)
    if widened:
        info["widened"] = widened
    return played, plan.job_file(suite, spec, jobs), info


def parts(segments):
    """The indexes of the segments, each (queue depth, IOs), in consecutive parts: a part ends once it holds
    PART_IOS IOs, PART_JOBS jobs or PART_BUFFER_BYTES of fio's buffers (each job's queue depth times its
    largest IO)."""
    part, ios, buffers = [], 0, 0
    for k, (qd, seg) in enumerate(segments):
        part.append(k)
        ios += len(seg)
        buffers += qd * max((length for _, _, length in seg), default=0)
        if ios >= PART_IOS or len(part) >= PART_JOBS or buffers >= PART_BUFFER_BYTES:
            yield part
            part, ios, buffers = [], 0, 0
    if part:
        yield part


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
        for run in ("prerun", "postrun"):  # a stock fio's files of each command's output: they say nothing
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(out_dir, f"{name}.{run}.txt"))


def play(trace, job_text, step, out_dir, device, on_tick, should_stop, cpus=None, watch=None):
    """Play the trace part by part (see the module docstring), each part's fio started while the one before it
    plays. Returns fio.Outcome: the state and error of the last part that played, and one document with the
    jobs of every part that ended."""
    count = len(plan.trace_segments(step.spec))
    handoffs = handoff.Fifos(out_dir)

    def each_segment():
        for k, (qd, ios) in enumerate(trace_file.segments(trace)):
            _write_replay(os.path.join(out_dir, f"{job_name(k)}.replay"), ios)
            if k + 1 < count:
                handoffs.make(segment_fifo(k + 1))
            yield qd, ios

    def begin(n, part):
        names = [job_name(k) for k in part]
        return names, fio.start(job_text, step.id, out_dir, device, cpus, names, f"fio-{n:02d}", False)

    def stop():
        if should_stop():
            handoffs.stop()  # the jobs still waiting end at once, and fio can stop
            return True
        return False

    docs, outcome, waiting, n = [], None, [], 0
    chunks = parts(each_segment())
    try:
        waiting.append(begin(0, next(chunks)))
        part = next(chunks, None)
        if part is not None:
            waiting.append(begin(1, part))
        while waiting:
            names, proc = waiting.pop(0)
            outcome = fio.follow(proc, out_dir, on_tick, stop, f"fio-{n:02d}", watch, signal.SIGTERM)
            part = next(chunks, None) if outcome.state == "done" else None
            if part is not None:  # while the next part plays, before this one is packed: ready in time for it
                waiting.append(begin(n + 2, part))
            _pack(out_dir, names)
            handoffs.release(handoff.fifo(name) for name in names)
            if outcome.doc is not None:
                docs.append(outcome.doc)
            if outcome.state != "done":
                break
            n += 1
    finally:
        handoffs.stop()
        for names, proc in waiting:  # a part that never began: its jobs read an end of file and end
            try:
                proc.wait(fio.STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            _pack(out_dir, names)
        handoffs.remove()
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
