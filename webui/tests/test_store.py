"""The results store on a real SQLite file."""

import sqlite3

from ssdbench.results import store


def test_schema_is_versioned_and_wal(tmp_path):
    db = store.connect(tmp_path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == len(store.MIGRATIONS)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"drives", "runs", "steps", "metrics", "series", "points"} <= tables
    db.close()
    # Opening again does not migrate twice.
    assert store.connect(tmp_path).execute("PRAGMA user_version").fetchone()[0] == len(store.MIGRATIONS)


def test_states_are_checked(tmp_path):
    db = store.connect(tmp_path)
    db.execute("INSERT INTO drives (identity_key, path, identity_json) VALUES ('k', '/dev/x', '{}')")
    try:
        db.execute(
            "INSERT INTO runs (drive_id, suite, suite_hash, standard, state, created_at, step_count) "
            "VALUES (1, 's', 'h', 1, 'exploded', 0, 1)"
        )
    except sqlite3.IntegrityError:
        return
    raise AssertionError("an unknown run state was accepted")


def test_concurrent_first_opens_migrate_once(tmp_path):
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(4) as pool:
        versions = pool.map(_open_version, [str(tmp_path)] * 8)
    assert versions == [len(store.MIGRATIONS)] * 8


def _open_version(path):
    return store.connect(path).execute("PRAGMA user_version").fetchone()[0]
