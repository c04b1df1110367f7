"""A run's summary, the first screen of its page and of its offline report: the drive's identity, the suite and
its hashes and whether the result compares, the review figures (results/headline.py, one per methodology test)
and the validity flags by cause (results/causes.py). Computed from the run alone (store.get_run's shape or a run
document), so the web UI, report.html and a lab server that holds the same documents show the same summary."""

from . import causes, document, headline


def of(run):
    drive = run["drive"]
    reasons = document.incomparable(run)
    return {
        "id": run["id"],
        "state": run["state"],
        "drive": {k: drive.get(k) for k in ("model", "serial", "firmware", "path", "transport", "capacity_bytes")},
        "suite": run["suite"],
        "suite_hash": run["suite_hash"],
        "standard": bool(run["standard"]),
        "workload_sha256": document.recorded(run, "suite", "workload_sha256"),
        "fio": document.recorded(run, "tools", "fio"),
        "comparable": not reasons,
        "incomparable": reasons,
        "figures": headline.review(run),
        "cdm": cdm_grid(run),
        "not_reached": headline.not_reached(run),
        "causes": causes.of(run),
        "emulated": causes.emulated(run),
        "origin": run.get("origin", "local"),
    }


# CrystalDiskMark's four presets, in its order (the suites' cdm step, methodology 9): a test's read and write are
# the jobs <test>-read and <test>-write, and fio names their metrics after them.
CDM_TESTS = ("SEQ1M-Q8T1", "SEQ1M-Q1T1", "RND4K-Q32T1", "RND4K-Q1T1")


def cdm_grid(run):
    """CrystalDiskMark's grid from the run's done cdm step: a row for each preset with its read and write MB/s
    and IOPS (metric dicts, None where not measured); None when the run has no such step."""
    step = next((s for s in run["steps"] if s["key"].startswith("cdm") and s["state"] == "done"), None)
    if step is None:
        return None
    metrics = {m["name"]: m for m in step["metrics"] if isinstance(m["value"], (int, float))}
    rows = [
        {
            "test": test,
            **{
                rw: {what: metrics.get(f"{test}-{rw}.{rw}.{what}") for what in ("mb_s", "iops")}
                for rw in ("read", "write")
            },
        }
        for test in CDM_TESTS
    ]
    return rows if any(r[rw]["mb_s"] for r in rows for rw in ("read", "write")) else None


def workload(run):
    """What two runs must share for their figures to stand in one ranking: the workload hash (job files, data
    pattern, traces), or the suite's hash for a run recorded before the workload hash was."""
    return document.recorded(run, "suite", "workload_sha256") or f"suite {run['suite_hash']}"


def fineprint(runs):
    """The small print under a chart: the fio versions and suite hashes its runs used."""
    fios = dict.fromkeys(document.recorded(r, "tools", "fio") or "fio not recorded" for r in runs)
    suites = dict.fromkeys(f"{r['suite']} {r['suite_hash'][:12]}" for r in runs)
    return f"{' / '.join(fios)} · suite {' / '.join(suites)}"
