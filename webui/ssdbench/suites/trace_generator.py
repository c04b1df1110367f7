"""`scale` multiplies the IO counts and bytes written; the footprint stays. The generator
draws only from `random.Random(seed).random()`, the one method whose sequence Python
guarantees across versions, so a profile, seed and scale always give the same bytes.
"""

from array import array
from random import Random

from ..errors import SsdbenchError
from . import trace_profiles
from .trace_file import KiB, MiB, Trace

_SLOT = 4 * KiB  # non-sequential IOs start on this boundary
_NEAR = 8 * MiB  # how far a pseudo-random IO lands from the previous IO's end
_PSEUDO = 0.75  # share of non-sequential IOs that are pseudo-random
_MAX_PAIRS = 450  # qd-1 segments, and as many at higher qd
_IOS_PER_PAIR = 4000


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
    for i in by_remainder[: total - sum(shares)]:
        shares[i] += 1
    return shares


def _high_segments(qds, n):
    """How many segments each queue depth above 1 gets: as many pairs as the IOs allow (each segment above
    qd 1 follows one at qd 1), shared in proportion to the IOs at that depth, at least one each."""
    busy = {q: c for q, c in qds.items() if q != 1 and c}
    pairs = max(len(busy), min(_MAX_PAIRS, n // _IOS_PER_PAIR))
    per_qd = [k + 1 for k in _apportion(pairs - len(busy), list(busy.values()))]
    return {q: min(k, c) for (q, c), k in zip(busy.items(), per_qd)}


def segment_count(profile, scale=1.0):
    """How many segments (fio replay jobs) a profile's trace has at a scale, without generating it."""
    _, qds = trace_profiles.counts(trace_profiles.profile(profile), scale)
    return 2 * sum(_high_segments(qds, sum(qds.values())).values())


def _plan(rng, qds, n):
    """(qd, IO count) of each segment: qd-1 segments alternating with higher-qd ones."""
    high = [(q, size) for q, k in _high_segments(qds, n).items() for size in _split(rng, qds[q], k)]
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
    sizes, qds = trace_profiles.counts(p, scale)
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
    p = trace_profiles.profile(profile)
    seed = p["seed"] if seed is None else seed
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise SsdbenchError(f"trace seed must be a whole number >= 0, not {seed!r}")
    trace_profiles.counts(p, scale)
    meta = {
        "label": p["label"],
        "profile": profile,
        "seed": seed,
        "scale": float(scale),
        "footprint": p["footprint"],
        "synthetic": True,
        "standard": True,
    }
    return Trace(meta, lambda: _generated(p, seed, scale))
