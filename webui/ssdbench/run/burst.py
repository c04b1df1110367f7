"""Mixed Burst's background on a fixed clock (methodology 8): the iologs its writers replay.

The background writes its burst at the start of every period, whether or not the drive finished the
last one in time. fio has no option for that clock. thinktime pauses after each burst, so the clock
slips by every burst's own length; a version 3 iolog's timestamps wait from the previous IO's issue,
which slips the same way. A version 2 iolog's `wait` line holds it: fio (3.33 to 3.41, iolog.c) sleeps
until that many milliseconds after it started its jobs, and not at all once that time has passed, so a
period that overran is followed by the next at once. fio's HOWTO calls the value microseconds after the
previous wait; its code, and tests/test_burst.py on the fio in use, say otherwise.

That sleep does not collect finished IOs, so an asynchronous writer would count the idle in the latency
of its last write before it. The background is therefore `iodepth` synchronous writers, each with one
write outstanding: each period's writes are dealt out to them in turn, and each replays its share.
"""

import contextlib
import hashlib
import math
import os
from random import Random

from ..errors import SsdbenchError
from ..suites.locked import parse_size
from . import plan, playback

# The background holds periods for this many times the step's estimated time, as the foreground reads
# slower under the writes than the suite's assumed rate. If it outlasts them all the same, the background
# ends first, fio ends the foreground with it (exitall), and derive refuses the step.
HOLD = 3
# A bound on a replay's writes, against a suite whose bursts and periods would fill the disk (a few hundred MB
# of iolog); standard's replays hold 869,174.
MAX_WRITES = 1 << 23


def writers(step):
    """(latency log prefix, replay file) of each background writer, in job-file order."""
    return [(opts["write_lat_log"], opts["read_iolog"]) for _, opts in step.jobs if "read_iolog" in opts]


def every_ms(step):
    return round(step.spec["background"]["every_s"] * 1000)


def period_count(step):
    return math.ceil(HOLD * step.estimate_s * 1000 / every_ms(step))


def background(step):
    """The background as it runs on this drive: its block size rounded up to whole logical blocks where the
    plan had to (each period still writes its megabytes, in fewer, larger writes)."""
    bg = step.spec["background"]
    fitted = step.adapted.get("background")
    return {**bg, "bs": fitted[1]} if fitted else bg


def _pieces(step):
    """Each writer's replay, piece by piece: per piece, one text for each writer."""
    bg = background(step)
    bs = parse_size(bg["bs"])
    slots = step.size // bs
    if not slots:
        raise SsdbenchError(f"the background's span ({step.size} bytes) holds no {bg['bs']} write on this drive")
    total = period_count(step) * plan.burst_blocks(bg)
    if total > MAX_WRITES:
        raise SsdbenchError(
            f"the background would replay {total} writes ({period_count(step)} periods of {bg['burst']} bytes), "
            f"more than {MAX_WRITES}: shorten the step or its bursts"
        )
    count = len(writers(step))
    rng = Random(bg["seed"])
    dev = playback.DEVICE_NAME
    yield [f"fio version 2 iolog\n{dev} add\n{dev} open\n"] * count
    for period in range(period_count(step)):
        due_ms = plan.CLOCK_START_S * 1000 + period * every_ms(step)
        shares = [[f"{dev} wait {due_ms} 0\n"] for _ in range(count)]
        for n in range(plan.burst_blocks(bg)):
            # random() alone: the one method whose sequence Python keeps from version to version
            shares[n % count].append(f"{dev} write {step.offset + int(rng.random() * slots) * bs} {bs}\n")
        yield ["".join(share) for share in shares]
    yield [f"{dev} close\n"] * count


def replay_digests(step, out_dir=None):
    """The sha256 of each writer's replay, by file name; with `out_dir`, the replays are written there."""
    names = [name for _, name in writers(step)]
    digests = [hashlib.sha256() for _ in names]
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(open(os.path.join(out_dir, n), "w")) for n in names] if out_dir else []
        for texts in _pieces(step):
            for digest, text in zip(digests, texts):
                digest.update(text.encode())
            for f, text in zip(files, texts):
                f.write(text)
    return {name: digest.hexdigest() for name, digest in zip(names, digests)}


def prepare(step, out_dir):
    """Write the writers' replays into the step's folder; what they hold, for the step's record."""
    os.makedirs(out_dir, exist_ok=True)
    bg = background(step)
    return {
        "periods": period_count(step),
        "every_s": bg["every_s"],
        "first_due_s": plan.CLOCK_START_S,
        "writes_per_period": plan.burst_blocks(bg),
        "span": {"offset": step.offset, "size": step.size},
        "seed": bg["seed"],
        "replays": replay_digests(step, out_dir),
    }


def planned_writes(path):
    """(period, offset, length) of each write of a writer's replay, in order: a period starts at each wait."""
    writes, period = [], -1
    with open(path) as f:
        for line in f:
            fields = line.split()
            if fields[1] == "wait":
                period += 1
            elif fields[1] == "write":
                writes.append((period, int(fields[2]), int(fields[3])))
    return writes
