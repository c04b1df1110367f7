"""The database of a request: the appliance's SQLite store, one connection per request, closed when the request
ends (as in the Flask tutorial); or in lab mode the lab's PostgreSQL, where each server thread keeps its own
connection from one request to the next. PostgreSQL starts a process for each connection, which cost an upload
more than all its queries; a lab server's threads are few and fixed (web/lab_server), and so are its connections.
"""

import os
import threading

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


_kept = threading.local()


def get_lab():
    """This thread's connection to the app's lab database: the one it kept, unless that one broke or was left in
    a transaction (a request that died in one), or belongs to the process this one was forked from."""
    if "lab" not in g:
        key = (os.getpid(), current_app.config["SSDBENCH_LAB_DB"])
        kept = _kept.__dict__.setdefault("conns", {})
        conn = kept.get(key)
        if conn is None or not schema.reusable(conn):
            if conn is not None:
                conn.close()
            conn = kept[key] = schema.connect(key[1])
        g.lab = conn
    return g.lab


def get_results():
    """The runs the pages show: the appliance's own, or in lab mode every appliance's, each document read counted
    against the server process's budget (web.start_lab) until the request ends."""
    if lab_mode():
        return index.LabResults(get_lab(), current_app.config["SSDBENCH_LAB_STORE"], _take)
    return data.LocalResults(get_db())


def _take(size):
    current_app.extensions["ssdbench.budget"].take(size, g.get("documents", 0))
    g.documents = g.get("documents", 0) + size


def close_db(exc=None):
    if "documents" in g:
        current_app.extensions["ssdbench.budget"].give(g.pop("documents"))
    g.pop("lab", None)  # kept for the thread's next request
    conn = g.pop("db", None)
    if conn is not None:
        conn.close()
