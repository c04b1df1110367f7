"""make bench, testbeds part: the same figures on three testbeds simulated on one machine, and whether every
difference the PC makes is flagged (docs/methodology.md, "The host's share of a figure").

On one loop device, the suite bench/testbeds.toml (a fill, then the four corners and a QD1 random read) runs as
`ssdbench run` on:
  (a) a free host, --free times (5), for each figure's own CoV;
  (b) a slow host: the runner and its fio in a CPU cgroup with 30% of one CPU (cpu.cfs_quota_us on cgroup v1,
      cpu.max on v2);
  (c) a busy host: two CPU-bound neighbours beside the run.
For each figure: the ratios b/a and c/a (to (a)'s mean) beside (a)'s CoV, and whether that run flagged the figure
by a reason of the host: fio's core over 90% in the figure's own job (validity rule 1), its job's host share or
the step's wait for a CPU (rule 9), or a testbed whose calibration found fio short of a whole CPU. The loop
device's own testbed flags (its purge is a discard) flag every run alike and are not the host's: they are left
out. A silent difference is a ratio outside +/-2 x CoV on a figure its run did not flag; the count must be 0, and
"before" counts them with rule 1 alone, the only host rule before the host's cost was measured. It also says how
many of the free host's runs flagged a figure: where they all do, the host is not free, and the count proves
little.

Needs root, fio and a CPU cgroup. --short (make test) runs (a) twice and (b) and (c) once: it checks that every
part works and prints the count, and fails only when a part does not work; the full bench fails on a silent
difference too. --json writes the whole result; the last line printed is a short one.
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
    run_flags = [f for f in testbed.flags(stored) if f.startswith(validity.HOST_CAUSE)]
    flagged, by_rule_1 = {}, {}
    for name, metric, _ in FIGURES:
        # the figure's own job: its rule 1 (fio's core) and rule 9 (its host share, the step's CPU wait)
        job = metric.split(".")[0] + "."
        own = {k.removeprefix(job): v for k, v in metrics.items() if k.startswith(job)}
        rule_1 = validity.cpu_bound(own)
        host = validity.host_bound({**own, "host.cpu_wait_percent": metrics.get("host.cpu_wait_percent", 0.0)})
        flagged[name], by_rule_1[name] = [*rule_1, *host, *run_flags], rule_1
    return {
        "figures": {name: metrics[metric] for name, metric, _ in FIGURES},
        "flagged": {name: bool(reasons) for name, reasons in flagged.items()},
        "flagged_by_rule_1": {name: bool(reasons) for name, reasons in by_rule_1.items()},
        "reasons": sorted({r for reasons in flagged.values() for r in reasons}),
        "cpu_wait_percent": metrics.get("host.cpu_wait_percent"),
        "host_share_percent": {k: round(v, 2) for k, v in metrics.items() if k.endswith("host_share_percent")},
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


def compare(free, other):
    """Per figure: the ratio to the free host's mean, whether it is outside +/-2 x CoV, and whether it was flagged
    (by every rule, and by rule 1 alone)."""
    out = {}
    for name, _, _ in FIGURES:
        values = [r["figures"][name] for r in free]
        mean = statistics.mean(values)
        cov = 100 * statistics.stdev(values) / mean if len(values) > 1 and mean else 0.0
        ratio = other["figures"][name] / mean if mean else None
        outside = ratio is not None and abs(ratio - 1) * 100 > 2 * cov
        out[name] = {
            "ratio": ratio,
            "cov_percent": cov,
            "outside": outside,
            "flagged": other["flagged"][name],
            "silent": outside and not other["flagged"][name],
            "silent_before": outside and not other["flagged_by_rule_1"][name],
        }
    return out


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--short", action="store_true", help="(a) twice, (b) and (c) once; fail only if a part fails")
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
    print(f"{'figure':26s}{'CoV (a)':>9s}" + "".join(f"{h + ' / a':>16s}{'flagged':>9s}" for h in hosts))
    for name, _, _ in FIGURES:
        row = {h: compare(free, r)[name] for h, r in hosts.items()}
        result["figures"][name] = row
        cov = next(iter(row.values()))["cov_percent"]
        cells = "".join(
            f"{c['ratio']:>15.3f}{'!' if c['silent'] else ' '}{'yes' if c['flagged'] else 'no':>9s}"
            for c in row.values()
        )
        print(f"{name:26s}{cov:>8.2f}%" + cells)
    silent = sum(c["silent"] for row in result["figures"].values() for c in row.values())
    before = sum(c["silent_before"] for row in result["figures"].values() for c in row.values())
    for h, r in hosts.items():
        print(f"{h}: fio waited for a CPU {r['cpu_wait_percent']}% of the step; {'; '.join(r['reasons'][:2])}")
    print(f"silent differences: {silent} (with rule 1 alone, as before the host was measured: {before})")
    flagged = {h: sum(r["flagged"].values()) for h, r in hosts.items()}
    free_flagged = sum(any(r["flagged"].values()) for r in free)
    print(f"free host: {free_flagged} of its {len(free)} runs flagged a figure for the host")
    result |= {"silent": silent, "silent_before": before, "flagged": flagged, "free_flagged": free_flagged}
    result["ok"] = silent == 0 or a.short
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    print(json.dumps({k: result[k] for k in ("silent", "silent_before", "flagged", "free_flagged", "ok")}))
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
