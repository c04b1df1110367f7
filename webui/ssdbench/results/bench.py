"""The drive bench: every drive model the results hold (imported runs included), one row each, its review
figures (results/headline.py) as columns, as a review site's Bench page. A model's row is its latest comparable
run that ended done, or its latest done run when none compares (then marked). Latest by when the results
received it: on a lab, its bundle's arrival (the lab's clock, received_at), never the date the document gives
itself, which an appliance's clock, or its sender, sets to anything; on an appliance, its creation. Plain
functions over run documents (store.get_run's shape): the web UI and a lab server make the same table."""

from . import document, headline


def model(run):
    drive = run["drive"]
    return drive.get("model") or drive.get("path") or "unknown drive"


def table(runs):
    """{columns, rows}: columns in headline.REVIEW's order, each {id, label, unit, better}, only those some row
    has; rows by model name, each {model, run, suite, suite_hash, comparable, runs (how many done runs the
    model has), created_at, origin, appliance (on a lab, the one that sent it), values (column id to value)}."""
    by_model = {}
    for run in runs:
        if run["state"] == "done":
            by_model.setdefault(model(run), []).append(run)
    rows, columns = [], {}
    for name, held in sorted(by_model.items(), key=lambda item: item[0].lower()):
        comparable = [r for r in held if not document.incomparable(r)]
        chosen = max(comparable or held, key=lambda r: (r.get("received_at", r["created_at"]), r["id"]))
        figures = headline.review(chosen)
        for fig in figures:
            columns.setdefault(fig["id"], {k: fig[k] for k in ("id", "label", "unit", "better")})
        rows.append(
            {
                "model": name,
                "run": chosen["id"],
                "suite": chosen["suite"],
                "suite_hash": chosen["suite_hash"],
                "comparable": bool(comparable),
                "runs": len(held),
                "created_at": chosen["created_at"],
                "origin": chosen.get("origin", "local"),
                "appliance": chosen.get("appliance"),
                "values": {fig["id"]: fig["value"] for fig in figures},
            }
        )
    return {"columns": sorted(columns.values(), key=lambda c: headline.review_order(c["id"])), "rows": rows}
