"""The room a run's results take in the data folder, estimated from its plan, and the check that refuses a
run that would not fit (docs/user-guide.md, "Room for the results").

What a run leaves grows with fio's output: its JSON, one document a second that lists every job of the
step, its per-second logs, and for sweep, trace and Mixed Burst steps a line for every IO. The model counts each
from the plan. Its sizes were measured on the suites' own output (fio 3.33, smoke on a loop device) and
rounded up. The times are the plan's estimates, which assume the suite's rates: the whole is doubled, for a
drive at half those rates (or for fio's JSON growing a field).
"""

import math

from ..errors import SsdbenchError
from ..human import size
from ..results import store
from ..suites.locked import parse_size
from . import burst, plan, playback

KiB, MiB = 1024, 1024 * 1024
JSON_PER_JOB = 8 * KiB  # one job in one of fio's JSON documents: 5.7 to 7.0 KB measured
LOG_PER_SECOND = 6 * KiB  # a logged job's per-second logs, per direction: its latency histogram line is 5.6 KB
START_S = 0.25  # fio's start and end of each job, beyond the plan's estimate of its I/O
POINT = 64  # a stored point of a series (a per-second value, a temperature), with its index
SERIES_PER_DIRECTION = 5  # the per-second series a logged job stores: iops, bw, lat, clat, slat
TEMPERATURE_SERIES = 2  # the temperature, and the seconds above the warning temperature
TRACE_PER_IO = 20  # a played IO's replay line and latency log line, gzipped: 16 B measured (5.8 + 10.2)
TRACE_UNPACKED_PER_IO = 72  # the same before a part is packed: 66 B measured (the log's times on the wall clock)
BURST_PER_WRITE = 32  # a line of the background's replays, for every write they hold: 26 to 30 B measured
BURST_PER_DONE = 70  # a write's two latency log lines, for each one done: 62 B measured
BURST_PER_READ = 200  # a foreground read's iolog line and its three latency log lines: 175 B measured
SWEEP_PER_IO = 48  # a sweep's IO's latency log line: 36 to 44 B, as its offset and latency grow
BLOCK = 4 * KiB  # a file's last block, partly used
STEP_FILES = 3  # the job file, fio.json, fio.stderr
LOGS_PER_JOB = 7  # bw, iops, lat, clat, slat, clat_hist (and one to spare)
MARGIN = 2  # a drive at half the suite's assumed rates takes twice the time
RUN_BYTES = 4 * MiB  # the run's own JSON files, and SQLite's write-ahead log, which grows to 4 MB between checkpoints
MIXED = ("rw", "randrw")


def _directions(spec):
    return 2 if spec.get("rw") in MIXED else 1


def step_bytes(step):
    """What one step of a plan leaves, by the model, before the margin."""
    if step.kind in ("purge", "trim"):
        return step.estimate_s * TEMPERATURE_SERIES * POINT + BLOCK
    if step.kind == "trace":
        return _trace_bytes(step)
    jobs = len(step.jobs)
    seconds = step.estimate_s + START_S * jobs
    total = (math.ceil(seconds) + 1) * jobs * JSON_PER_JOB + seconds * TEMPERATURE_SERIES * POINT
    files = STEP_FILES
    if step.kind == "fio":
        directions = _directions(step.spec)
        total += seconds * directions * (LOG_PER_SECOND + SERIES_PER_DIRECTION * POINT)
        files += LOGS_PER_JOB
    elif step.kind == "burst":
        bg, fg = step.spec["background"], step.spec["foreground"]
        periods = burst.period_count(step)
        done = min(periods, math.ceil(seconds / bg["every_s"]))
        total += plan.burst_blocks(bg) * (periods * BURST_PER_WRITE + done * BURST_PER_DONE)
        total += fg["bursts"] * plan.burst_blocks(fg) * BURST_PER_READ
        files += 4 * jobs  # each job's iolog and latency logs
    elif step.kind == "sweep":
        ios = sum(int(opts["io_size"]) // parse_size(opts["bs"]) for _, opts in step.jobs)
        total += ios * SWEEP_PER_IO
        files += jobs  # each pass's latency log
    return total + files * BLOCK


def _trace_bytes(step):
    """A trace step, played a part at a time (playback): one JSON document per part, listing each segment's
    job once; each IO's replay and latency lines, packed; and, as a part ends, its files and the next two
    parts' unpacked."""
    ios, segments = step.trace["reads"] + step.trace["writes"], step.trace["segments"]
    parts = max(math.ceil(ios / playback.PART_IOS), math.ceil(segments / playback.PART_JOBS))
    total = segments * JSON_PER_JOB + ios * TRACE_PER_IO + min(ios, 3 * playback.PART_IOS) * TRACE_UNPACKED_PER_IO
    total += step.estimate_s * TEMPERATURE_SERIES * POINT
    return total + (2 * segments + 2 * parts + 1) * BLOCK  # each segment's two logs, each part's JSON and stderr


def results_bytes(steps):
    """The room a run's folder and its rows in the database take, by the model, with the margin."""
    return math.ceil(MARGIN * sum(step_bytes(s) for s in steps))


def needed_bytes(steps):
    """The free space a run needs before it starts: its results, its own files and the database's log, and
    the reserve the runner holds while it runs."""
    return results_bytes(steps) + RUN_BYTES + store.RESERVE_BYTES


def check(data_dir, suite, steps):
    """Refuse a run whose results would not fit in the data folder's free space."""
    need, free = needed_bytes(steps), store.free_bytes(data_dir)
    if need > free:
        raise SsdbenchError(
            f"not enough room for the results: {suite.name} on this drive needs {size(need)} "
            f"and the data partition ({data_dir}) has {size(free)} free; delete old runs (export them first) "
            "or use a larger stick"
        )
