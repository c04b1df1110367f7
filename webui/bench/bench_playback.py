"""make bench, playback part: the gaps between a Storage Bench trace's segments, as a run measures them.

A trace is played as one fio job per segment (a run of IOs at one queue depth), each taking over from the one
before it (run/playback.py). The time between one segment's last completion and the next one's first issue is
idle time the trace does not give the drive. This plays standard's Light trace on a loop device of LOOP_SIZE
(mapped onto it as a run maps it onto a small drive), the way a run plays it, twice: with fio's own start_fifo
and done_fifo (our patch, board/ssdbench/patches/fio/0002-*), and with a stock fio's exec_prerun and
exec_postrun shell commands; and reports the step's own gap figures (replay.gaps_s, replay.gap_percent,
replay.longest_gap_s) with the median handoff, from the per-IO logs' wall-clock stamps (whole ms each).

Goal (issue 44, item 6): the gaps under 1% of the replay with fio's own handoff. The bench exits non-zero over
the goal, or when the fio on PATH lacks start_fifo. --short (make test) plays smoke's trace on a small loop
device with fio's own handoff once, and judges only that it played and was measured.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from ssdbench.run import derive, handoff, plan, playback, workload
from ssdbench.suites import locked

GOAL_PERCENT = 1.0
LOOP_SIZE = 2 * 2**30


def sh(*argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def handoffs_ms(out_dir, doc):
    """Each handoff's gap in ms: one segment's last completion to the next one's first issue (derive's spans)."""
    spans = []
    for job in doc["jobs"]:
        _, completions = derive.per_io_log(out_dir, job["jobname"], "clat")
        spans.append(derive.replay_span(completions))
    return [b[0] - a[1] for a, b in zip(spans, spans[1:])]


def play(step, suite, dev, capacity, work, native):
    out = os.path.join(work, "fifo" if native else "shell")
    trace, job_text, info = playback.prepare(step, out, capacity, suite, work, native=native)
    outcome = playback.play(trace, job_text, step, out, dev, lambda *a: None, lambda: False)
    if outcome.state != "done":
        raise SystemExit(f"the replay {outcome.state}: {outcome.error}")
    metrics = {m.name: m.value for m in derive.step_results(step, out, outcome.doc, True)[0]}
    gaps = handoffs_ms(out, outcome.doc)
    return {
        "handoff": info["handoff"]["options"],
        "segments": info["segments"],
        "ios": metrics["all.ios"],
        "wall_s": metrics["replay.wall_s"],
        "gaps_s": metrics["replay.gaps_s"],
        "gap_percent": metrics["replay.gap_percent"],
        "longest_gap_s": metrics["replay.longest_gap_s"],
        "median_handoff_ms": statistics.median(gaps),
    }


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--short", action="store_true", help="smoke's trace, fio's own handoff only (make test)")
    short = args.parse_args().short
    name, step_id, size = ("smoke", "trace", 64 * 2**20) if short else ("standard", "trace-light", LOOP_SIZE)
    suite = workload.verified(locked.load(name))
    step = next(st for st in plan.compile_plan(suite, size) if st.id == step_id)
    native = handoff.native()
    print(f"{name}'s {step.id} on a {size // 2**20} MiB loop device; the fio on PATH has start_fifo: {native}")
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-playback-") as work:
        img = os.path.join(work, "drive.img")
        with open(img, "wb") as f:
            f.truncate(size)
        dev = sh("losetup", "-f", "--show", img).strip()
        try:
            for mode in (True,) if short else (True, False):
                r = play(step, suite, dev, size, work, mode)
                results.append(r)
                print(
                    f"{r['handoff']:28s} {r['segments']} segments, {r['ios']:,.0f} IOs: replay {r['wall_s']:.1f} s,"
                    f" gaps {r['gaps_s']:.3f} s ({r['gap_percent']:.2f}%), median handoff"
                    f" {r['median_handoff_ms']:.2f} ms, longest {1000 * r['longest_gap_s']:.1f} ms"
                )
        finally:
            sh("losetup", "-d", dev)
    over = results[0]["gap_percent"] > GOAL_PERCENT
    ok = native and (short or not over)
    print(json.dumps({"goal_percent": GOAL_PERCENT, "suite": name, "replays": results, "ok": ok}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
