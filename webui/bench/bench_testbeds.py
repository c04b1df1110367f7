"""make bench, testbeds part: the same figures on three testbeds simulated on one machine, and whether every
difference the PC makes is flagged (docs/methodology.md, "The host's share of a figure").

On one loop device, the suite bench/testbeds.toml (a fill, then the four corners and a QD1 random read) runs as
`ssdbench run` on:
  (a) a free host, --free times (5), for each figure's own CoV;
  (b) a slow host: the runner and its fio in a CPU cgroup with 30% of one CPU (cpu.cfs_quota_us on cgroup v1,
      cpu.max on v2);
  (c) a busy host: two CPU-bound neighbours beside the run.
For each figure: the ratios b/a and c/a (to (a)'s mean) beside (a)'s CoV, and which rules of the host flagged
the figure in that run: fio's core over 90% in the figure's own job (validity rule 1, "core"), its job's host
share ("share") or the step's wait for a CPU ("wait", both rule 9), or a testbed whose calibration found fio short
of a whole CPU ("calibration"). The loop device's own testbed flags (its purge is a discard) flag every run alike
and are not the host's: they are left out.

A figure differs when its ratio is outside the free host's 95% prediction interval: t(0.975, n-1) x s x
sqrt(1 + 1/n) around (a)'s mean, s the sample standard deviation of its n runs (Student's t, so that the two runs
of --short widen it as few runs must, and five runs give about +/-3 s). A silent difference is a figure that
differs and that its run did not flag. A figure whose data the host alone spends over the host share's limit on
in every free run (its host share in (a)) differs for the data's cost: it must be flagged by its own share, not
only by the step's wait or the calibration, else it is "caught only run-wide". Both counts must be 0, in the
full bench and in --short alike; "before" counts the silent differences with rule 1 alone, the only host rule
before the host's cost was measured. It also says how many of the free host's runs flagged a figure: where they
all do, the host is not free, and the count proves little.

Needs root, fio and a CPU cgroup. --short (make test) runs (a) twice and (b) and (c) once. --json writes the
whole result; the last line printed is a short one.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import uuid

from ssdbench.results import document, store, testbed, validity

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE = os.path.join(HERE, "testbeds.toml")
STEP = "corners"
# (figure name, metric, unit): CrystalDiskMark's four corners and the QD1 latency.
FIGURES = (
    ("SEQ1M Q8T1 read", "SEQ1M-Q8T1-read.read.mb_s", "MB/s"),
    ("SEQ1M Q8T1 write", "SEQ1M-Q8T1-write.write.mb_s", "MB/s"),
    ("RND4K Q32T1 read", "RND4K-Q32T1-read.read.iops", "IOPS"),
    ("RND4K Q32T1 write", "RND4K-Q32T1-write.write.iops", "IOPS"),
    ("RND4K Q1T1 read", "RND4K-Q1T1-read.read.iops", "IOPS"),
    ("RND4K Q1T1 read latency", "RND4K-Q1T1-read.read.lat_mean", "ns"),
)
# Student's t at 0.975 by degrees of freedom (1 to 10; above, 2.2 overstates none of them): the 95% prediction
# interval of one more run from n runs is t(n-1) x s x sqrt(1 + 1/n).
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)
SLOW_QUOTA = 30000  # of a 100000 us period: 30% of one CPU
NEIGHBOURS = 2


def sh(*argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


class Cgroup:
    """A CPU cgroup with `quota` us of every 100000: on cgroup v1's cpu controller, else v2's cpu.max."""

    def __init__(self, quota):
        v1 = "/sys/fs/cgroup/cpu"
        self.folder = os.path.join(
            v1 if os.path.isdir(v1) else "/sys/fs/cgroup", f"ssdbench-bench-{uuid.uuid4().hex[:8]}"
        )
        os.mkdir(self.folder)
        if os.path.isdir(v1):
            self.write("cpu.cfs_period_us", "100000")
            self.write("cpu.cfs_quota_us", str(quota))
        else:
            self.write("cpu.max", f"{quota} 100000")

    def write(self, name, value):
        with open(os.path.join(self.folder, name), "w") as f:
            f.write(value)

    def join(self):
        self.write("cgroup.procs", str(os.getpid()))

    def remove(self):
        os.rmdir(self.folder)


def run(dev, data_dir, preexec_fn=None):
    """One run of the suite in a child process; its figures and which of them its run flagged for the host, by
    every rule and by rule 1 alone."""
    argv = [sys.executable, "-m", "ssdbench.cli", "run", "--suite-file", SUITE, "--non-standard"]
    argv += ["--drive", dev, "--confirm", os.path.basename(dev), "--data-dir", data_dir]
    proc = subprocess.run(argv, capture_output=True, text=True, preexec_fn=preexec_fn)
    if proc.returncode != 0:
        sys.exit(f"bench: the run failed: {proc.stderr.strip()}")
    db = store.connect(data_dir)
    try:
        run_id = store.list_runs(db)[0]["id"]
        doc = document.run_document(db, run_id)
        stored = store.get_run(db, run_id)
    finally:
        db.close()
    step = next(s for s in doc["steps"] if s["key"] == STEP)
    metrics = {m["name"]: m["value"] for m in step["metrics"]}
    # the testbed's calibration flag, under rule 9's cause
    calibration = [f for f in testbed.flags(stored) if f.startswith(validity.HOST_CAUSE)]
    wait = validity.host_bound({"host.cpu_wait_percent": metrics.get("host.cpu_wait_percent", 0.0)})
    rules, reasons, shares = {}, set(calibration + wait), {}
    for name, metric, _ in FIGURES:
        # the figure's own job: its rule 1 (fio's core) and rule 9's share (its host share)
        job = metric.split(".")[0] + "."
        own = {k.removeprefix(job): v for k, v in metrics.items() if k.startswith(job)}
        core = validity.cpu_bound(own)
        share = validity.host_bound({k: v for k, v in own.items() if k.endswith("host_share_percent")})
        shares[name] = own.get("host_share_percent")
        found = {"core": core, "share": share, "wait": wait, "calibration": calibration}
        rules[name] = [rule for rule, said in found.items() if said]
        reasons.update(core + share)
    return {
        "figures": {name: metrics[metric] for name, metric, _ in FIGURES},
        "rules": rules,
        "reasons": sorted(reasons),
        "cpu_wait_percent": metrics.get("host.cpu_wait_percent"),
        "host_share_percent": shares,
    }


def busy(dev, data_dir):
    neighbours = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(NEIGHBOURS)]
    try:
        return run(dev, data_dir)
    finally:
        for p in neighbours:
            p.kill()
            p.wait()


def slow(dev, data_dir):
    group = Cgroup(SLOW_QUOTA)
    try:
        return run(dev, data_dir, preexec_fn=group.join)
    finally:
        group.remove()  # its processes have ended: the run waited for them


def tolerance_percent(values):
    """The 95% prediction interval of one more run around the runs' mean, in percent of the mean (Student's t)."""
    n, mean = len(values), statistics.mean(values)
    t = T_975[min(n - 1, len(T_975)) - 1]
    return 100 * t * statistics.stdev(values) * (1 + 1 / n) ** 0.5 / mean


def compare(free, other):
    """Per figure: the ratio to the free host's mean, the tolerance, whether the ratio is outside it, the rules
    that flagged it, and whether it is silent (by every rule, and by rule 1 alone) or its data's cost was caught
    only run-wide."""
    out = {}
    for name, _, _ in FIGURES:
        values = [r["figures"][name] for r in free]
        mean = statistics.mean(values)
        ratio = other["figures"][name] / mean
        tolerance = tolerance_percent(values)
        outside = abs(ratio - 1) * 100 > tolerance
        rules = other["rules"][name]
        # the data's cost is over the share's limit in every free run: its own share must flag its difference
        costly = all((r["host_share_percent"][name] or 0) > validity.HOST_SHARE_LIMIT for r in free)
        out[name] = {
            "ratio": ratio,
            "cov_percent": 100 * statistics.stdev(values) / mean,
            "tolerance_percent": tolerance,
            "outside": outside,
            "rules": rules,
            "silent": outside and not rules,
            "silent_before": outside and "core" not in rules,
            "run_wide_only": outside and costly and "share" not in rules,
        }
    return out


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--short", action="store_true", help="(a) twice, (b) and (c) once")
    args.add_argument("--free", type=int, default=5, help="runs on the free host (default 5)")
    args.add_argument("--json", help="write the whole result here")
    a = args.parse_args()
    free_runs = 2 if a.short else a.free
    with tempfile.TemporaryDirectory(prefix="bench-testbeds-") as work:
        img = os.path.join(work, "disk.img")
        sh("truncate", "-s", "1G", img)
        dev = sh("losetup", "-f", "--show", "--direct-io=on", img).strip()
        try:
            free = [run(dev, os.path.join(work, f"free{k}")) for k in range(free_runs)]
            hosts = {"b: slow": slow(dev, os.path.join(work, "slow")), "c: busy": busy(dev, os.path.join(work, "busy"))}
        finally:
            sh("losetup", "-d", dev)
    result = {"free": free, "hosts": hosts, "figures": {}}
    compared = {h: compare(free, r) for h, r in hosts.items()}
    print(
        f"{'figure':26s}{'CoV (a)':>9s}{'+/- (a)':>9s}"
        + "".join(f"{h + ' / a':>14s}  {'flagged by':<26s}" for h in hosts)
    )
    for name, _, _ in FIGURES:
        row = {h: found[name] for h, found in compared.items()}
        result["figures"][name] = row
        first = next(iter(row.values()))
        cells = "".join(
            f"{c['ratio']:>13.3f}{'!' if c['silent'] or c['run_wide_only'] else ' '}  "
            f"{', '.join(c['rules']) or 'nothing':<26s}"
            for c in row.values()
        )
        print(f"{name:26s}{first['cov_percent']:>8.2f}%{first['tolerance_percent']:>8.2f}%" + cells)
    cells = [c for row in result["figures"].values() for c in row.values()]
    silent, before = sum(c["silent"] for c in cells), sum(c["silent_before"] for c in cells)
    run_wide = sum(c["run_wide_only"] for c in cells)
    for h, r in hosts.items():
        print(f"{h}: fio waited for a CPU {r['cpu_wait_percent']}% of the step; {'; '.join(r['reasons'][:2])}")
    print(f"silent differences: {silent} (with rule 1 alone, as before the host was measured: {before})")
    print(f"differences for the data's cost caught only run-wide, not by the figure's own share: {run_wide}")
    flagged = {h: sum(bool(rules) for rules in r["rules"].values()) for h, r in hosts.items()}
    free_flagged = sum(any(r["rules"].values()) for r in free)
    print(f"free host: {free_flagged} of its {len(free)} runs flagged a figure for the host")
    result |= {"silent": silent, "silent_before": before, "run_wide_only": run_wide}
    result |= {"flagged": flagged, "free_flagged": free_flagged}
    result["ok"] = silent == 0 and run_wide == 0
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    keys = ("silent", "silent_before", "run_wide_only", "flagged", "free_flagged", "ok")
    print(json.dumps({k: result[k] for k in keys}))
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
