"""make bench, host cost part: what making a step's data costs the host, per IO, at 4 KiB and 128 KiB.

At QD1 that time sits inside every IO, so a step whose data is costly to make gives a figure that is partly the
host CPU's. Measured with fio's null engine (no device: only the host's own cost): one job writing at QD1 with
each set of data options that a job of the shipped suites' plans writes with (a trace's replay included), and
with those of the suites before (refill_buffers for both kinds); microseconds per IO = 1e6 / IOPS, the median
of REPEATS runs. Two rows for scale: fio doing nothing to its buffers (the engine's own cost), and fio's cheap
random data, a buffer of random bytes made once and scrambled for every write, which zstd and xz take 11% off
each 4 KiB block of, and so is not the suites' incompressible data (methodology, "incompressible data").

Goal: at most 1 us per IO at 4 KiB and at 128 KiB. Incompressible data misses it: fio makes it afresh for
every write, its only way to data that no compressor shrinks. The bench marks every row over the goal and
fails only when fio does; --short (make test) runs each row once, for a second.
"""

import argparse
import json
import statistics
import subprocess
import sys

from ssdbench.run import plan, playback, workload
from ssdbench.suites import locked

SIZES = ("4k", "128k")
GOAL_US = 1.0
RUNTIME_S = 5
REPEATS = 3
# The data options of the suites before (standard, quick and full up to v7, smoke up to v8).
BEFORE = {
    "incompressible": {"refill_buffers": 1, "buffer_compress_percentage": 0},
    "compressible": {"refill_buffers": 1, "buffer_compress_percentage": 90, "buffer_compress_chunk": "4k"},
}
FOR_SCALE = {
    "no data work (fio's own cost)": {"refill_buffers": 0, "scramble_buffers": 0},
    "random bytes made once, scrambled for every write": {"refill_buffers": 0, "scramble_buffers": 1},
}


def shipped():
    """{label: data options} of every job that writes in the shipped suites' plans, traces' replays included."""
    known = {}
    for mixed, table in ((True, plan.MIXED_DATA_OPTIONS), (False, plan.DATA_OPTIONS)):
        for kind, options in table.items():  # a mixed job's options that are a write-only job's take its name
            known[json.dumps(options, sort_keys=True)] = kind + (", a job that also reads" if mixed else "")
    keys = {k for options in (*plan.DATA_OPTIONS.values(), *plan.MIXED_DATA_OPTIONS.values()) for k in options}
    out = {}
    for name in locked.names():
        for step in plan.compile_plan(locked.load(name), workload.REFERENCE_CAPACITY):
            jobs = [opts for _, opts in step.jobs]
            if step.kind == "trace":
                jobs.append(playback.replay_job(0, 1)[1])
            for opts in jobs:
                options = {k: v for k, v in opts.items() if k in keys}
                if options:
                    out[known[json.dumps(options, sort_keys=True)]] = options
    return out


def us_per_io(bs, options, runtime):
    argv = [
        "fio",
        "--name=host-cost",
        "--ioengine=null",
        "--rw=write",
        f"--bs={bs}",
        "--iodepth=1",
        "--size=1g",
        "--time_based",
        f"--runtime={runtime}",
        "--output-format=json",
        *(f"--{k}={v}" for k, v in options.items()),
    ]
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return 1e6 / json.loads(out)["jobs"][0]["write"]["iops"]


def rows():
    """(label, data options, whether the goal applies)."""
    for label, options in FOR_SCALE.items():
        yield f"for scale: {label}", options, False
    for kind, options in BEFORE.items():
        yield f"before: {kind}", options, False
    for label, options in sorted(shipped().items()):
        yield f"now: {label}", options, True


def shown(options):
    return {k: f"{v[:10]}... ({len(v) // 2 - 1} bytes)" if k == "buffer_pattern" else v for k, v in options.items()}


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--short", action="store_true", help="each row once, for a second (make test)")
    short = args.parse_args().short
    runtime, repeats = (1, 1) if short else (RUNTIME_S, REPEATS)
    print(f"host cost per IO, fio null engine, QD1, median of {repeats} x {runtime} s (goal <= {GOAL_US} us)")
    print(f"{'data options':60s}" + "".join(f"{bs:>12s}" for bs in SIZES))
    results = []
    for label, options, goal in rows():
        cost = {bs: statistics.median(us_per_io(bs, options, runtime) for _ in range(repeats)) for bs in SIZES}
        over = [bs for bs in SIZES if cost[bs] > GOAL_US] if goal else []
        results.append({"row": label, "options": shown(options), "us_per_io": cost, "over_goal": over})
        mark = f"  over the goal at {', '.join(over)}" if over else ""
        print(f"{label:60s}" + "".join(f"{cost[bs]:10.2f}us" for bs in SIZES) + mark)
    over = [r["row"] for r in results if r["over_goal"]]
    print(json.dumps({"goal_us": GOAL_US, "rows": results, "over_goal": over, "ok": True}))
    sys.exit(0)


if __name__ == "__main__":
    main()
