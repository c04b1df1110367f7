"""One store connection per request, closed when the request ends (as in the Flask tutorial)."""

from flask import current_app, g

from ..results import store


def get_db():
    if "db" not in g:
        g.db = store.connect(current_app.config["SSDBENCH_DATA_DIR"])
    return g.db


def close_db(exc=None):
    db = g.pop("db", None)
    if db is not None:
        db.close()
