"""The profiles (PROFILES) reproduce the figures the 2011 articles publish for the Heavy
workload: 2,168,893 reads, 1,783,447 writes, 106.32 GB (10^9 bytes) written; by IO count
4 KiB 28%, 16 KiB 10%, 32 KiB 10%, 64 KiB 4%; 42% of IOs sequential; average queue depth
4.625 (mean over IOs of qd) with 59% of IOs at qd 1. An IO is sequential when it has the
direction of the IO before it and starts where that one ended. Everything else is our
choice, stated here and in the table:

- The other 48% of IO sizes: 512 B 4%, 256 KiB 3%, 512 KiB 2%, 1 MiB 1%, and the remaining
  38% split between 8 KiB and 128 KiB so that the writes come within one IO of the bytes
  written (Heavy: 8 KiB 22.6%, 128 KiB 15.4%; 106,319,987,712 bytes). Reads and writes each follow the whole mix, so
  Heavy reads 129.3 GB (the articles give no read volume).
- Queue depths besides qd 1: 4 at 10%, 8 at 8%, 16 at 5%, and qd 2 and 32 sharing the rest
  so that the mean comes out right (Heavy: qd 2 11.9%, qd 32 6.1%).
- Sequential runs: a run is an IO that does not continue the one before it followed by the
  IOs that do, all of one direction and one size. The run lengths of two IOs or more follow
  a power law, P(length = k) in proportion to 1/k^2 for k = 2 .. `longest` (1024 IOs; smoke
  64); every other IO is a run of one. See trace_generator for how they are laid out.
- Footprint: Heavy 64 GiB, Light 32 GiB, smoke 32 MiB. A drive smaller than that gets the
  trace mapped onto it (`map_to_capacity`).
- Light ("the same shape but far less write-intensive"; the articles give no figures):
  1,600,000 reads, 400,000 writes, 12.00 GB written (three times the 4 GB of the 2010
  suite), the same published size shares, qd mix and sequential share; other sizes 512 B 4%,
  256 KiB 1%, 512 KiB 0.5%, with 8 KiB (32.3%) and 128 KiB (10.2%) balancing; 48.0 GB read.
- smoke: Heavy at a thousandth (2,169 reads, 1,783 writes, 106.32 MB written) in 32 MiB.
"""

from ..errors import SsdbenchError
from .trace_file import GiB, KiB, MiB

_PUBLISHED_SIZES = {4 * KiB: 0.28, 16 * KiB: 0.10, 32 * KiB: 0.10, 64 * KiB: 0.04}
_HEAVY_SIZES = {**_PUBLISHED_SIZES, 512: 0.04, 256 * KiB: 0.03, 512 * KiB: 0.02, 1 * MiB: 0.01}
_QDS = {1: 0.59, 4: 0.10, 8: 0.08, 16: 0.05}

# Each profile: op counts and bytes written; `sizes` fixes shares of IOs by length and
# `size_balance` takes the rest, split to hit bytes_written; likewise `qd`, `qd_balance`, `avg_qd`.
# `runs`: the law of the sequential runs' lengths, in IOs.
# What the three profiles share: the 2011 Heavy workload's shape, by the articles and our stated choices.
_SHAPE_2011 = {
    "seed": 2011,
    "size_balance": (8 * KiB, 128 * KiB),
    "sequential": 0.42,
    "runs": {"exponent": 2, "longest": 1024},
    "qd": _QDS,
    "qd_balance": (2, 32),
    "avg_qd": 4.625,
}
PROFILES = {
    "heavy-2011": {
        **_SHAPE_2011,
        "label": "synthetic, modelled on the AnandTech Storage Bench 2011 Heavy workload (not the original trace)",
        "reads": 2_168_893,
        "writes": 1_783_447,
        "bytes_written": 106_320_000_000,
        "sizes": _HEAVY_SIZES,
        "footprint": 64 * GiB,
    },
    "light-2011": {
        **_SHAPE_2011,
        "label": "synthetic, modelled on the AnandTech Storage Bench 2011 Light workload (not the original trace; "
        "our own figures)",
        "reads": 1_600_000,
        "writes": 400_000,
        "bytes_written": 12_000_000_000,
        "sizes": {**_PUBLISHED_SIZES, 512: 0.04, 256 * KiB: 0.01, 512 * KiB: 0.005},
        "footprint": 32 * GiB,
    },
    "smoke": {
        **_SHAPE_2011,
        "label": "synthetic smoke-test trace: Heavy 2011 shape at 1/1000 size; not comparable",
        "reads": 2_169,
        "writes": 1_783,
        "bytes_written": 106_320_000,
        "sizes": _HEAVY_SIZES,
        # A run never spans more than a quarter of the footprint: in 32 MiB, 64 IOs of up to 128 KiB.
        "runs": {"exponent": 2, "longest": 64},
        "footprint": 32 * MiB,
    },
}


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


def profile(name):
    if name not in PROFILES:
        raise SsdbenchError(f"unknown trace profile {name!r}; profiles: {', '.join(PROFILES)}")
    return PROFILES[name]


def counts(p):
    """Per-op counts by IO size, and per-qd counts of IOs, of a profile (a PROFILES entry)."""
    reads, writes, written = p["reads"], p["writes"], p["bytes_written"]
    sizes = {
        "R": _mix(reads, p["sizes"], p["size_balance"], (reads * written + writes // 2) // writes),
        "W": _mix(writes, p["sizes"], p["size_balance"], written),
    }
    n = reads + writes
    qds = _mix(n, p["qd"], p["qd_balance"], round(p["avg_qd"] * n))
    return sizes, qds


def volume(p):
    """(bytes read, bytes written) of a profile (a PROFILES entry)."""
    sizes, _ = counts(p)
    return tuple(sum(size * c for size, c in sizes[op].items()) for op in ("R", "W"))


def run_law(p):
    """{length: probability} of a sequential run's length in IOs, for runs of two IOs or more."""
    law = p["runs"]
    weights = {k: k ** -law["exponent"] for k in range(2, law["longest"] + 1)}
    total = sum(weights.values())
    return {k: w / total for k, w in weights.items()}


def targets(name):
    """The figures the generator aims at for a profile, keyed as `stats` keys them."""
    p = profile(name)
    sizes, qds = counts(p)
    reads, writes = sum(sizes["R"].values()), sum(sizes["W"].values())
    n = reads + writes
    mix = {size: sizes["R"].get(size, 0) + sizes["W"].get(size, 0) for size in sorted({*sizes["R"], *sizes["W"]})}
    bytes_read, bytes_written = volume(p)
    return {
        "reads": reads,
        "writes": writes,
        "bytes_read": bytes_read,
        "bytes_written": bytes_written,
        "size_mix": {size: c / n for size, c in mix.items()},
        "sequential_share": round(p["sequential"] * n) / n,
        "avg_qd": sum(q * c for q, c in qds.items()) / n,
        "qd1_share": qds[1] / n,
        "qd_mix": {q: c / n for q, c in qds.items()},
        "run_ios_mean": sum(k * w for k, w in run_law(p).items()),
        "footprint_bytes": p["footprint"],
    }
