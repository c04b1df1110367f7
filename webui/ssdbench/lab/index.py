"""What the lab holds, in PostgreSQL: each bundle, and the testbeds, drives, runs and headline figures in it.

A run's document is never copied into the database: the pages read it from its bundle (`LabResults`), so a lab
shows a run exactly as its appliance wrote it, and the database stays an index that can be rebuilt from the
store.
"""

import json
import zipfile

from ..results import bundle
from . import shelf


def add_bundle(conn, sha256, size, manifest, host, runs, appliance):
    """Index a verified bundle (`runs`: admit.index_rows' checked rows), inside the caller's transaction. Returns
    the lab's ids of its runs, or None when the bundle is there already."""
    kind = "repeat" if "repeat" in manifest else "run"
    added = conn.execute(
        """INSERT INTO bundles (sha256, bytes, kind, appliance_id, host, manifest) VALUES (%s, %s, %s, %s, %s, %s)
           ON CONFLICT (sha256) DO NOTHING RETURNING sha256""",
        (sha256, size, kind, appliance["id"], host, json.dumps(manifest)),
    ).fetchone()
    if added is None:
        return None
    return [_add_run(conn, sha256, run, appliance) for run in runs]


def _id(conn, insert, values):
    """The id of the row `insert` adds, or of the one that was there (its ON CONFLICT DO UPDATE returns it)."""
    return conn.execute(insert, values).fetchone()["id"]


def _add_run(conn, sha256, run, appliance):
    testbed = _id(
        conn,
        """INSERT INTO testbeds (appliance_id, host, cpu, kernel) VALUES (%s, %s, %s, %s)
           ON CONFLICT (appliance_id, host, cpu, kernel) DO UPDATE SET host=excluded.host RETURNING id""",
        (appliance["id"], *run.testbed),
    )
    drive = _id(
        conn,
        """INSERT INTO drives (model, serial, firmware, capacity_bytes, transport) VALUES (%s, %s, %s, %s, %s)
           ON CONFLICT (model, serial, firmware) DO UPDATE SET capacity_bytes=excluded.capacity_bytes RETURNING id""",
        run.drive,
    )
    r = run.run
    run_id = _id(
        conn,
        """INSERT INTO runs (bundle_sha256, member, source_id, testbed_id, drive_id, path, suite, suite_hash,
                             standard, state, error, created_at, finished_at)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id""",
        (sha256, run.prefix, r["source_id"], testbed, drive, r["path"], r["suite"], r["suite_hash"], r["standard"])
        + (r["state"], r["error"], r["created_at"], r["finished_at"]),
    )
    for f in run.figures:
        conn.execute(
            """INSERT INTO figures (run_id, step, name, value, unit, kind) VALUES (%s, %s, %s, %s, %s, %s)
               ON CONFLICT DO NOTHING""",
            (run_id, f.step, f.name, f.value, f.unit, f.kind),
        )
    return run_id


def bundle_runs(conn, sha256):
    """The lab's ids of a bundle's runs, in the bundle's order."""
    return [r["id"] for r in conn.execute("SELECT id FROM runs WHERE bundle_sha256=%s ORDER BY id", (sha256,))]


def has_bundle(conn, sha256):
    return conn.execute("SELECT 1 FROM bundles WHERE sha256=%s", (sha256,)).fetchone() is not None


RUN_ROWS = """SELECT r.id, r.suite, r.suite_hash, r.standard, r.state, r.error, r.created_at, r.finished_at,
                     r.path, nullif(d.model, '') AS model, nullif(d.serial, '') AS serial, d.firmware,
                     r.source_id, t.host, a.name AS appliance, r.bundle_sha256, r.member,
                     extract(epoch FROM b.received_at)::float AS received_at
              FROM runs r JOIN drives d ON d.id = r.drive_id JOIN testbeds t ON t.id = r.testbed_id
                   JOIN appliances a ON a.id = t.appliance_id JOIN bundles b ON b.sha256 = r.bundle_sha256"""


def list_runs(conn):
    """Every run the lab holds, oldest first, in the shape of store.list_runs plus where it came from."""
    return [_row(r) for r in conn.execute(RUN_ROWS + " ORDER BY r.id")]


def _row(r):
    return {
        **r,
        "standard": int(r["standard"]),  # as an appliance's store gives it (the API's document: 0 or 1)
        "origin": f"run {r['source_id']} on {r['host']}, sent by {r['appliance']}",
        "percent": 100.0,
        "repeat_id": None,
    }


def run_row(conn, run_id):
    found = conn.execute(RUN_ROWS + " WHERE r.id=%s", (run_id,)).fetchone()
    return _row(found) if found else None


def figures(conn, run_id):
    return list(conn.execute("SELECT step, name, value, unit, kind FROM figures WHERE run_id=%s", (run_id,)))


class LabResults:
    """The runs of every appliance, for the same pages and API that show an appliance's own (web/data's
    LocalResults): each run's document as its bundle holds it, under the lab's run id."""

    def __init__(self, conn, store_dir):
        self.conn, self.store_dir = conn, store_dir

    def list_runs(self):
        return list_runs(self.conn)

    def run_document(self, run_id):
        row = run_row(self.conn, run_id)
        if row is None:
            return None
        path = shelf.bundle_path(self.store_dir, row["bundle_sha256"])
        with zipfile.ZipFile(path) as zf:
            doc = bundle.read_json(zf, row["member"] + bundle.RESULT, path)
        # The lab's id, where the run came from, and no repeat set: the lab shows runs, not the appliance's sets.
        doc.update(id=row["id"], origin=row["origin"], repeat=None, appliance=row["appliance"])
        doc["received_at"] = row["received_at"]
        doc["bundle_sha256"] = row["bundle_sha256"]
        return doc

    get_run = run_document

    def repeat_set(self, run):
        return None  # the lab shows runs, not the appliance's repeat sets

    def bundle_file(self, run_id):
        row = run_row(self.conn, run_id)
        return shelf.bundle_path(self.store_dir, row["bundle_sha256"]) if row else None
