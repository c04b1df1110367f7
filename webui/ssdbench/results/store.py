"""The results store: SQLite in WAL mode, plain SQL, schema versioned with PRAGMA user_version.

This is the only module that writes SQL. The raw fio outputs live beside the
database, under runs/<run id>/, and each step row names its folder. The store owns
both the run states and those folders: everything else asks it for them.
"""

import contextlib
import fcntl
import json
import os
import shutil
import sqlite3
import time

from ..errors import SsdbenchError

DB_NAME = "ssdbench.db"
RUNS_DIR = "runs"
LOCKS_DIR = "locks"
STATES = ("queued", "running", "done", "failed", "cancelled", "interrupted")
ACTIVE = STATES[:2]  # waiting for the drive, or using it: at most one run at a time
ENDED = STATES[2:]
RESERVE_NAME = "room.reserve"
RESERVE_BYTES = 8 * 1024 * 1024
# Free space below this is a full data partition: a write that meets ENOSPC fills every block it can first.
FULL_BELOW = 1024 * 1024

# Each entry moves the schema up one version; never edit one that has shipped.
MIGRATIONS = [
    """
    CREATE TABLE drives (
        id INTEGER PRIMARY KEY,
        identity_key TEXT NOT NULL UNIQUE,
        path TEXT NOT NULL,
        model TEXT,
        serial TEXT,
        firmware TEXT,
        capacity_bytes INTEGER,
        transport TEXT,
        identity_json TEXT NOT NULL
    );
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        drive_id INTEGER NOT NULL REFERENCES drives(id),
        suite TEXT NOT NULL,
        suite_hash TEXT NOT NULL,
        standard INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('queued','running','done','failed','cancelled','interrupted')),
        origin TEXT NOT NULL DEFAULT 'local',
        created_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL,
        error TEXT,
        environment_json TEXT,
        pid INTEGER,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        step_index INTEGER,
        step_count INTEGER NOT NULL,
        percent REAL NOT NULL DEFAULT 0,
        eta_s REAL,
        cur_iops REAL,
        cur_bw REAL,
        progress_at REAL
    );
    CREATE TABLE steps (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        key TEXT NOT NULL,
        kind TEXT NOT NULL,
        title TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',
        estimate_s REAL,
        started_at REAL,
        finished_at REAL,
        error TEXT,
        job_file TEXT,
        out_dir TEXT,
        detail_json TEXT,
        UNIQUE (run_id, idx)
    );
    CREATE TABLE metrics (
        id INTEGER PRIMARY KEY,
        step_id INTEGER NOT NULL REFERENCES steps(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        value REAL NOT NULL,
        unit TEXT NOT NULL,
        source TEXT NOT NULL,
        UNIQUE (step_id, name)
    );
    CREATE TABLE series (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        step_id INTEGER REFERENCES steps(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        unit TEXT NOT NULL,
        source TEXT NOT NULL
    );
    CREATE TABLE points (
        series_id INTEGER NOT NULL REFERENCES series(id) ON DELETE CASCADE,
        t_ms INTEGER NOT NULL,
        value REAL NOT NULL
    );
    CREATE INDEX points_by_series ON points (series_id, t_ms);
    CREATE INDEX series_by_run ON series (run_id);
    """,
    # Curves that are not against time: MB/s against block size, or against a zone's offset.
    """
    ALTER TABLE series ADD COLUMN x_unit TEXT NOT NULL DEFAULT 'ms';
    """,
    # What the tester asked for when queueing a run from the web (device, confirmation, options):
    # the runner service checks it again when it takes the run.
    """
    ALTER TABLE runs ADD COLUMN request_json TEXT;
    """,
    # A run imported from a bundle names where it came from; the same bundle cannot come in twice.
    """
    CREATE UNIQUE INDEX runs_by_origin ON runs (origin) WHERE origin <> 'local';
    """,
    # A run id is never given again (AUTOINCREMENT), so a link or a bundle never names a run it was not
    # about; and each run keeps the drive's identity as it was then (drive_json): importing or testing
    # the drive again updates the drives row, never an earlier run. Rebuilt as SQLite's ALTER TABLE
    # procedure says, with foreign keys off (see connect).
    """
    CREATE TABLE runs_new (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        drive_id INTEGER NOT NULL REFERENCES drives(id),
        suite TEXT NOT NULL,
        suite_hash TEXT NOT NULL,
        standard INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('queued','running','done','failed','cancelled','interrupted')),
        origin TEXT NOT NULL DEFAULT 'local',
        created_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL,
        error TEXT,
        environment_json TEXT,
        pid INTEGER,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        step_index INTEGER,
        step_count INTEGER NOT NULL,
        percent REAL NOT NULL DEFAULT 0,
        eta_s REAL,
        cur_iops REAL,
        cur_bw REAL,
        progress_at REAL,
        request_json TEXT,
        drive_json TEXT NOT NULL
    );
    INSERT INTO runs_new
        SELECT runs.id, drive_id, suite, suite_hash, standard, state, origin, created_at, started_at,
               finished_at, error, environment_json, pid, cancel_requested, step_index, step_count, percent,
               eta_s, cur_iops, cur_bw, progress_at, request_json, drives.identity_json
        FROM runs JOIN drives ON drives.id = runs.drive_id;
    DROP TABLE runs;
    ALTER TABLE runs_new RENAME TO runs;
    CREATE UNIQUE INDEX runs_by_origin ON runs (origin) WHERE origin <> 'local';
    """,
    # Repeat sets: a suite run `times` times in a row on one drive, to measure how far its figures repeat. The
    # set keeps the CoV thresholds its suite stated (thresholds_json), so its summary needs no suite file; each
    # of its runs is linked at its place in the set. A run deleted leaves the set with the others.
    """
    CREATE TABLE repeats (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        suite TEXT NOT NULL,
        suite_hash TEXT NOT NULL,
        standard INTEGER NOT NULL,
        times INTEGER NOT NULL CHECK (times >= 2),
        state TEXT NOT NULL CHECK (state IN ('queued','running','done','failed','cancelled','interrupted')),
        origin TEXT NOT NULL DEFAULT 'local',
        created_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL,
        error TEXT,
        pid INTEGER,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        thresholds_json TEXT NOT NULL,
        request_json TEXT,
        drive_json TEXT NOT NULL
    );
    CREATE UNIQUE INDEX repeats_by_origin ON repeats (origin) WHERE origin <> 'local';
    CREATE TABLE repeat_runs (
        repeat_id INTEGER NOT NULL REFERENCES repeats(id) ON DELETE CASCADE,
        run_id INTEGER NOT NULL UNIQUE REFERENCES runs(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        PRIMARY KEY (repeat_id, position)
    );
    """,
    # The live view's history: the runner's progress samples (fio's IOPS and bytes/s as it runs), so that a page
    # opened or reloaded during a run draws it from its start. Not a result: no document or bundle holds them.
    """
    CREATE TABLE progress_samples (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        t_ms INTEGER NOT NULL,
        percent REAL NOT NULL,
        iops REAL,
        bw REAL
    );
    CREATE INDEX progress_samples_by_run ON progress_samples (run_id, t_ms);
    """,
]


def db_path(data_dir):
    return os.path.join(data_dir, DB_NAME)


def run_folder(run_id):
    """A run's folder, relative to the data folder: runs/<id>."""
    return os.path.join(RUNS_DIR, str(int(run_id)))


def step_folder(run_id, index, key):
    """A step's folder, relative to the data folder, as its step row names it: runs/<id>/<nn>-<key>."""
    return os.path.join(run_folder(run_id), f"{index:02d}-{key}")


def run_dir(data_dir, run_id):
    return os.path.join(data_dir, run_folder(run_id))


def run_files(data_dir, run_id):
    """The raw files of a run (job files, fio's JSON and logs), as paths relative to its folder."""
    top = run_dir(data_dir, run_id)
    out = []
    for folder, dirs, files in os.walk(top):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            out.append({"path": os.path.relpath(path, top), "bytes": os.path.getsize(path)})
    return out


class DataFull(SsdbenchError):
    """The data partition has no room left for a write (SQLite's SQLITE_FULL, or ENOSPC)."""


class _Connection(sqlite3.Connection):
    """A connection whose writes that meet a full disk raise DataFull, which the runner knows, rather than
    SQLite's own OperationalError."""

    def execute(self, *args):
        try:
            return super().execute(*args)
        except sqlite3.OperationalError as exc:
            _raise_if_full(exc)
            raise

    def executemany(self, *args):
        try:
            return super().executemany(*args)
        except sqlite3.OperationalError as exc:
            _raise_if_full(exc)
            raise


def _raise_if_full(exc):
    if exc.sqlite_errorcode == sqlite3.SQLITE_FULL:
        raise DataFull(f"data partition full: {exc}") from exc


def free_bytes(data_dir):
    """The room left on the data folder's file system, as df shows it (what is not reserved for root)."""
    st = os.statvfs(data_dir)
    return st.f_bavail * st.f_frsize


def hold_reserve(data_dir):
    """Set RESERVE_BYTES aside in the data folder while a run runs: should the partition fill up, releasing
    them leaves room to record the step that failed and the run's end, since SQLite commits nothing on a full
    disk."""
    fd = os.open(os.path.join(data_dir, RESERVE_NAME), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.posix_fallocate(fd, 0, RESERVE_BYTES)
    finally:
        os.close(fd)


def release_reserve(data_dir):
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(data_dir, RESERVE_NAME))


def _in(states):
    return f"({', '.join(repr(s) for s in states)})"


def connect(data_dir):
    os.makedirs(data_dir, exist_ok=True)
    db = sqlite3.connect(db_path(data_dir), timeout=30, isolation_level=None, factory=_Connection)
    db.row_factory = sqlite3.Row
    _enable_wal(db)
    # Foreign keys are off while the schema moves (a rebuilt table must not cascade), on for everything else.
    migrate(db)
    db.execute("PRAGMA foreign_keys=ON")
    # FULL: a commit is on the disk when it returns, so a power cut loses no step that shows as done.
    # (NORMAL in WAL mode can roll the last commits back; in the VM test a whole run went that way.)
    db.execute("PRAGMA synchronous=FULL")
    return db


def _enable_wal(db):
    # Switching a new database to WAL needs it to itself and ignores the busy timeout,
    # so a process that meets another one opening it at the same moment tries again.
    deadline = time.monotonic() + 30
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def migrate(db):
    if db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS):
        return  # the usual case, so opening the store takes no write lock
    # Read again inside the write transaction, so two processes opening a new
    # database at once cannot both apply the same migration.
    with transaction(db):
        version = db.execute("PRAGMA user_version").fetchone()[0]
        for sql in MIGRATIONS[version:]:
            _apply(db, sql)
        broken = db.execute("PRAGMA foreign_key_check").fetchone()
        if broken:
            raise SsdbenchError(f"the schema migration left a row of {broken[0]} without its parent: nothing changed")
        if version < len(MIGRATIONS):
            db.execute(f"PRAGMA user_version={len(MIGRATIONS)}")


def _apply(db, sql):
    for statement in sql.split(";"):
        if statement.strip():
            db.execute(statement)


class transaction:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on error (the connection is in autocommit mode)."""

    def __init__(self, db):
        self.db = db

    def __enter__(self):
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type, exc, tb):
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")
        return False


def upsert_drive(db, identity):
    key = f"{identity.get('model')}|{identity.get('serial') or identity['path']}"
    db.execute(
        """INSERT INTO drives (identity_key, path, model, serial, firmware, capacity_bytes, transport, identity_json)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (identity_key) DO UPDATE SET path=excluded.path, firmware=excluded.firmware,
             capacity_bytes=excluded.capacity_bytes, transport=excluded.transport,
             identity_json=excluded.identity_json""",
        (
            key,
            identity["path"],
            identity.get("model"),
            identity.get("serial"),
            identity.get("firmware"),
            identity.get("capacity_bytes"),
            identity.get("transport"),
            json.dumps(identity),
        ),
    )
    return db.execute("SELECT id FROM drives WHERE identity_key=?", (key,)).fetchone()[0]


class RunBusy(SsdbenchError):
    """A run is already queued or running: there is one at a time."""


def busy_run(db):
    return db.execute(f"SELECT * FROM runs WHERE state IN {_in(ACTIVE)} ORDER BY id LIMIT 1").fetchone()


def busy_repeat(db):
    return db.execute(f"SELECT * FROM repeats WHERE state IN {_in(ACTIVE)} ORDER BY id LIMIT 1").fetchone()


def check_idle(db):
    """Raise RunBusy while a run, or a repeat set (between two of its runs too), is queued or running."""
    busy = busy_run(db)
    if busy is not None:
        raise RunBusy(f"run {busy['id']} is {busy['state']}: wait for it to end or cancel it")
    busy = busy_repeat(db)
    if busy is not None:
        raise RunBusy(f"repeat set {busy['id']} is {busy['state']}: wait for it to end or cancel it")


def create_run(db, drive, suite, plan, state="running", request=None, repeat=None):
    """A new run on the drive (its identity as discovered now), with its steps; `repeat` (set id, position)
    places it in a repeat set. A queued one carries the tester's `request` for the runner service, and is
    refused with RunBusy while another run is queued or running (checked in the same transaction)."""
    with transaction(db):
        if state == "queued":
            check_idle(db)
        return _insert_run(db, drive, suite, plan, state, request, repeat)


def _insert_run(db, drive, suite, plan, state, request, repeat):
    now = time.time()
    cur = db.execute(
        """INSERT INTO runs (drive_id, suite, suite_hash, standard, state, created_at, started_at, pid,
                                 step_count, request_json, drive_json)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (
            upsert_drive(db, drive),
            suite.name,
            suite.sha256,
            int(suite.locked),
            state,
            now,
            now if state == "running" else None,
            os.getpid() if state == "running" else None,
            len(plan),
            json.dumps(request) if request is not None else None,
            json.dumps(drive),
        ),
    )
    run_id = cur.lastrowid
    db.executemany(
        "INSERT INTO steps (run_id, idx, key, kind, title, estimate_s, job_file) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(run_id, s.index, s.id, s.kind, s.title, s.estimate_s, s.job_file) for s in plan],
    )
    if repeat is not None:
        repeat_id, position = repeat
        db.execute(
            "INSERT INTO repeat_runs (repeat_id, run_id, position) VALUES (?, ?, ?)", (repeat_id, run_id, position)
        )
    return run_id


def create_repeat(db, drive, suite, times, thresholds, request, plan=None):
    """A repeat set: the suite `times` times on the drive, with the CoV thresholds it states. Given the `plan`,
    it is queued (from the web) with its first run, in one transaction, refused with RunBusy while anything is
    queued or running. Without, it runs in this process, which holds the run lock and adds each run as it
    starts (create_run with `repeat`)."""
    now = time.time()
    state = "running" if plan is None else "queued"
    with transaction(db):
        if state == "queued":
            check_idle(db)
        repeat_id = db.execute(
            """INSERT INTO repeats (suite, suite_hash, standard, times, state, created_at, started_at, pid,
                                    thresholds_json, request_json, drive_json)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            (
                suite.name,
                suite.sha256,
                int(suite.locked),
                times,
                state,
                now,
                now if state == "running" else None,
                os.getpid() if state == "running" else None,
                json.dumps(thresholds),
                json.dumps(request),
                json.dumps(drive),
            ),
        ).lastrowid
        if plan is not None:
            _insert_run(db, drive, suite, plan, "queued", request, (repeat_id, 1))
    return repeat_id


def claim_repeat(db, repeat_id):
    """A queued repeat set becomes this process's, as the runner service takes its first run."""
    db.execute(
        "UPDATE repeats SET state='running', started_at=?, pid=? WHERE id=? AND state='queued'",
        (time.time(), os.getpid(), repeat_id),
    )


def finish_repeat(db, repeat_id, state, error=None):
    db.execute(
        "UPDATE repeats SET state=?, error=?, finished_at=?, pid=NULL WHERE id=?",
        (state, error, time.time(), repeat_id),
    )


def repeat_of(db, run_id):
    """(repeat set id, position) of a run in a repeat set, else None."""
    row = db.execute("SELECT repeat_id, position FROM repeat_runs WHERE run_id=?", (run_id,)).fetchone()
    return tuple(row) if row else None


def request_repeat_cancel(db, repeat_id):
    """Ask a repeat set to stop: no further run starts, and its run in progress is cancelled."""
    with transaction(db):
        db.execute("UPDATE repeats SET cancel_requested=1 WHERE id=?", (repeat_id,))
        db.execute(
            f"""UPDATE runs SET cancel_requested=1 WHERE state IN {_in(ACTIVE)}
                AND id IN (SELECT run_id FROM repeat_runs WHERE repeat_id=?)""",
            (repeat_id,),
        )


def repeat_cancel_requested(db, repeat_id):
    return bool(db.execute("SELECT cancel_requested FROM repeats WHERE id=?", (repeat_id,)).fetchone()[0])


def active_repeat(db):
    return db.execute("SELECT * FROM repeats WHERE state='running' ORDER BY id DESC LIMIT 1").fetchone()


def repeat_state(db, repeat_id):
    row = db.execute("SELECT state FROM repeats WHERE id=?", (repeat_id,)).fetchone()
    return row[0] if row else None


def get_repeat(db, repeat_id):
    """A repeat set with its thresholds, request and drive, and its runs in order: [{id, position, state}]."""
    row = db.execute("SELECT * FROM repeats WHERE id=?", (repeat_id,)).fetchone()
    if row is None:
        return None
    out = dict(row)
    out["thresholds"] = json.loads(out.pop("thresholds_json"))
    out["request"] = json.loads(out.pop("request_json") or "null")
    out["drive"] = json.loads(out.pop("drive_json"))
    out["runs"] = [
        dict(r)
        for r in db.execute(
            """SELECT runs.id, repeat_runs.position, runs.state
               FROM repeat_runs JOIN runs ON runs.id = repeat_runs.run_id
               WHERE repeat_runs.repeat_id=? ORDER BY repeat_runs.position""",
            (repeat_id,),
        )
    ]
    return out


def list_repeats(db):
    rows = db.execute(
        """SELECT repeats.id, repeats.suite, repeats.suite_hash, repeats.standard, repeats.times, repeats.state,
                  repeats.origin, repeats.created_at, repeats.finished_at, repeats.error,
                  (SELECT count(*) FROM repeat_runs WHERE repeat_id = repeats.id) AS runs,
                  json_extract(repeats.drive_json, '$.path') AS path,
                  json_extract(repeats.drive_json, '$.model') AS model,
                  json_extract(repeats.drive_json, '$.serial') AS serial
           FROM repeats ORDER BY repeats.id"""
    )
    return [dict(r) for r in rows]


def set_run_drive(db, run_id, drive):
    """The drive's identity as the run starts on it (the runner service checks it again when it takes a run)."""
    with transaction(db):
        db.execute(
            "UPDATE runs SET drive_id=?, drive_json=? WHERE id=?", (upsert_drive(db, drive), json.dumps(drive), run_id)
        )


def set_environment(db, run_id, environment):
    db.execute("UPDATE runs SET environment_json=? WHERE id=?", (json.dumps(environment), run_id))


def finish_run(db, run_id, state, error=None):
    with transaction(db):
        db.execute(
            "UPDATE runs SET state=?, error=?, finished_at=?, pid=NULL WHERE id=?", (state, error, time.time(), run_id)
        )
        db.execute("UPDATE steps SET state=? WHERE run_id=? AND state='running'", (state, run_id))
        db.execute("UPDATE steps SET state='skipped' WHERE run_id=? AND state='pending'", (run_id,))


def step_id(db, run_id, idx):
    return db.execute("SELECT id FROM steps WHERE run_id=? AND idx=?", (run_id, idx)).fetchone()[0]


def start_step(db, run_id, idx, out_dir):
    db.execute(
        "UPDATE steps SET state='running', started_at=?, out_dir=? WHERE run_id=? AND idx=?",
        (time.time(), out_dir, run_id, idx),
    )
    return step_id(db, run_id, idx)


def finish_step(db, sid, state, error=None, detail=None, metrics=(), series=()):
    """Close a step with its metrics and time series in one transaction, so a step is whole or absent."""
    with transaction(db):
        db.execute(
            "UPDATE steps SET state=?, error=?, finished_at=?, detail_json=? WHERE id=?",
            (state, error, time.time(), json.dumps(detail) if detail is not None else None, sid),
        )
        run_id = db.execute("SELECT run_id FROM steps WHERE id=?", (sid,)).fetchone()[0]
        db.executemany(
            "INSERT INTO metrics (step_id, name, value, unit, source) VALUES (?, ?, ?, ?, ?)",
            [(sid, m.name, m.value, m.unit, m.source) for m in metrics],
        )
        for name, unit, source, points, *x_unit in series:
            add_series(db, run_id, sid, name, unit, source, points, *x_unit)


def set_job_file(db, sid, text):
    db.execute("UPDATE steps SET job_file=? WHERE id=?", (text, sid))


def step_metric(db, run_id, key, name):
    row = db.execute(
        """SELECT metrics.value FROM metrics JOIN steps ON steps.id = metrics.step_id
                        WHERE steps.run_id=? AND steps.key=? AND metrics.name=?""",
        (run_id, key, name),
    ).fetchone()
    return row[0] if row else None


def written_bytes(db, run_id, key):
    """The bytes a step of the run wrote, as fio counted them: its jobs' write.io_bytes added up."""
    row = db.execute(
        """SELECT SUM(metrics.value) FROM metrics JOIN steps ON steps.id = metrics.step_id
                        WHERE steps.run_id=? AND steps.key=?
                        AND (metrics.name='write.io_bytes' OR metrics.name LIKE '%.write.io_bytes')""",
        (run_id, key),
    ).fetchone()
    return row[0] or 0


def add_series(db, run_id, sid, name, unit, source, points, x_unit="ms"):
    """A curve: `points` are (x, value) with x in `x_unit` (ms since the step's start, unless stated)."""
    series_id = db.execute(
        "INSERT INTO series (run_id, step_id, name, unit, source, x_unit) VALUES (?, ?, ?, ?, ?, ?)",
        (run_id, sid, name, unit, source, x_unit),
    ).lastrowid
    append_points(db, series_id, points)
    return series_id


def append_points(db, series_id, points):
    db.executemany(
        "INSERT INTO points (series_id, t_ms, value) VALUES (?, ?, ?)", ((series_id, t, v) for t, v in points)
    )


def update_progress(db, run_id, step_index, percent, eta_s, cur_iops, cur_bw):
    """The run's progress now, and its sample in the live view's history (ms since the run started)."""
    now = time.time()
    with transaction(db):
        db.execute(
            """UPDATE runs SET step_index=?, percent=?, eta_s=?, cur_iops=?, cur_bw=?, progress_at=?
                      WHERE id=?""",
            (step_index, percent, eta_s, cur_iops, cur_bw, now, run_id),
        )
        db.execute(
            """INSERT INTO progress_samples (run_id, t_ms, percent, iops, bw)
               SELECT id, CAST((? - started_at) * 1000 AS INTEGER), ?, ?, ? FROM runs
                WHERE id=? AND state='running' AND started_at IS NOT NULL""",
            (now, percent, cur_iops, cur_bw, run_id),
        )


def progress_history(db, run_id):
    """The live view's history of a run, as its charts take it: seconds since the run started, with the IOPS and
    bytes/s of each progress sample, and the drive's temperature; None for no run."""
    started = db.execute("SELECT started_at FROM runs WHERE id=?", (run_id,)).fetchone()
    if started is None:
        return None
    cur = db.cursor()
    cur.row_factory = None
    rows = cur.execute("SELECT t_ms, iops, bw FROM progress_samples WHERE run_id=? ORDER BY t_ms", (run_id,)).fetchall()
    temps = cur.execute(
        """SELECT t_ms, value FROM points WHERE series_id = (
               SELECT id FROM series WHERE run_id=? AND step_id IS NULL AND name='temperature') ORDER BY t_ms""",
        (run_id,),
    ).fetchall()
    return {
        "t_s": [r[0] / 1000 for r in rows],
        "iops": [r[1] for r in rows],
        "bw": [r[2] for r in rows],
        "temperature": {"t_s": [r[0] / 1000 for r in temps], "value": [r[1] for r in temps]},
    }


def request_cancel(db, run_id):
    """Ask a run to stop; a run of a repeat set stops its set with it."""
    with transaction(db):
        db.execute("UPDATE runs SET cancel_requested=1 WHERE id=?", (run_id,))
        db.execute(
            "UPDATE repeats SET cancel_requested=1 WHERE id IN (SELECT repeat_id FROM repeat_runs WHERE run_id=?)",
            (run_id,),
        )


def cancel_requested(db, run_id):
    return bool(db.execute("SELECT cancel_requested FROM runs WHERE id=?", (run_id,)).fetchone()[0])


def mark_interrupted(db):
    """Runs and repeat sets still marked running belong to a process that died (crash or power cut).

    Call this only while holding the run lock, so no live run can be caught.
    Completed steps keep their state and data; a set keeps its ended runs.
    """
    with transaction(db):
        ids = [r[0] for r in db.execute("SELECT id FROM runs WHERE state='running'")]
        for run_id in ids:
            db.execute("UPDATE steps SET state='interrupted' WHERE run_id=? AND state='running'", (run_id,))
            db.execute("UPDATE steps SET state='skipped' WHERE run_id=? AND state='pending'", (run_id,))
            db.execute(
                """UPDATE runs SET state='interrupted', pid=NULL, finished_at=?,
                          error='the run was cut off (crash or power loss); completed steps are kept'
                          WHERE id=?""",
                (time.time(), run_id),
            )
        db.execute(
            """UPDATE repeats SET state='interrupted', pid=NULL, finished_at=?,
                      error='the repeat set was cut off (crash or power loss); its ended runs are kept'
                      WHERE state='running'""",
            (time.time(),),
        )
    return ids


def queue_resume(db, run_id, request):
    """Queue an interrupted run to resume, with the tester's `request` (its "resume" true): the runner service
    resumes it as it takes it (run/queue.py). Refused with RunBusy while another run is queued or running, and
    with SsdbenchError when the run is not an interrupted run of this appliance (checked in the same
    transaction)."""
    with transaction(db):
        check_idle(db)
        cur = db.execute(
            """UPDATE runs SET state='queued', request_json=?, cancel_requested=0
                      WHERE id=? AND state='interrupted' AND origin='local'""",
            (json.dumps(request), run_id),
        )
        if cur.rowcount != 1:
            raise SsdbenchError(f"run {run_id} is not a run of this appliance cut off by a crash or power loss")


def keep_interrupted(db, run_id, error):
    """A queued resume that did not begin (the drive changed, or a cancel came first): the run is interrupted
    again, as it was cut, and says why it was not resumed."""
    db.execute("UPDATE runs SET state='interrupted', pid=NULL, error=? WHERE id=?", (error, run_id))


def resume_run(db, data_dir, run_id, suite_hash, entry, claimed=False):
    """Make an interrupted run running again from step entry["from_step_index"] on: that step and every one after
    it pending again, their metrics, series and raw files gone (what they had is of the drive before the cut), and
    `entry` added to the run's environment's "resumed". Only under the run lock, for a run of this suite; a
    queued resume that the runner service has `claimed` is running already."""
    run = get_run(db, run_id)
    if run is None or run["origin"] != "local":
        raise SsdbenchError(f"no run {run_id} of this appliance to resume")
    if run["state"] != ("running" if claimed else "interrupted"):
        raise SsdbenchError(f"run {run_id} is {run['state']}: only a run cut off by a crash or power loss resumes")
    if run["suite_hash"] != suite_hash:
        raise SsdbenchError(
            f"run {run_id} ran another suite (sha256 {run['suite_hash'][:16]}...): resume it with that one"
        )
    first = entry["from_step_index"]
    environment = run["environment"] or {}
    environment["resumed"] = [*environment.get("resumed", []), entry]
    again = [s for s in run["steps"] if s["idx"] >= first]
    with transaction(db):
        for step in again:
            db.execute("DELETE FROM metrics WHERE step_id=?", (step["id"],))
            db.execute("DELETE FROM series WHERE step_id=?", (step["id"],))
            db.execute(
                """UPDATE steps SET state='pending', started_at=NULL, finished_at=NULL, error=NULL, detail_json=NULL
                   WHERE id=?""",
                (step["id"],),
            )
        db.execute(
            """UPDATE runs SET state='running', error=NULL, finished_at=NULL, cancel_requested=0, pid=?,
                      step_index=?, environment_json=? WHERE id=?""",
            (os.getpid(), first, json.dumps(environment), run_id),
        )
    for step in again:
        if step["out_dir"]:
            shutil.rmtree(os.path.join(data_dir, step["out_dir"]), ignore_errors=True)
    return run


def active_run(db):
    return db.execute("SELECT * FROM runs WHERE state='running' ORDER BY id DESC LIMIT 1").fetchone()


RUN_LIST = """SELECT runs.id, runs.suite, runs.suite_hash, runs.standard, runs.state, runs.origin,
                     runs.created_at, runs.finished_at, runs.percent, runs.error,
                     json_extract(runs.drive_json, '$.path') AS path,
                     json_extract(runs.drive_json, '$.model') AS model,
                     json_extract(runs.drive_json, '$.serial') AS serial,
                     (SELECT repeat_id FROM repeat_runs WHERE run_id = runs.id) AS repeat_id
              FROM runs"""


def list_runs(db):
    """Every run, oldest first."""
    return [dict(r) for r in db.execute(RUN_LIST + " ORDER BY runs.id")]


def runs_page(db, before, limit):
    """Up to `limit` runs, newest first, those with an id below `before` (None: from the newest)."""
    rows = db.execute(RUN_LIST + " WHERE runs.id < ? ORDER BY runs.id DESC LIMIT ?", (before or 2**63 - 1, limit))
    return [dict(r) for r in rows]


def get_run(db, run_id):
    run = db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
    if run is None:
        return None
    out = dict(run)
    out["environment"] = json.loads(out.pop("environment_json") or "null")
    out["request"] = json.loads(out.pop("request_json") or "null")
    out["drive"] = json.loads(out.pop("drive_json"))
    place = repeat_of(db, run_id)
    out["repeat"] = {"id": place[0], "position": place[1]} if place else None
    out["steps"] = []
    for step in db.execute("SELECT * FROM steps WHERE run_id=? ORDER BY idx", (run_id,)):
        s = dict(step)
        s["detail"] = json.loads(s.pop("detail_json") or "null")
        s["metrics"] = [
            dict(m)
            for m in db.execute(
                "SELECT name, value, unit, source FROM metrics WHERE step_id=? ORDER BY id", (step["id"],)
            )
        ]
        out["steps"].append(s)
    out["series"] = [
        dict(r)
        for r in db.execute(
            "SELECT id, step_id, name, unit, source, x_unit FROM series WHERE run_id=? ORDER BY id", (run_id,)
        )
    ]
    return out


def import_run(db, doc, origin):
    """A run from another testbed's result document (bundle.RESULT), as a new run with its steps, metrics and
    series, in one transaction. Its raw files go to runs/<new id>/, as for a local run. A document with a
    field missing or of the wrong type is refused whole."""
    try:
        with transaction(db):
            return _insert_imported(db, doc, origin)
    except IMPORT_ERRORS as exc:
        raise SsdbenchError(f"the run document is not whole ({exc!r}); nothing was imported") from exc


# What a document with a field missing or of the wrong type raises on its way into the tables.
IMPORT_ERRORS = (KeyError, TypeError, ValueError, sqlite3.InterfaceError, sqlite3.IntegrityError)


def import_repeat(db, repeat, runs, origin):
    """A repeat set from another testbed: its record (what get_repeat gives) and its runs' documents, each with
    its origin, as [(position, document, origin)], in one transaction: the set comes in whole or not at all.
    Returns the new set's id and the new run ids, in the order given."""
    try:
        with transaction(db):
            known = db.execute("SELECT id FROM repeats WHERE origin=?", (origin,)).fetchone()
            if known:
                raise SsdbenchError(f"this bundle is already here, as repeat set {known[0]} ({origin})")
            repeat_id = db.execute(
                """INSERT INTO repeats (suite, suite_hash, standard, times, state, origin, created_at, started_at,
                                        finished_at, error, thresholds_json, drive_json)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    repeat["suite"],
                    repeat["suite_hash"],
                    repeat["standard"],
                    repeat["times"],
                    repeat["state"],
                    origin,
                    repeat["created_at"],
                    repeat["started_at"],
                    repeat["finished_at"],
                    repeat["error"],
                    json.dumps(repeat["thresholds"]),
                    json.dumps(repeat["drive"]),
                ),
            ).lastrowid
            run_ids = []
            for position, doc, run_origin in runs:
                run_ids.append(_insert_imported(db, doc, run_origin))
                db.execute(
                    "INSERT INTO repeat_runs (repeat_id, run_id, position) VALUES (?, ?, ?)",
                    (repeat_id, run_ids[-1], position),
                )
            return repeat_id, run_ids
    except IMPORT_ERRORS as exc:
        raise SsdbenchError(f"the repeat set's documents are not whole ({exc!r}); nothing was imported") from exc


def _insert_imported(db, doc, origin):
    """Inside the caller's transaction."""
    known = db.execute("SELECT id FROM runs WHERE origin=?", (origin,)).fetchone()
    if known:
        raise SsdbenchError(f"this bundle is already here, as run {known[0]} ({origin})")
    run_id = db.execute(
        """INSERT INTO runs (drive_id, suite, suite_hash, standard, state, origin, created_at, started_at,
                             finished_at, error, environment_json, step_count, percent, drive_json)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (
            upsert_drive(db, doc["drive"]),
            doc["suite"],
            doc["suite_hash"],
            doc["standard"],
            doc["state"],
            origin,
            doc["created_at"],
            doc["started_at"],
            doc["finished_at"],
            doc["error"],
            json.dumps(doc["environment"]),
            doc["step_count"],
            doc["percent"],
            json.dumps(doc["drive"]),
        ),
    ).lastrowid
    new_step = {}
    for step in doc["steps"]:
        out_dir = step["out_dir"] and step_folder(run_id, step["idx"], step["key"])
        new_step[step["id"]] = db.execute(
            """INSERT INTO steps (run_id, idx, key, kind, title, state, estimate_s, started_at, finished_at,
                                  error, job_file, out_dir, detail_json)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            (
                run_id,
                step["idx"],
                step["key"],
                step["kind"],
                step["title"],
                step["state"],
                step["estimate_s"],
                step["started_at"],
                step["finished_at"],
                step["error"],
                step["job_file"],
                out_dir,
                json.dumps(step["detail"]) if step["detail"] is not None else None,
            ),
        ).lastrowid
        db.executemany(
            "INSERT INTO metrics (step_id, name, value, unit, source) VALUES (?, ?, ?, ?, ?)",
            [(new_step[step["id"]], m["name"], m["value"], m["unit"], m["source"]) for m in step["metrics"]],
        )
    for s in doc["series"]:
        add_series(
            db,
            run_id,
            new_step.get(s["step_id"]),
            s["name"],
            s["unit"],
            s["source"],
            zip(s["x"], s["y"]),
            s["x_unit"],
        )
    return run_id


def series_points(db, series_id):
    return [
        (r[0], r[1]) for r in db.execute("SELECT t_ms, value FROM points WHERE series_id=? ORDER BY t_ms", (series_id,))
    ]


def next_queued_run(db):
    return db.execute("SELECT * FROM runs WHERE state='queued' ORDER BY id LIMIT 1").fetchone()


def claim_run(db, run_id):
    """A queued run becomes this process's running run; False if it is no longer queued. A resume keeps the time
    the run first started."""
    cur = db.execute(
        """UPDATE runs SET state='running', pid=?,
                  started_at=CASE WHEN json_extract(request_json, '$.resume') THEN started_at ELSE ? END
                  WHERE id=? AND state='queued'""",
        (os.getpid(), time.time(), run_id),
    )
    return cur.rowcount == 1


def run_state(db, run_id):
    row = db.execute("SELECT state FROM runs WHERE id=?", (run_id,)).fetchone()
    return row[0] if row else None


def _lock_path(data_dir, run_id):
    return os.path.join(data_dir, LOCKS_DIR, f"run-{int(run_id)}")


def _lock_file(data_dir, run_id):
    os.makedirs(os.path.join(data_dir, LOCKS_DIR), exist_ok=True)
    return os.open(_lock_path(data_dir, run_id), os.O_RDWR | os.O_CREAT, 0o600)


@contextlib.contextmanager
def run_in_use(data_dir, run_id):
    """Held while a run's files are read into a bundle (an export, a download), by any process: delete_run
    refuses the run meanwhile. The kernel drops the lock with its process, so a crash leaves none behind."""
    fd = _lock_file(data_dir, run_id)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def delete_run(db, data_dir, run_id):
    """Delete a run with its steps, metrics and series, then its folder; False if there is none. Raises
    RunBusy if it is queued, running or being exported. If the folder is a symbolic link, only the link goes,
    never what it points to."""
    fd = _lock_file(data_dir, run_id)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunBusy(f"run {run_id} is being exported or downloaded: delete it when that has ended") from None
        with transaction(db):
            state = run_state(db, run_id)
            if state in ACTIVE:
                raise RunBusy(f"run {run_id} is {state}: cancel it before deleting it")
            db.execute("DELETE FROM runs WHERE id=?", (run_id,))
        if state is None:
            return False
        path = run_dir(data_dir, run_id)
        if os.path.islink(path):
            os.unlink(path)
        elif os.path.isdir(path):
            shutil.rmtree(path)
        # Under the lock: whoever opened this file before waits, then finds no run.
        os.unlink(_lock_path(data_dir, run_id))
        return True
    finally:
        os.close(fd)


def run_progress(db, run_id):
    """What a live view needs, and nothing more: the run's progress, its steps' states, the latest temperature."""
    run = db.execute(
        """SELECT id, state, step_index, step_count, percent, eta_s, cur_iops, cur_bw, progress_at,
                               started_at, finished_at, cancel_requested, error
                        FROM runs WHERE id=?""",
        (run_id,),
    ).fetchone()
    if run is None:
        return None
    out = dict(run)
    out["steps"] = [
        dict(r)
        for r in db.execute(
            "SELECT idx, key, kind, title, state, estimate_s FROM steps WHERE run_id=? ORDER BY idx", (run_id,)
        )
    ]
    temp = db.execute(
        """SELECT t_ms, value FROM points WHERE series_id = (
                           SELECT id FROM series WHERE run_id=? AND step_id IS NULL AND name='temperature')
                         ORDER BY t_ms DESC LIMIT 1""",
        (run_id,),
    ).fetchone()
    out["temperature"] = {"t_ms": temp[0], "value": temp[1]} if temp else None
    return out


def series_columns(db, series_id):
    """A series' points as two lists, x and values: the shape charts take, read without Row objects."""
    cur = db.cursor()
    cur.row_factory = None
    rows = cur.execute("SELECT t_ms, value FROM points WHERE series_id=? ORDER BY t_ms", (series_id,)).fetchall()
    return [r[0] for r in rows], [r[1] for r in rows]
