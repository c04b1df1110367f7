"""The drive bench: every drive model the results hold (imported runs included), one row each, its review
figures (results/headline.py) as columns, as a review site's Bench page. A model's row is its latest comparable
run that ended done, or its latest done run when none compares (then marked). Latest by when the results
received it: on a lab, its bundle's arrival (the lab's clock, received_at), never the date the document gives
itself, which an appliance's clock, or its sender, sets to anything; on an appliance, its creation.

Each row shows its run's testbed (CPU, host controller, link) and is marked where that testbed differs from the
reference testbed, the one that is all the suite asks (results/testbed.py's rule), naming how.

Plain functions over run cards (results/card.py). An appliance picks each model's run here (`latest`); a lab
keeps the pick in its index as bundles arrive (lab/index.py), by the same rule, and only tabulates."""

from . import headline, ranking, testbed


def model(run):
    drive = run["drive"]
    return drive.get("model") or drive.get("path") or "unknown drive"


def order(run):
    """Which of a model's done runs its row shows: the greatest (comparable first, then the latest received)."""
    return (run["comparable"], run.get("received_at", run["created_at"]), run["id"])


def latest(runs):
    """Each model's row, by model name: (its chosen card, how many done runs the model has)."""
    by_model = {}
    for run in runs:
        if run["state"] == "done":
            by_model.setdefault(model(run), []).append(run)
    return [(max(held, key=order), len(held)) for _, held in sorted(by_model.items(), key=lambda i: i[0].lower())]


def table(rows):
    """{columns, rows} of `latest`'s rows: columns in headline.REVIEW's order, each {id, label, unit, better},
    only those some row has; rows in the given order, each {model, run, suite, suite_hash, comparable, runs (how
    many done runs the model has), created_at, origin, appliance (on a lab, the one that sent it), values
    (column id to value), host (column id to why the PC is in that figure, where it is), not_reached, testbed
    (its CPU, controller and link, in words), testbed_differs (how it differs from the reference testbed; empty:
    it does not), testbed_unverified (its parts that are unknown, so not verified against the reference)}."""
    out, columns = [], {}
    for chosen, count in rows:
        differs, unverified = testbed.judged(
            testbed.REFERENCE, chosen.get("testbed"), "the reference testbed's", ideal=True
        )
        for fig in chosen["review"]:
            columns.setdefault(fig["id"], {k: fig[k] for k in ("id", "label", "unit", "better")})
        for fid in chosen.get("not_reached", []):
            columns.setdefault(fid, headline.column(fid))
        out.append(
            {
                "model": model(chosen),
                "run": chosen["id"],
                "suite": chosen["suite"],
                "suite_hash": chosen["suite_hash"],
                "comparable": chosen["comparable"],
                "runs": count,
                "created_at": chosen["created_at"],
                "origin": chosen.get("origin", "local"),
                "appliance": chosen.get("appliance"),
                "values": {fig["id"]: fig["value"] for fig in chosen["review"]},
                # why the PC is in a figure (validity rule 9), by column: a card made before has none
                "host": {fig["id"]: fig["host"] for fig in chosen["review"] if fig.get("host")},
                # a steady state not reached is said so, not left as "not measured" (headline.not_reached)
                "not_reached": chosen.get("not_reached", []),
                "testbed": testbed.summary(chosen.get("testbed")),
                "testbed_differs": differs,
                "testbed_unverified": unverified,
            }
        )
    return {"columns": sorted(columns.values(), key=lambda c: headline.review_order(c["id"])), "rows": out}


def chart(bench, figure_id):
    """The bench as a review site's Bench shows one figure: every model that has it as a ranked bar (a chart of
    results/report_html.bar_chart), the best first and marked, its testbed and how it differs from the reference
    testbed in the bar's hover. None when no row has the figure."""
    column = next((c for c in bench["columns"] if c["id"] == figure_id), None)
    if column is None:
        return None
    bars = [
        {
            "run": r["run"],
            "label": r["model"],
            "value": r["values"][figure_id],
            "source": f"run {r['run']}, {r['suite']}",
            "host": r["host"].get(figure_id),
            "current": False,
            "apart": bool(r["testbed_differs"]),
            "why": [f"testbed {d}" for d in r["testbed_differs"]],
            # a row stored before the bench said what it could not verify has nothing to say
            "unverified": r.get("testbed_unverified", []),
            "testbed": r["testbed"],
            "spread": None,
        }
        for r in bench["rows"]
        if figure_id in r["values"]
    ]
    bars = ranking.ranked(bars, column["better"])
    if bars:
        bars[0]["best"] = True
    gone = [r["model"] for r in bench["rows"] if figure_id in r["not_reached"]]
    return {**column, "bars": bars, "scale": max([0.0] + [b["value"] for b in bars]), "not_reached": gone}


def fineprint(bench):
    """The small print under the bench's chart: the suites its rows ran."""
    return "suite " + " / ".join(dict.fromkeys(f"{r['suite']} {r['suite_hash'][:12]}" for r in bench["rows"]))
