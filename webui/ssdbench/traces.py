"""Storage Bench traces: our trace format, the synthetic profiles, and importers for user traces.

The format (version 1) is plain text, one IO a line, after a header of `# key: value` lines::

    # ssdbench trace 1
    # label: synthetic, modelled on the AnandTech Storage Bench 2011 Heavy workload (not the original trace)
    # profile: heavy-2011
    # seed: 2011
    # scale: 1.0
    # footprint: 68719476736
    # synthetic: true
    # standard: true
    1 W 3284107264 4096
    1 W 3284111360 16384

Each IO line is `<qd> <R|W> <offset bytes> <length bytes>`. `qd` is the queue depth the IO
was issued at (1: nothing else was outstanding). Offsets and lengths are multiples of 512,
and every IO lies inside `footprint`, the LBA span from LBA 0 that the trace needs. Other
`#` lines are comments. A **segment** is a run of consecutive IOs with one qd; playback
runs each as one fio job at iodepth=qd. The file bytes are the trace's identity (`sha256`).

The profiles (PROFILES) reproduce the figures the 2011 articles publish for the Heavy
workload: 2,168,893 reads, 1,783,447 writes, 106.32 GB (10^9 bytes) written; by IO count
4 KiB 28%, 16 KiB 10%, 32 KiB 10%, 64 KiB 4%; 42% of IOs sequential (offset == the previous
IO's end); average queue depth 4.625 (mean over IOs of qd) with 59% of IOs at qd 1.
Everything else is our choice, stated here and in the table:

- The other 48% of IO sizes: 512 B 4%, 256 KiB 3%, 512 KiB 2%, 1 MiB 1%, and the remaining
  38% split between 8 KiB and 128 KiB so that the writes come within one IO of the bytes
  written (Heavy: 8 KiB 22.6%, 128 KiB 15.4%; 106,319,987,712 bytes). Reads and writes each follow the whole mix, so
  Heavy reads 129.3 GB (the articles give no read volume).
- Queue depths besides qd 1: 4 at 10%, 8 at 8%, 16 at 5%, and qd 2 and 32 sharing the rest
  so that the mean comes out right (Heavy: qd 2 11.9%, qd 32 6.1%).
- Footprint: Heavy 64 GiB, Light 32 GiB, smoke 32 MiB. A drive smaller than that gets the
  trace mapped onto it (`map_to_capacity`).
- Non-sequential IOs start on a 4 KiB boundary: 75% of them "pseudo-random", within 8 MiB
  of the previous IO's end, the rest anywhere in the footprint (the article: most random IO
  is pseudo-random). The first IO of each segment is never sequential.
- Segments alternate between qd 1 and a higher qd: at most 450 of each (900 in all), about
  one pair per 4000 IOs, and never fewer than one segment per queue depth.
- Light ("the same shape but far less write-intensive"; the articles give no figures):
  1,600,000 reads, 400,000 writes, 12.00 GB written (three times the 4 GB of the 2010
  suite), the same published size shares, qd mix and sequential share; other sizes 512 B 4%,
  256 KiB 1%, 512 KiB 0.5%, with 8 KiB (32.3%) and 128 KiB (10.2%) balancing; 48.0 GB read.
- smoke: Heavy at a thousandth (2,169 reads, 1,783 writes, 106.32 MB written) in 32 MiB.

`scale` multiplies the IO counts and bytes written; the footprint stays. The generator
draws only from `random.Random(seed).random()`, the one method whose sequence Python
guarantees across versions, so a profile, seed and scale always give the same bytes.

User traces (blkparse text, fio iologs, MSR-Cambridge CSV) are imported into the same
structure and marked `synthetic: false`, `standard: false`; `load` tells the formats apart.
"""

import hashlib
import heapq
import math
import os
import re
import statistics
from array import array
from random import Random

from .errors import SsdbenchError

VERSION = 1
KiB, MiB, GiB = 1024, 1024**2, 1024**3
SECTOR = 512
_SLOT = 4 * KiB       # non-sequential IOs start on this boundary
_NEAR = 8 * MiB       # how far a pseudo-random IO lands from the previous IO's end
_PSEUDO = 0.75        # share of non-sequential IOs that are pseudo-random
_MAX_PAIRS = 450      # qd-1 segments, and as many at higher qd
_IOS_PER_PAIR = 4000
_MAX_SEGMENTS = 1000  # imported traces
_MAX_QD = 32

_PUBLISHED_SIZES = {4 * KiB: 0.28, 16 * KiB: 0.10, 32 * KiB: 0.10, 64 * KiB: 0.04}
_HEAVY_SIZES = {**_PUBLISHED_SIZES, 512: 0.04, 256 * KiB: 0.03, 512 * KiB: 0.02, 1 * MiB: 0.01}
_QDS = {1: 0.59, 4: 0.10, 8: 0.08, 16: 0.05}

# Each profile: op counts and bytes written; `sizes` fixes shares of IOs by length and
# `size_balance` takes the rest, split to hit bytes_written; likewise `qd`, `qd_balance`, `avg_qd`.
PROFILES = {
    "heavy-2011": {
        "label": "synthetic, modelled on the AnandTech Storage Bench 2011 Heavy workload (not the original trace)",
        "seed": 2011, "reads": 2_168_893, "writes": 1_783_447, "bytes_written": 106_320_000_000,
        "sizes": _HEAVY_SIZES, "size_balance": (8 * KiB, 128 * KiB),
        "sequential": 0.42, "qd": _QDS, "qd_balance": (2, 32), "avg_qd": 4.625, "footprint": 64 * GiB,
    },
    "light-2011": {
        "label": "synthetic, modelled on the AnandTech Storage Bench 2011 Light workload (not the original trace; "
                 "our own figures)",
        "seed": 2011, "reads": 1_600_000, "writes": 400_000, "bytes_written": 12_000_000_000,
        "sizes": {**_PUBLISHED_SIZES, 512: 0.04, 256 * KiB: 0.01, 512 * KiB: 0.005},
        "size_balance": (8 * KiB, 128 * KiB),
        "sequential": 0.42, "qd": _QDS, "qd_balance": (2, 32), "avg_qd": 4.625, "footprint": 32 * GiB,
    },
    "smoke": {
        "label": "synthetic smoke-test trace: Heavy 2011 shape at 1/1000 size; not comparable",
        "seed": 2011, "reads": 2_169, "writes": 1_783, "bytes_written": 106_320_000,
        "sizes": _HEAVY_SIZES, "size_balance": (8 * KiB, 128 * KiB),
        "sequential": 0.42, "qd": _QDS, "qd_balance": (2, 32), "avg_qd": 4.625, "footprint": 32 * MiB,
    },
}

_META_TYPES = {"seed": int, "scale": float, "footprint": int, "mapped_from": int, "synthetic": bool,
               "standard": bool}


class Trace:
    """A trace's metadata and its segments.

    The IOs are produced afresh on every pass (regenerated, or reread from the file)
    rather than kept: the full Heavy trace as Python tuples would take about half a GB.
    """

    def __init__(self, meta, source):
        self.meta = meta
        self._source = source  # a function that returns a new iterator of (qd, ios)

    label = property(lambda self: self.meta["label"])
    synthetic = property(lambda self: self.meta["synthetic"])
    standard = property(lambda self: self.meta["standard"])
    footprint = property(lambda self: self.meta["footprint"])


def segments(trace):
    """The segments of a trace in order, each (qd, [(op, offset, length), ...]), one at a time."""
    return trace._source()


# --- the format ---------------------------------------------------------------------------

def _show(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return " ".join(str(value).split())  # one line, whatever a file name holds


def write(trace, path):
    """Write a trace, streamed segment by segment; the file appears whole or not at all."""
    part = f"{os.fspath(path)}.part"
    f = open(part, "w", encoding="utf-8", newline="\n")
    try:
        with f:
            f.write(f"# ssdbench trace {VERSION}\n")
            for key, value in trace.meta.items():
                f.write(f"# {key}: {_show(value)}\n")
            for qd, ios in segments(trace):
                f.write("".join([f"{qd} {op} {offset} {length}\n" for op, offset, length in ios]))
    except BaseException:
        os.remove(part)
        raise
    os.replace(part, path)


def _open_text(path):
    try:
        return open(path, encoding="utf-8")
    except OSError as e:
        raise SsdbenchError(f"cannot read trace {path}: {e.strerror}") from None


def _lines(path):
    """(line number, line) of a text file; a binary file is an error, not a traceback."""
    with _open_text(path) as f:
        try:
            yield from enumerate(f, 1)
        except UnicodeDecodeError:
            raise SsdbenchError(f"{path}: not a text file") from None


def _number(text, where, what):
    if not (text.isascii() and text.isdigit()):
        raise SsdbenchError(f"{where}: {what} {text!r} is not a whole number >= 0")
    return int(text)


def _header(path):
    meta, first = {}, True
    for n, line in _lines(path):
        where = f"{path}, line {n}"
        if first:
            words = line.split()
            if words[:3] != ["#", "ssdbench", "trace"]:
                raise SsdbenchError(f"{where}: not an ssdbench trace (expected '# ssdbench trace {VERSION}')")
            if words[3:] != [str(VERSION)]:
                raise SsdbenchError(f"{where}: unknown trace version {' '.join(words[3:])!r} "
                                    f"(this ssdbench reads version {VERSION})")
            first = False
            continue
        if not line.startswith("#"):
            break
        key, sep, value = line[1:].strip().partition(": ")
        if not sep:
            continue  # a comment
        kind = _META_TYPES.get(key, str)
        if kind is bool:
            if value not in ("true", "false"):
                raise SsdbenchError(f"{where}: {key} must be true or false, not {value!r}")
            meta[key] = value == "true"
        elif kind is float:
            try:
                meta[key] = float(value)
            except ValueError:
                raise SsdbenchError(f"{where}: {key} {value!r} is not a number") from None
        else:
            meta[key] = _number(value, where, key) if kind is int else value
    if first:
        raise SsdbenchError(f"{path}: empty file, not an ssdbench trace")
    if "footprint" not in meta:
        raise SsdbenchError(f"{path}: the header has no 'footprint' line")
    return meta


def _ios(path, footprint):
    """(qd, op, offset, length) of every IO line of a trace file, checked."""
    for n, line in _lines(path):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        where = f"{path}, line {n}"
        if len(fields) != 4:
            raise SsdbenchError(f"{where}: expected '<qd> <R|W> <offset> <length>', got {line.strip()!r}")
        qd, op, offset, length = fields
        qd = _number(qd, where, "qd")
        offset = _number(offset, where, "offset")
        length = _number(length, where, "length")
        if qd < 1:
            raise SsdbenchError(f"{where}: qd must be at least 1")
        if op not in ("R", "W"):
            raise SsdbenchError(f"{where}: op {op!r} is not R or W")
        if offset % SECTOR or length % SECTOR or not length:
            raise SsdbenchError(f"{where}: offset and length must be multiples of {SECTOR}, and length > 0")
        if offset + length > footprint:
            raise SsdbenchError(f"{where}: the IO ends at {offset + length}, past the footprint {footprint}")
        yield qd, op, offset, length


def _runs(ios):
    """Group (qd, op, offset, length) into segments: maximal runs of one qd."""
    qd, run = None, []
    for q, op, offset, length in ios:
        if q != qd and run:
            yield qd, run
            run = []
        qd = q
        run.append((op, offset, length))
    if run:
        yield qd, run


def read(path):
    """Read a trace file. Every line is checked here, so a bad file fails now, naming the line."""
    meta = _header(path)
    if not sum(1 for _ in _ios(path, meta["footprint"])):
        raise SsdbenchError(f"{path}: the trace has no IOs")
    return Trace(meta, lambda: _runs(_ios(path, meta["footprint"])))


def sha256(path):
    """The sha256 of a trace file's bytes, in hex."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --- the generator ------------------------------------------------------------------------

def _below(rng, n):
    """A whole number in [0, n), from random() alone (see the module docstring)."""
    return int(rng.random() * n)


def _shuffle(rng, items):
    for i in range(len(items) - 1, 0, -1):
        j = _below(rng, i + 1)
        items[i], items[j] = items[j], items[i]


def _split(rng, total, parts):
    """`total` as `parts` random whole numbers, each at least a quarter of the mean (and 1)."""
    least = max(1, total // (4 * parts))
    cuts = sorted(_below(rng, total - least * parts + 1) for _ in range(parts - 1))
    edges = [0, *cuts, total - least * parts]
    return [least + b - a for a, b in zip(edges, edges[1:])]


def _apportion(total, weights):
    """`total` split in proportion to `weights` by largest remainder (ties to the first)."""
    whole = sum(weights)
    shares = [total * w // whole for w in weights]
    by_remainder = sorted(range(len(weights)), key=lambda i: -(total * weights[i] % whole))
    for i in by_remainder[:total - sum(shares)]:
        shares[i] += 1
    return shares


def _mix(total, fixed, balance, target):
    """Counts per value: the fixed shares rounded, the rest split between the two balance
    values so that the sum of value x count comes nearest `target`."""
    counts = {v: round(total * share) for v, share in fixed.items()}
    rest = total - sum(counts.values())
    lo, hi = balance
    need = target - sum(v * c for v, c in counts.items()) - lo * rest
    high = (2 * need + hi - lo) // (2 * (hi - lo))
    if not 0 <= high <= rest:
        raise ValueError(f"no split of {rest} IOs between {lo} and {hi} reaches {target}")
    counts[lo], counts[hi] = rest - high, high
    return dict(sorted(counts.items()))


def _profile(name):
    if name not in PROFILES:
        raise SsdbenchError(f"unknown trace profile {name!r}; profiles: {', '.join(PROFILES)}")
    return PROFILES[name]


def _counts(p, scale):
    """Per-op counts by IO size, and per-qd counts of IOs, for a profile at a scale."""
    if not isinstance(scale, (int, float)) or isinstance(scale, bool) or not 0 < scale <= 10:
        raise SsdbenchError(f"trace scale must be a number in (0, 10], not {scale!r}")
    reads, writes = round(p["reads"] * scale), round(p["writes"] * scale)
    if min(reads, writes) < 100:
        raise SsdbenchError(f"trace scale {scale} leaves fewer than 100 reads or writes")
    written = round(p["bytes_written"] * scale)
    sizes = {"R": _mix(reads, p["sizes"], p["size_balance"], (reads * written + writes // 2) // writes),
             "W": _mix(writes, p["sizes"], p["size_balance"], written)}
    n = reads + writes
    qds = _mix(n, p["qd"], p["qd_balance"], round(p["avg_qd"] * n))
    return sizes, qds


def scaled_bytes(profile, scale):
    """(bytes read, bytes written) of a profile (a PROFILES entry) at a scale."""
    sizes, _ = _counts(profile, scale)
    return tuple(sum(size * c for size, c in sizes[op].items()) for op in ("R", "W"))


def targets(name, scale=1.0):
    """The figures the generator aims at for a profile, keyed as `stats` keys them."""
    p = _profile(name)
    sizes, qds = _counts(p, scale)
    reads, writes = sum(sizes["R"].values()), sum(sizes["W"].values())
    n = reads + writes
    mix = {size: sizes["R"].get(size, 0) + sizes["W"].get(size, 0) for size in sorted({*sizes["R"], *sizes["W"]})}
    bytes_read, bytes_written = scaled_bytes(p, scale)
    return {"reads": reads, "writes": writes, "bytes_read": bytes_read, "bytes_written": bytes_written,
            "size_mix": {size: c / n for size, c in mix.items()},
            "sequential_share": round(p["sequential"] * n) / n, "avg_qd": sum(q * c for q, c in qds.items()) / n,
            "qd1_share": qds[1] / n, "qd_mix": {q: c / n for q, c in qds.items()}, "footprint_bytes": p["footprint"]}


def _plan(rng, qds, n):
    """(qd, IO count) of each segment: qd-1 segments alternating with higher-qd ones."""
    busy = {q: c for q, c in qds.items() if q != 1 and c}
    pairs = max(len(busy), min(_MAX_PAIRS, n // _IOS_PER_PAIR))
    per_qd = [k + 1 for k in _apportion(pairs - len(busy), list(busy.values()))]
    high = [(q, size) for (q, c), k in zip(busy.items(), per_qd) for size in _split(rng, c, min(k, c))]
    _shuffle(rng, high)
    plan = []
    for ones, other in zip(_split(rng, qds[1], len(high)), high):
        plan += [(1, ones), other]
    return plan


def _offset(rng, prev_end, limit):
    """A 4 KiB-aligned start for a non-sequential IO, at most `limit`, never prev_end."""
    top = limit // _SLOT
    if top < 1:
        raise SsdbenchError("the trace footprint is too small for its longest sequential run")
    while True:
        if prev_end is not None and rng.random() < _PSEUDO:
            slot = prev_end // _SLOT + _below(rng, 2 * _NEAR // _SLOT + 1) - _NEAR // _SLOT
            slot = min(max(slot, 0), top)
        else:
            slot = _below(rng, top + 1)
        if slot * _SLOT != prev_end:
            return slot * _SLOT


def _generated(p, seed, scale):
    rng = Random(seed)
    sizes, qds = _counts(p, scale)
    kinds = [(op, size) for op in sizes for size, c in sizes[op].items() if c]
    deck = array("B")  # the kind of every IO, dealt from exact counts
    for k, (op, size) in enumerate(kinds):
        deck.extend(bytes([k]) * sizes[op][size])
    _shuffle(rng, deck)
    n = len(deck)
    sequential = round(p["sequential"] * n)
    footprint = p["footprint"]
    start, prev_end = 0, None
    for qd, count in _plan(rng, qds, n):
        end = start + count
        seq_here = (sequential * end + n // 2) // n - (sequential * start + n // 2) // n
        chosen = list(range(1, count))
        for i in range(seq_here):  # a partial shuffle picks the sequential IOs
            j = i + _below(rng, len(chosen) - i)
            chosen[i], chosen[j] = chosen[j], chosen[i]
        seq = bytearray(count + 1)
        for i in chosen[:seq_here]:
            seq[i] = 1
        dealt = [kinds[k] for k in deck[start:end]]
        run = [0] * (count + 1)  # bytes from each IO to the end of its sequential run
        for i in range(count - 1, -1, -1):
            run[i] = dealt[i][1] + (run[i + 1] if seq[i + 1] else 0)
        ios = []
        for i, (op, length) in enumerate(dealt):
            offset = prev_end if seq[i] else _offset(rng, prev_end, footprint - run[i])
            ios.append((op, offset, length))
            prev_end = offset + length
        yield qd, ios
        start = end


def generate(profile, seed=None, scale=1.0):
    """A synthetic trace of a profile (seed None: the profile's own). It is generated again
    on each pass over it, identically, so `write` streams it to disk."""
    p = _profile(profile)
    seed = p["seed"] if seed is None else seed
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise SsdbenchError(f"trace seed must be a whole number >= 0, not {seed!r}")
    _counts(p, scale)
    meta = {"label": p["label"], "profile": profile, "seed": seed, "scale": float(scale),
            "footprint": p["footprint"], "synthetic": True, "standard": True}
    return Trace(meta, lambda: _generated(p, seed, scale))


# --- figures ------------------------------------------------------------------------------

def stats(trace):
    """The figures of a trace (or of a trace file): op counts and bytes, share of IOs by
    length, sequential share (offset == the previous IO's end), mean qd over IOs, share of
    IOs at qd 1, footprint (the end of the highest IO) and number of segments."""
    if not isinstance(trace, Trace):
        trace = read(trace)
    reads = writes = bytes_read = bytes_written = sequential = qd_sum = qd1 = count = footprint = 0
    by_size, prev_end = {}, None
    for qd, ios in segments(trace):
        count += 1
        qd_sum += qd * len(ios)
        if qd == 1:
            qd1 += len(ios)
        for op, offset, length in ios:
            if op == "R":
                reads += 1
                bytes_read += length
            else:
                writes += 1
                bytes_written += length
            sequential += offset == prev_end
            by_size[length] = by_size.get(length, 0) + 1
            prev_end = offset + length
            footprint = max(footprint, prev_end)
    n = reads + writes
    return {"reads": reads, "writes": writes, "bytes_read": bytes_read, "bytes_written": bytes_written,
            "size_mix": {s: c / n for s, c in sorted(by_size.items())}, "sequential_share": sequential / n,
            "avg_qd": qd_sum / n, "qd1_share": qd1 / n, "footprint_bytes": footprint, "segments": count}


def map_to_capacity(trace, capacity_bytes):
    """(trace, mapped): a trace whose footprint exceeds the drive is folded onto it, offset
    modulo the capacity rounded down to 1 MiB (which keeps each IO's alignment); an IO that
    would then cross the end is moved back to end there."""
    footprint = trace.meta["footprint"]
    if footprint <= capacity_bytes:
        return trace, False
    usable = capacity_bytes // MiB * MiB
    if usable < 16 * MiB:
        raise SsdbenchError(f"a drive of {capacity_bytes} bytes is too small to play a trace on")

    def folded():
        for qd, ios in segments(trace):
            out = []
            for op, offset, length in ios:
                if length > usable:
                    raise SsdbenchError(f"an IO of {length} bytes does not fit on a drive of {capacity_bytes} bytes")
                offset %= usable
                out.append((op, min(offset, usable - length), length))
            yield qd, out

    return Trace(dict(trace.meta, footprint=usable, mapped_from=footprint), folded), True


# --- user traces --------------------------------------------------------------------------

def _user_trace(path, fmt, how_qd, ios):
    """A trace of imported IOs (op, offset, length, qd), grouped for playback.

    fio runs a segment at one iodepth, so the IOs go in consecutive blocks, as few IOs a
    block as keeps the trace within 1000 blocks; a block's qd is the median qd of its IOs
    (rounded half up, at most 32), and neighbouring blocks of one qd make one segment. The
    played queue depth is thus an approximation of the recorded one, coarser the longer
    the trace.
    """
    if not ios:
        raise SsdbenchError(f"{path}: no read or write IOs found")
    block = math.ceil(len(ios) / _MAX_SEGMENTS)
    grouped = []
    for i in range(0, len(ios), block):
        chunk = ios[i:i + block]
        qd = min(_MAX_QD, int(statistics.median(io[3] for io in chunk) + 0.5))
        rest = [io[:3] for io in chunk]
        if grouped and grouped[-1][0] == qd:
            grouped[-1][1].extend(rest)
        else:
            grouped.append((qd, rest))
    meta = {"label": f"user trace ({fmt}), not a standard trace", "source": os.path.basename(path), "format": fmt,
            "qd": how_qd, "footprint": max(offset + length for _, offset, length, _ in ios),
            "synthetic": False, "standard": False}
    return Trace(meta, lambda: iter(grouped))


def _aligned(offset, length):
    """Byte extents widened to whole sectors, since playback does direct IO."""
    start = offset // SECTOR * SECTOR
    return start, -(-(offset + length) // SECTOR) * SECTOR - start


# Default blkparse output: "%D %2c %8s %5T.%9t %5p %2a %3d " then the action's payload.
_BLK_EVENT = re.compile(r"\s*\d+,\d+\s+\d+\s+\d+\s+\d+\.\d+\s+\d+\s+(\S+)\s+(\S+)\s*(.*)")
_BLK_DEVICE = re.compile(r"\s*\d+,\d+\s")
_BLK_EXTENT = re.compile(r"(\d+) \+ (\d+)\b")


def import_blkparse(path):
    """A trace from blkparse's default text output (`blktrace -d DEV -o - | blkparse -i -`).

    Only D (issued to the device) and C (completed) events of data reads and writes count;
    an IO's qd is the number of IOs outstanding when it was issued, itself included. A C
    with no D before it (in flight when tracing began) is ignored. Sectors are 512 bytes.
    """
    ios, outstanding, in_flight = [], {}, 0
    for n, line in _lines(path):
        if not _BLK_DEVICE.match(line):
            continue  # the summary blkparse prints at the end
        event = _BLK_EVENT.match(line)
        if not event:
            raise SsdbenchError(f"{path}, line {n}: not a blkparse event line: {line.strip()!r}")
        action, rwbs, payload = event.groups()
        op = "W" if "W" in rwbs else "R" if "R" in rwbs else None
        if action not in ("D", "C") or op is None:
            continue
        extent = _BLK_EXTENT.match(payload)
        if not extent or extent[2] == "0":
            continue  # no data: the empty write of a flush completes as "C WS 0 [0]"
        sector, sectors = int(extent[1]), int(extent[2])
        key = (line.split()[0], sector, sectors)
        if action == "D":
            outstanding[key] = outstanding.get(key, 0) + 1
            in_flight += 1
            ios.append((op, sector * SECTOR, sectors * SECTOR, in_flight))
        elif outstanding.get(key):
            outstanding[key] -= 1
            in_flight -= 1
    return _user_trace(path, "blkparse", "from D and C events, median per block", ios)


_FIO_HEADERS = {"fio version 2 iolog": 2, "fio version 3 iolog": 3}
_FIO_IGNORED = {"add", "open", "close", "sync", "datasync", "trim", "wait"}


def import_fio_iolog(path, qd=1):
    """A trace from a fio iolog, version 2 or 3 (fio's HOWTO, "Trace file format").

    Reads and writes become IOs; file actions, syncs, trims and waits are dropped, and IOs
    on different files all go to the one drive. The iolog records no queue depth, so every
    IO gets `qd`, which the metadata says was chosen at import.
    """
    if not isinstance(qd, int) or isinstance(qd, bool) or not 1 <= qd <= _MAX_QD:
        raise SsdbenchError(f"qd must be a whole number from 1 to {_MAX_QD}, not {qd!r}")
    ios, version = [], None
    for n, line in _lines(path):
        where = f"{path}, line {n}"
        if version is None:
            version = _FIO_HEADERS.get(line.strip())
            if version is None:
                raise SsdbenchError(f"{where}: not a fio iolog (expected 'fio version 2 iolog' or "
                                    "'fio version 3 iolog')")
            continue
        fields = line.split()
        if not fields:
            continue
        if version == 3:
            _number(fields.pop(0), where, "timestamp")
        if len(fields) not in (2, 4):
            raise SsdbenchError(f"{where}: expected '<file> <action> [<offset> <length>]', got {line.strip()!r}")
        action = fields[1]
        if action in _FIO_IGNORED:
            continue
        if action not in ("read", "write") or len(fields) != 4:
            raise SsdbenchError(f"{where}: unknown iolog action {line.strip()!r}")
        offset, length = _number(fields[2], where, "offset"), _number(fields[3], where, "length")
        if length:
            ios.append((action[0].upper(), *_aligned(offset, length), qd))
    if version is None:
        raise SsdbenchError(f"{path}: empty file, not a fio iolog")
    return _user_trace(path, f"fio iolog v{version}", f"{qd}, chosen at import (a fio iolog records none)", ios)


_MSR_HEADER = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime"
_MSR_ROW = re.compile(r"\d+,[^,]*,\d+,(Read|Write),\d+,\d+,\d+$")


def import_msr_csv(path):
    """A trace from an MSR-Cambridge CSV: Timestamp,Hostname,DiskNumber,Type,Offset,Size,
    ResponseTime, times in 100 ns ticks, Type Read or Write, one disk a file.

    An IO's qd is the number of IOs outstanding at its issue time (issued before it and
    not yet completed at that instant), itself included, as for blkparse.
    """
    rows, disk = [], None
    for n, line in _lines(path):
        where = f"{path}, line {n}"
        text = line.strip()
        if not text or (n == 1 and text.startswith("Timestamp,")):
            continue
        fields = text.split(",")
        if len(fields) != 7:
            raise SsdbenchError(f"{where}: expected 7 comma-separated fields ({_MSR_HEADER}), got {len(fields)}")
        stamp, host, number, kind, offset, size, response = fields
        if kind not in ("Read", "Write"):
            raise SsdbenchError(f"{where}: Type {kind!r} is not Read or Write")
        if disk is None:
            disk = (host, number)
        elif (host, number) != disk:
            raise SsdbenchError(f"{where}: disk {host}/{number} after disk {disk[0]}/{disk[1]}; "
                                "split the file into one file per disk")
        stamp, offset, size, response = (_number(v, where, k) for v, k in ((stamp, "Timestamp"),
                                         (offset, "Offset"), (size, "Size"), (response, "ResponseTime")))
        if size:
            rows.append((stamp, kind[0], *_aligned(offset, size), response))
    rows.sort(key=lambda r: r[0])  # stable: same-tick IOs keep the file's order
    ios, completions = [], []
    for stamp, op, offset, length, response in rows:
        while completions and completions[0] <= stamp:
            heapq.heappop(completions)
        heapq.heappush(completions, stamp + response)
        ios.append((op, offset, length, len(completions)))
    return _user_trace(path, "MSR-Cambridge CSV", "from issue and response times, median per block", ios)


def load(path, qd=1):
    """Any trace ssdbench reads, told apart by its content: an ssdbench trace, a fio iolog
    (played at `qd`), blkparse text output, or an MSR-Cambridge CSV."""
    with _open_text(path) as f:
        try:
            first = next((line for line in f if line.strip()), "")
        except UnicodeDecodeError:
            first = ""
    if first.startswith("# ssdbench trace"):
        return read(path)
    if first.strip() in _FIO_HEADERS:
        return import_fio_iolog(path, qd)
    if _BLK_EVENT.match(first):
        return import_blkparse(path)
    if first.strip() == _MSR_HEADER or _MSR_ROW.match(first.strip()):
        return import_msr_csv(path)
    raise SsdbenchError(f"{path}: not a trace ssdbench reads (an ssdbench trace, a fio iolog v2 or v3, "
                        "blkparse text output, or an MSR-Cambridge CSV; a binary blktrace capture "
                        "needs 'blkparse -i' first)")
