"""Compare as a review publishes it: one horizontal bar chart per review figure (results/headline.py), the runs
ranked best to worst on one scale, the current run (the first asked for) marked, and the runs whose workload or
testbed (results/testbed.py's rule) differs from its marked apart where they rank, each saying how. A run of a
repeat set carries its set's spread of that figure.

Plain functions over run cards (results/card.py): the web UI, the offline compare and a lab server rank the
same way."""

from . import headline, repeatability, summary, testbed


def label(run):
    drive = run["drive"]
    return f"run {run['id']}: {drive.get('model') or drive.get('path') or 'unknown drive'}"


def charts(runs, sets=None):
    """One chart per review figure any run has, in headline.REVIEW's order: {id, label, unit, better, bars,
    scale, and not_reached: the runs whose steady state was not reached, where any}. runs (cards) [0] is the
    current run. `sets`, beside `runs`, holds for each run the done runs of its repeat set (cards), whose spread
    of the figure (n, mean, stdev, min, max) its bar carries, or None. Each bar:
    run, label, step, value, current, apart (its workload or testbed differs from the current run's), why (how,
    in words; empty when it is not apart), unverified (the parts of its testbed that compare only as unknown in
    both, "not verified: PART"), testbed (its CPU, controller and link), spread, host (why the PC is in the figure,
    validity rule 9, or None)."""
    sets = sets or [None] * len(runs)
    judged = [judge(runs[0], run) for run in runs]
    found = {}
    for run, held, (reasons, unverified) in zip(runs, sets, judged):
        apart = bool(reasons)
        for fig in run["review"]:
            chart = found.setdefault(fig["id"], {k: fig[k] for k in ("id", "label", "unit", "better", "test", "name")})
            chart.setdefault("bars", []).append(
                {
                    "run": run["id"],
                    "label": label(run),
                    "step": fig["step"],
                    "value": fig["value"],
                    "source": fig["source"],
                    "host": fig.get("host"),
                    "current": run is runs[0],
                    "apart": apart,
                    "why": reasons,
                    "unverified": unverified,
                    "testbed": testbed.summary(run.get("testbed")),
                    "spread": _spread(held, fig["id"]),
                }
            )
        # a steady state not reached has no bar, but the chart says whose it is (headline.not_reached)
        for fid in run.get("not_reached", []):
            chart = found.setdefault(fid, {**headline.column(fid), "test": None, "name": None})
            chart.setdefault("bars", [])
            chart.setdefault("not_reached", []).append(label(run))
    out = sorted(found.values(), key=lambda c: headline.review_order(c["id"]))
    for chart in out:
        chart["bars"] = ranked(chart["bars"], chart["better"])
        chart["scale"] = max([0.0] + [max(b["value"], (b["spread"] or {}).get("max", 0)) for b in chart["bars"]])
    return out


def judge(current, run):
    """(why `run` (a card) is not ranked with `current`: its workload differs, or its testbed differs in a part of
    results/testbed's rule, none of either an empty list; the parts of its testbed that compare unverified)."""
    out = [] if summary.workload(run) == summary.workload(current) else ["another workload"]
    theirs = (current.get("testbed") or {}).get("classes") or {}
    differs, unverified = testbed.judged(theirs, run.get("testbed"), f"run {current['id']}'s")
    return out + [f"testbed {d}" for d in differs], unverified


def set_apart(current, run):
    """Why `run` (a card) is not ranked with `current` (judge): an empty list when it is."""
    return judge(current, run)[0]


def ranked(bars, better):
    """Best first: the highest value when higher is better, else the lowest. A run set apart keeps its place by
    its value, so that one glance reads every run on one scale; its bar says it does not compare. Ties keep the
    order the runs were asked in."""
    sign = -1 if better == headline.HIGHER else 1
    return sorted(bars, key=lambda b: sign * b["value"])


def _spread(set_runs, figure_id):
    if not set_runs:
        return None
    values = [f["value"] for run in set_runs for f in run["review"] if f["id"] == figure_id]
    return repeatability.spread(values) if len(values) > 1 else None
