"""How far a suite's figures repeat, measured: a repeat set's headline figures (results/headline.py) across its
runs, each with its mean, sample standard deviation, coefficient of variation, minimum and maximum, and flagged
when the CoV is above the threshold its suite states (docs/methodology.md, "Repeatability").

The summary is computed from the stored runs each time it is asked for, never stored: the runs' own figures are
its one source, and a test can check it against them.
"""

import statistics

from . import headline, store


def summary(db, repeat_id):
    """A repeat set (store.get_repeat) with `counted`, the runs that ended done, whose figures the summary
    takes (a run cut short measured less than the suite asks), `figures`, one entry per headline figure, and
    `flagged`, how many of them are above their threshold. None when there is no such set."""
    out = store.get_repeat(db, repeat_id)
    if out is None:
        return None
    runs = [store.get_run(db, r["id"]) for r in out["runs"]]
    counted = [run for run in runs if run["state"] == "done"]
    found = {}
    for run in counted:
        for figure in headline.figures(run):
            found.setdefault(figure.key, []).append((run["id"], figure))
    out["counted"] = [run["id"] for run in counted]
    out["figures"] = [_figure(rows, out["thresholds"]) for rows in found.values()]
    out["flagged"] = sum(f["flagged"] for f in out["figures"])
    return out


def threshold(kind, thresholds):
    """The CoV threshold, in percent, for a kind of headline figure."""
    return thresholds["qd1_latency_cov_percent" if kind == headline.QD1_LATENCY else "cov_percent"]


def spread(values):
    """n, mean, sample standard deviation (n - 1), CoV in percent of the mean, minimum and maximum. With one
    value there is no spread, and with a mean of 0 no CoV: None."""
    mean = statistics.fmean(values)
    stdev = statistics.stdev(values) if len(values) > 1 else None
    return {
        "n": len(values),
        "mean": mean,
        "stdev": stdev,
        "cov_percent": 100 * stdev / abs(mean) if stdev is not None and mean else None,
        "min": min(values),
        "max": max(values),
    }


def _figure(rows, thresholds):
    first = rows[0][1]
    limit = threshold(first.kind, thresholds)
    stats = spread([f.value for _, f in rows])
    return {
        "key": first.key,
        "step": first.step,
        "name": first.name,
        "unit": first.unit,
        "kind": first.kind,
        "runs": [run_id for run_id, _ in rows],
        "values": [f.value for _, f in rows],
        **stats,
        "threshold_percent": limit,
        "flagged": stats["cov_percent"] is not None and stats["cov_percent"] > limit,
    }
