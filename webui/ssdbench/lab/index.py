"""What the lab holds, in PostgreSQL: each bundle, and the testbeds, drives, runs and headline figures in it.

A run's document is never copied into the database: its run page reads it from its bundle (`LabResults`), so a
lab shows a run exactly as its appliance wrote it, and the database stays an index that can be rebuilt from the
store. What the pages that list or set side by side many runs read is in the index, so that none of them opens a
document and none costs more as runs accumulate: each run's card (results/card.py), and the bench's pick of each
drive model's run, kept up to date as bundles arrive (by results/bench.py's rule, written here in SQL).
"""

import json
import threading
import zipfile

from ..errors import SsdbenchError
from ..results import bench, bundle, card
from . import shelf

# Runs a transaction of fill_cards fills: at some 25 ms a run, a few seconds of work lost to a stop.
FILL_BATCH = 200


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
                             standard, state, error, created_at, started_at, finished_at, model, card)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id""",
        (sha256, run.prefix, r["source_id"], testbed, drive, r["path"], r["suite"], r["suite_hash"], r["standard"])
        + (r["state"], r["error"], r["created_at"], r["started_at"], r["finished_at"])
        + (bench.model(run.card), json.dumps(run.card)),
    )
    if r["state"] == "done":
        _bench_pick(conn, run_id)
    # One statement for all of them, as columns: a statement a figure cost the database a third of an upload's time.
    conn.execute(
        """INSERT INTO figures (run_id, step, name, value, unit, kind)
           SELECT %s, * FROM unnest(%s::text[], %s::text[], %s::float8[], %s::text[], %s::text[])
           ON CONFLICT DO NOTHING""",
        (
            run_id,
            [f.step for f in run.figures],
            [f.name for f in run.figures],
            [float(f.value) for f in run.figures],
            [f.unit for f in run.figures],
            [f.kind for f in run.figures],
        ),
    )
    return run_id


# The appliance that sent a run, whose trust puts the run on the bench.
_SENDER = "JOIN testbeds t ON t.id = r.testbed_id JOIN appliances a ON a.id = t.appliance_id"
# bench.order in SQL: a run replaces its model's pick when it is greater, comparable first, then received later.
_GREATER = "(excluded.comparable, excluded.received_at, excluded.run_id) > (b.comparable, b.received_at, b.run_id)"


def _bench_pick(conn, run_id):
    """Count a done run from a trusted appliance in its model's bench row, and make it the row's run if it is the
    greater by bench.order. The row's lock orders two uploads of one model."""
    conn.execute(
        f"""INSERT INTO bench AS b (model, run_id, comparable, received_at, runs)
            SELECT r.model, r.id, (r.card->>'comparable')::boolean, bu.received_at, 1
            FROM runs r JOIN bundles bu ON bu.sha256 = r.bundle_sha256 {_SENDER} WHERE r.id = %s AND a.trusted
            ON CONFLICT (model) DO UPDATE SET runs = b.runs + 1,
                run_id = CASE WHEN {_GREATER} THEN excluded.run_id ELSE b.run_id END,
                comparable = CASE WHEN {_GREATER} THEN excluded.comparable ELSE b.comparable END,
                received_at = CASE WHEN {_GREATER} THEN excluded.received_at ELSE b.received_at END""",
        (run_id,),
    )


def fill_cards(conn, store_dir, log=lambda message: None, batch=FILL_BATCH):
    """Give every run that has no card its card, from its bundle, in transactions of `batch` runs, each committed
    (`ssdbench lab migrate`, after a migration that made or emptied the cards: schema 2, 3, 4, 9). A run whose
    bundle cannot be read, or whose document gives no card, is skipped and keeps no card: its pages say it is
    being indexed, and the next `lab migrate` tries it again. The servers serve meanwhile. Then the bench is
    picked again from every run with a card. Returns (runs filled, [(run id, why) of those skipped])."""
    filled, skipped, after = 0, [], 0
    while True:
        rows = list(
            conn.execute(
                "SELECT id, bundle_sha256, member FROM runs WHERE card IS NULL AND id > %s ORDER BY id LIMIT %s",
                (after, batch),
            )
        )
        if not rows:
            break
        with conn.transaction():
            for row in rows:
                path = shelf.bundle_path(store_dir, row["bundle_sha256"])
                try:
                    with zipfile.ZipFile(path) as zf:
                        made = card.of(bundle.read_json(zf, row["member"] + bundle.RESULT, path))
                except (OSError, *bundle.DAMAGED, bundle.BundleError) as exc:
                    skipped.append((row["id"], f"its bundle {row['bundle_sha256']} cannot be read ({exc})"))
                    continue
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    skipped.append((row["id"], f"its document gives no card ({exc!r})"))
                    continue
                filled += conn.execute(
                    "UPDATE runs SET model=%s, card=%s WHERE id=%s AND card IS NULL",
                    (bench.model(made), json.dumps(made), row["id"]),
                ).rowcount
        after = rows[-1]["id"]
        log(f"{filled} cards made, up to run {after}")
    if filled:
        with conn.transaction():
            repick(conn)
    return filled, skipped


def repick(conn, models=None):
    """Pick the bench's run of these models again (None: of every model) from the done runs with a card that
    trusted appliances sent, inside the caller's transaction: a model with none left has no row."""
    conn.execute("LOCK TABLE bench IN EXCLUSIVE MODE")  # an upload's pick waits; the pages read on
    only = "" if models is None else " AND r.model = ANY(%(models)s)"
    models = [m for m in models or () if m is not None]
    conn.execute("DELETE FROM bench" + (" WHERE model = ANY(%(models)s)" if only else ""), {"models": models})
    conn.execute(
        f"""INSERT INTO bench (model, run_id, comparable, received_at, runs)
            SELECT DISTINCT ON (r.model) r.model, r.id, (r.card->>'comparable')::boolean, b.received_at,
                   count(*) OVER (PARTITION BY r.model)
            FROM runs r JOIN bundles b ON b.sha256 = r.bundle_sha256 {_SENDER}
            WHERE r.state = 'done' AND r.card IS NOT NULL AND a.trusted{only}
            ORDER BY r.model, (r.card->>'comparable')::boolean DESC, b.received_at DESC, r.id DESC""",
        {"models": models},
    )


def trust(conn, name, trusted):
    """Whether the bench shows the runs the appliance `name` sent (a token's trust, which the lab's operator
    gives): its models' bench rows are picked again at once. Returns the models picked again."""
    with conn.transaction():
        conn.execute("LOCK TABLE bench IN EXCLUSIVE MODE")  # before the change, so no upload picks by the old trust
        found = conn.execute(
            "UPDATE appliances SET trusted = %s WHERE name = %s RETURNING id", (trusted, name)
        ).fetchone()
        if found is None:
            raise SsdbenchError(f"no appliance {name}")
        models = [
            r["model"]
            for r in conn.execute(
                "SELECT DISTINCT r.model FROM runs r JOIN testbeds t ON t.id = r.testbed_id WHERE t.appliance_id = %s",
                (found["id"],),
            )
        ]
        repick(conn, models)
    return models


def remove_bundle_rows(conn, sha256):
    """A bundle's rows and its runs' (their figures; each of their models' bench row picked again from the runs
    left), inside the caller's transaction. Returns the lab's ids of the runs it held."""
    held = list(conn.execute("SELECT id, model FROM runs WHERE bundle_sha256 = %s ORDER BY id", (sha256,)))
    conn.execute("LOCK TABLE bench IN EXCLUSIVE MODE")
    # Before the runs go: a bench row names its run.
    conn.execute("DELETE FROM bench WHERE run_id = ANY(%s)", ([r["id"] for r in held],))
    conn.execute("DELETE FROM bundles WHERE sha256 = %s", (sha256,))
    repick(conn, {r["model"] for r in held})
    return [r["id"] for r in held]


def bundle_runs(conn, sha256):
    """The lab's ids of a bundle's runs, in the bundle's order."""
    return [r["id"] for r in conn.execute("SELECT id FROM runs WHERE bundle_sha256=%s ORDER BY id", (sha256,))]


def bundle_holding(conn, run_id):
    """The sha256 of the bundle that holds the run, and the lab's ids of every run in it; None without the run."""
    found = conn.execute("SELECT bundle_sha256 FROM runs WHERE id = %s", (run_id,)).fetchone()
    if found is None:
        return None
    return found["bundle_sha256"], bundle_runs(conn, found["bundle_sha256"])


def has_bundle(conn, sha256):
    return conn.execute("SELECT 1 FROM bundles WHERE sha256=%s", (sha256,)).fetchone() is not None


RUN_COLUMNS = """SELECT r.id, r.suite, r.suite_hash, r.standard, r.state, r.error, r.created_at, r.finished_at,
                     r.path, nullif(d.model, '') AS model, nullif(d.serial, '') AS serial, d.firmware,
                     r.source_id, t.host, a.name AS appliance, r.bundle_sha256, r.member,
                     extract(epoch FROM b.received_at)::float AS received_at"""
RUN_JOINS = """ JOIN drives d ON d.id = r.drive_id JOIN testbeds t ON t.id = r.testbed_id
                   JOIN appliances a ON a.id = t.appliance_id JOIN bundles b ON b.sha256 = r.bundle_sha256"""
RUN_ROWS = RUN_COLUMNS + " FROM runs r" + RUN_JOINS
CARD_ROWS = RUN_COLUMNS + ", r.card FROM runs r" + RUN_JOINS
# The bench's models in order of name (the index bench_name), and a page of their picks, each with its run's row
# and card: the page is taken from the bench alone, then joined, so that a page deep in it costs what the first does.
BENCH_ORDER = """lower(p.model) COLLATE "C", p.model"""
# A name's start as a range of the index (in code-point order, "C"), which a LIKE with a parameter is not: from
# the start itself to the start followed by the last code point.
BENCH_NAMED = """ WHERE lower(p.model) COLLATE "C" >= lower(%(name)s)
                    AND lower(p.model) COLLATE "C" < lower(%(name)s) || chr(1114111)"""
BENCH_PAGE = (
    RUN_COLUMNS
    + ", r.card, p.runs FROM (SELECT p.model, p.run_id, p.runs FROM bench p{named} ORDER BY "
    + BENCH_ORDER
    + " OFFSET %(offset)s LIMIT %(limit)s) p JOIN runs r ON r.id = p.run_id"
    + RUN_JOINS
    + " WHERE r.card IS NOT NULL ORDER BY "
    + BENCH_ORDER
)
# Rows `lab runs` reads from the database at a time.
STREAM_ROWS = 1000


def list_runs(conn):
    """Every run the lab holds, oldest first, in the shape of store.list_runs plus where it came from: read from
    a server-side cursor STREAM_ROWS at a time, so that a lab of a million runs lists them in the memory of a few."""
    with conn.transaction(), conn.cursor(name="list_runs") as cur:
        cur.itersize = STREAM_ROWS
        for r in cur.execute(RUN_ROWS + " ORDER BY r.id"):
            yield _row(r)


def runs_page(conn, before, limit):
    """Up to `limit` runs, newest first, those with an id below `before` (None: from the newest), as list_runs."""
    rows = conn.execute(RUN_ROWS + " WHERE r.id < %s ORDER BY r.id DESC LIMIT %s", (before or 2**31 - 1, limit))
    return [_row(r) for r in rows]


def _row(r):
    return {
        **{k: v for k, v in r.items() if k not in ("card", "runs")},
        "standard": int(r["standard"]),  # as an appliance's store gives it (the API's document: 0 or 1)
        "origin": f"run {r['source_id']} on {r['host']}, sent by {r['appliance']}",
        "percent": 100.0,
        "repeat_id": None,
    }


def _card(r):
    """A run's card as the lab shows it: under the lab's id, with where it came from and when it arrived."""
    row = _row(r)
    return {**r["card"], **{k: row[k] for k in ("id", "origin", "appliance", "received_at")}}


class BeingIndexed(LookupError):
    """Runs the lab holds that have no card yet (fill_cards has not reached them, or could not fill them)."""


def cards(conn, run_ids):
    """The cards of these runs, in this order. Raises LookupError naming those the lab does not hold, and
    BeingIndexed those that have no card yet."""
    found = {r["id"]: r for r in conn.execute(CARD_ROWS + " WHERE r.id = ANY(%s)", (list(run_ids),))}
    missing = [str(i) for i in run_ids if i not in found]
    if missing:
        raise LookupError(f"no run {', '.join(missing)}")
    waiting = [str(i) for i in run_ids if found[i]["card"] is None]
    if waiting:
        raise BeingIndexed(f"run {', '.join(waiting)} is being indexed: compare it in a few minutes")
    return [_card(found[i]) for i in run_ids]


def bench_page(conn, name, offset, limit):
    """bench.latest's rows, from the bench's picks, by model name: up to `limit` of those whose model begins with
    `name` (any case; "" for all), after the first `offset`. A model whose run is being indexed is left out."""
    sql = BENCH_PAGE.format(named=BENCH_NAMED if name else "")
    rows = conn.execute(sql, {"name": name, "offset": offset, "limit": limit})
    return [(_card(r), r["runs"]) for r in rows]


def run_row(conn, run_id):
    found = conn.execute(RUN_ROWS + " WHERE r.id=%s", (run_id,)).fetchone()
    return _row(found) if found else None


def figures(conn, run_id):
    return list(conn.execute("SELECT step, name, value, unit, kind FROM figures WHERE run_id=%s", (run_id,)))


class Busy(SsdbenchError):
    """The server process reads as many run documents as its budget holds: the request may be sent again."""


class TooLarge(SsdbenchError):
    """The runs a request asks for hold more of documents than a server process reads at once."""


class Budget:
    """The bytes of run documents a server process has parsed for the requests it serves (a document takes about
    9 times its size in memory as it is parsed): a request takes what it reads, and gives it back as it ends."""

    def __init__(self, total, wait_s):
        self.total, self.wait_s, self.used = total, wait_s, 0
        self.changed = threading.Condition()

    def take(self, size, held):
        """Count `size` bytes more for a request that holds `held` already: waits for them up to wait_s, then
        raises Busy; raises TooLarge when the request's own would pass the total."""
        if held + size > self.total:
            raise TooLarge(
                f"the runs asked for hold over {self.total >> 20} MiB of results, what this lab reads for one page: "
                "compare fewer runs"
            )
        with self.changed:
            if not self.changed.wait_for(lambda: self.used + size <= self.total, self.wait_s):
                raise Busy(f"this lab server is reading {self.used >> 20} MiB of results for other pages: try again")
            self.used += size

    def give(self, size):
        with self.changed:
            self.used -= size
            self.changed.notify_all()


class LabResults:
    """The runs of every appliance, for the same pages and API that show an appliance's own (web/data's
    LocalResults): each run's document as its bundle holds it, under the lab's run id. `take(size)` counts a
    document's bytes against the server's Budget before it is parsed."""

    def __init__(self, conn, store_dir, take=lambda size: None):
        self.conn, self.store_dir, self.take = conn, store_dir, take

    def runs_page(self, before, limit):
        return runs_page(self.conn, before, limit)

    def cards(self, run_ids):
        return cards(self.conn, run_ids)

    def bench_page(self, name, offset, limit):
        return bench_page(self.conn, name, offset, limit)

    def run_document(self, run_id):
        row = run_row(self.conn, run_id)
        if row is None:
            return None
        path = shelf.bundle_path(self.store_dir, row["bundle_sha256"])
        with zipfile.ZipFile(path) as zf:
            self.take(zf.getinfo(row["member"] + bundle.RESULT).file_size)
            doc = bundle.read_json(zf, row["member"] + bundle.RESULT, path)
        # The lab's id, where the run came from, and no repeat set: the lab shows runs, not the appliance's sets.
        doc.update(id=row["id"], origin=row["origin"], repeat=None, appliance=row["appliance"])
        doc["received_at"] = row["received_at"]
        doc["bundle_sha256"] = row["bundle_sha256"]
        return doc

    get_run = run_document

    def repeat_set(self, run_id):
        return None  # the lab shows runs, not the appliance's repeat sets

    def bundle_file(self, run_id):
        """(the path of the run's bundle in the store, the name it is downloaded as), None for no such run: from
        the index alone, the bundle as it came, unopened."""
        found = self.conn.execute(
            """SELECT r.bundle_sha256, r.suite, r.created_at, r.started_at, r.path, d.model, d.serial
               FROM runs r JOIN drives d ON d.id = r.drive_id WHERE r.id = %s""",
            (run_id,),
        ).fetchone()
        if found is None:
            return None
        drive = {k: found[k] for k in ("model", "serial", "path")}
        return shelf.bundle_path(self.store_dir, found["bundle_sha256"]), bundle.bundle_name({**found, "drive": drive})
