"""Synthetic traces, generated from a profile (trace_profiles) and a seed.

The generator draws only from `random.Random(seed).random()`, the one method whose sequence Python
guarantees across versions, so a profile and a seed always give the same bytes. The draws, in order:

1. Segments, the unit of playback: qd-1 segments alternate with higher-qd ones, at most 450 of each
   (about one pair per 4000 IOs, never fewer than one segment per queue depth), each segment's length
   drawn at random but at least a quarter of the mean; the counts per qd are exact.
2. Sequential runs: lengths from the profile's power law until the IOs that continue a run add up to the
   sequential share exactly (the last run is cut to fit). Each run gets one direction, a read with the
   reads' share of all IOs, and one size, drawn in proportion to that direction's IOs of each size not
   yet given to a run (only sizes with enough IOs left, and that keep the run within a quarter of the
   footprint).
3. The IOs left over become runs of one: a deck of exactly the remaining counts, shuffled.
4. The runs and the single IOs, shuffled together into the trace's order.
5. Offsets: the first IO of every run starts on a 4 KiB boundary, never where the IO before it ended,
   so that no run joins the one before it: 75% of them "pseudo-random", within 8 MiB of the previous
   IO's end, the rest anywhere in the footprint (the article: most random IO is pseudo-random); the
   rest of the run follows on. Every run ends inside the footprint.
6. The IOs, in that order, are cut into the segments of step 1.

A segment boundary may fall inside a run: fio then plays the run's rest as the next job, at its queue
depth, still sequential on the drive.
"""

import hashlib
import json
from array import array
from bisect import bisect_right
from random import Random

from ..errors import SsdbenchError
from . import trace_file, trace_profiles
from .trace_file import KiB, MiB, Trace

# The version of how a trace is drawn from its profile and seed: one more with every change to the draws
# (this module, or how trace_profiles turns figures into counts) that changes a trace's bytes. The recipe
# hash names it, so a changed recipe is generated and hashed again rather than taken from the manifest;
# test_trace_generator's fixed digests fail on a change that leaves it as it was.
RECIPE_VERSION = 1
_SLOT = 4 * KiB  # a run's first IO starts on this boundary
_NEAR = 8 * MiB  # how far a pseudo-random IO lands from the previous IO's end
_PSEUDO = 0.75  # share of runs that start pseudo-randomly
_MAX_PAIRS = 450  # qd-1 segments, and as many at higher qd
_IOS_PER_PAIR = 4000
_RUN_SHARE_OF_FOOTPRINT = 4  # a run spans at most footprint / 4
_SINGLE = -1  # in the order of runs: an IO of its own, dealt from the deck


def _below(rng, n):
    """A whole number in [0, n), from random() alone (see the module docstring)."""
    return int(rng.random() * n)


def _shuffle(rng, items):
    random = rng.random  # the same draws as _below, looked up once: this runs millions of times
    for i in range(len(items) - 1, 0, -1):
        j = int(random() * (i + 1))
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


def _run_lengths(rng, p, sequential):
    """The length in IOs of every run of two IOs or more, until `sequential` IOs continue a run."""
    law = trace_profiles.run_law(p)
    lengths, cumulative, total = list(law), [], 0.0
    for k in lengths:
        total += law[k]
        cumulative.append(total)
    out, left = array("I"), sequential
    while left:
        k = lengths[min(bisect_right(cumulative, rng.random()), len(lengths) - 1)]
        out.append(min(k, left + 1))
        left -= out[-1] - 1
    return out


def _run_kinds(rng, p, lengths, left, kinds):
    """The kind (an index into `kinds`) of each run; takes its IOs from `left`, {op: {size: count}}."""
    reads, n = p["reads"], p["reads"] + p["writes"]
    limit = p["footprint"] // _RUN_SHARE_OF_FOOTPRINT
    out = array("B")
    for length in lengths:
        op = "R" if rng.random() * n < reads else "W"
        fits = [(size, c) for size, c in left[op].items() if c >= length and size * length <= limit]
        if not fits:
            raise SsdbenchError(f"no IO size has {length} {op} IOs left for a sequential run")
        pick = _below(rng, sum(c for _, c in fits))
        for candidate, c in fits:
            size = candidate
            if pick < c:
                break
            pick -= c
        left[op][size] -= length
        out.append(kinds.index((op, size)))
    return out


def _offset(rng, prev_end, limit):
    """A 4 KiB-aligned start for a run's first IO, at most `limit`, never prev_end."""
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


def _generated(p, seed):
    rng = Random(seed)
    sizes, qds = trace_profiles.counts(p)
    n = sum(qds.values())
    plan = _plan(rng, qds, n)
    kinds = [(op, size) for op in sizes for size in sizes[op]]
    lengths = _run_lengths(rng, p, round(p["sequential"] * n))
    left = {op: dict(c) for op, c in sizes.items()}
    run_kinds = _run_kinds(rng, p, lengths, left, kinds)
    deck = array("B")  # the kind of every single IO, dealt from the counts left
    for k, (op, size) in enumerate(kinds):
        deck.extend(bytes([k]) * left[op][size])
    _shuffle(rng, deck)
    order = array("i", range(len(lengths)))
    order.extend(array("i", [_SINGLE]) * len(deck))
    _shuffle(rng, order)

    segments = iter(plan)
    qd, need = next(segments)
    ios, prev_end, dealt = [], None, 0
    for run in order:
        if run == _SINGLE:
            (op, size), count = kinds[deck[dealt]], 1
            dealt += 1
        else:
            (op, size), count = kinds[run_kinds[run]], lengths[run]
        offset = _offset(rng, prev_end, p["footprint"] - size * count)
        for _ in range(count):
            ios.append((op, offset, size))
            offset += size
            if len(ios) == need:
                yield qd, ios
                ios = []
                qd, need = next(segments, (None, None))
        prev_end = offset


def _checked(profile, seed):
    p = trace_profiles.profile(profile)
    seed = p["seed"] if seed is None else seed
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise SsdbenchError(f"trace seed must be a whole number >= 0, not {seed!r}")
    return p, seed


def generate(profile, seed=None):
    """A synthetic trace of a profile (seed None: the profile's own). It is generated again
    on each pass over it, identically, so `write` streams it to disk."""
    p, seed = _checked(profile, seed)
    meta = {
        "label": p["label"],
        "profile": profile,
        "seed": seed,
        "footprint": p["footprint"],
        "synthetic": True,
        "standard": True,
    }
    return Trace(meta, lambda: _generated(p, seed))


def segment_plan(profile, seed=None):
    """(qd, IO count) of each segment of the trace, without generating its IOs: the first draws."""
    p, seed = _checked(profile, seed)
    sizes, qds = trace_profiles.counts(p)
    return _plan(Random(seed), qds, sum(qds.values()))


def recipe_sha256(profile, seed=None):
    """The sha256 of everything a generated trace's bytes follow from: the recipe's version (RECIPE_VERSION),
    the trace format's, this generator's figures, the profile's figures and the seed. Python's random() is
    the same sequence on every version, so two equal recipes give the same bytes. No source file is read: on
    the appliance Python is bytecode only, and a hash of a .pyc would never match the manifest's."""
    p, seed = _checked(profile, seed)
    figures = [_SLOT, _NEAR, _PSEUDO, _MAX_PAIRS, _IOS_PER_PAIR, _RUN_SHARE_OF_FOOTPRINT]
    recipe = [RECIPE_VERSION, trace_file.VERSION, figures, profile, p, seed]
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()
