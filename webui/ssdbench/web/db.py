"""One database connection per request, closed when the request ends (as in the Flask tutorial): the
appliance's SQLite store, or in lab mode the lab's PostgreSQL."""

from flask import current_app, g

from ..lab import index, schema
from ..results import store
from . import data


def lab_mode():
    return bool(current_app.config.get("SSDBENCH_LAB_DB"))


def get_db():
    if "db" not in g:
        g.db = store.connect(current_app.config["SSDBENCH_DATA_DIR"])
    return g.db


def get_lab():
    if "lab" not in g:
        g.lab = schema.connect(current_app.config["SSDBENCH_LAB_DB"])
    return g.lab


def get_results():
    """The runs the pages show: the appliance's own, or in lab mode every appliance's."""
    if lab_mode():
        return index.LabResults(get_lab(), current_app.config["SSDBENCH_LAB_STORE"])
    return data.LocalResults(get_db())


def close_db(exc=None):
    for name in ("db", "lab"):
        conn = g.pop(name, None)
        if conn is not None:
            conn.close()
