"""A run's card: the little of its document that compare, the ranked bars and the bench read, so that a lab can
keep it beside its index and build those pages from SQL, never opening a document, while an appliance makes it
from its own documents when asked. The keys it shares with a run document (id, suite, drive, environment's
suite and tools, state) have the same shape, so a card goes wherever those keys are all that is read.

Every string of a card is capped at run_schema.TEXT characters: a lab admits no longer one in a document, and the
card's own texts (a testbed's description, a warning) are made of a few of them; compare and the bench show every
card they list.
"""

from . import document, headline, run_schema, testbed, validity


def of(run):
    """The card of a run document (or store.get_run's shape)."""
    drive = run["drive"]
    suspects = validity.suspects(run)
    return _capped(
        {
            "id": run["id"],
            "suite": run["suite"],
            "suite_hash": run["suite_hash"],
            "standard": run["standard"],
            "state": run["state"],
            "created_at": run["created_at"],
            "drive": {k: drive.get(k) for k in ("model", "path", "serial")},
            "environment": {
                "suite": {"workload_sha256": document.recorded(run, "suite", "workload_sha256")},
                "tools": {"fio": document.recorded(run, "tools", "fio")},
            },
            "review": headline.review(run),
            "not_reached": [f["id"] for f in headline.not_reached(run)],
            "warnings": document.run_warnings(run, suspects),
            "testbed": testbed.of(run, suspects),
            "comparable": not document.incomparable(run),
            **{k: run[k] for k in ("origin", "appliance", "received_at") if k in run},
        }
    )


def _capped(value):
    if isinstance(value, str):
        return value if len(value) <= run_schema.TEXT else value[: run_schema.TEXT - 1] + "\N{HORIZONTAL ELLIPSIS}"
    if isinstance(value, dict):
        return {k: _capped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_capped(v) for v in value]
    return value
