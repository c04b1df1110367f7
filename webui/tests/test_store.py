"""The results store on a real SQLite file."""

import sqlite3
from types import SimpleNamespace

import pytest
from conftest import add_repeat, add_run

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


def test_run_ids_are_never_reused(tmp_path):
    for _ in range(3):
        add_run(tmp_path)
    db = store.connect(tmp_path)
    assert store.delete_run(db, str(tmp_path), 3) and store.delete_run(db, str(tmp_path), 2)
    assert add_run(tmp_path) == 4


def test_each_run_keeps_the_drive_identity_it_ran_on(tmp_path):
    add_run(tmp_path, model="Same SSD", serial="S1")
    db = store.connect(tmp_path)
    again = {"path": "/dev/sdb", "model": "Same SSD", "serial": "S1", "firmware": "2.0", "transport": "sata"}
    store.create_run(db, again, SimpleNamespace(name="smoke", sha256="b" * 64, locked=True), [])
    first, second = store.get_run(db, 1), store.get_run(db, 2)
    assert first["drive"]["firmware"] == "1.0" and first["drive"]["path"] == "/dev/nvme0n1"
    assert second["drive"]["firmware"] == "2.0" and second["drive_id"] == first["drive_id"]
    assert [r["path"] for r in store.list_runs(db)] == ["/dev/nvme0n1", "/dev/sdb"]


def test_a_database_of_schema_4_moves_up_with_every_row(tmp_path):
    # As the last release left it: runs on a drive, a step with a metric, ids with a gap.
    old = sqlite3.connect(store.db_path(tmp_path))
    old.execute("PRAGMA foreign_keys=ON")
    for sql in store.MIGRATIONS[:4]:
        old.executescript(sql)
    old.execute("PRAGMA user_version=4")
    old.execute("INSERT INTO drives VALUES (1, 'm|s', '/dev/sda', 'm', 's', 'f', 1, 'sata', '{\"model\": \"m\"}')")
    for run_id in (1, 5):
        old.execute(
            "INSERT INTO runs (id, drive_id, suite, suite_hash, standard, state, created_at, step_count) "
            "VALUES (?, 1, 'smoke', 'h', 1, 'done', 0, 1)",
            (run_id,),
        )
        old.execute("INSERT INTO steps (run_id, idx, key, kind, title) VALUES (?, 0, 'k', 'fio', 't')", (run_id,))
    old.execute("INSERT INTO metrics (step_id, name, value, unit, source) VALUES (2, 'read.iops', 7.5, 'IOPS', 'x')")
    old.commit()
    old.close()
    db = store.connect(tmp_path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == len(store.MIGRATIONS)
    assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    run = store.get_run(db, 5)
    assert run["drive"] == {"model": "m"} and run["steps"][0]["metrics"][0]["value"] == 7.5
    assert store.delete_run(db, str(tmp_path), 5)
    assert add_run(tmp_path) == 6


def test_a_run_being_exported_cannot_be_deleted(tmp_path):
    add_run(tmp_path)
    db = store.connect(tmp_path)
    # Held as bundle.write holds it, in whichever process.
    with store.run_in_use(str(tmp_path), 1), pytest.raises(store.RunBusy, match="being exported"):
        store.delete_run(db, str(tmp_path), 1)
    assert store.delete_run(db, str(tmp_path), 1) and store.get_run(db, 1) is None
    add_run(tmp_path, state="running")
    with pytest.raises(store.RunBusy, match="is running: cancel it"):
        store.delete_run(db, str(tmp_path), 2)


def test_a_repeat_set_links_its_runs_and_keeps_the_others_when_one_is_deleted(tmp_path):
    repeat_id = add_repeat(tmp_path, iops=(1.0, 2.0, 3.0))
    db = store.connect(tmp_path)
    assert [(r["id"], r["position"]) for r in store.get_repeat(db, repeat_id)["runs"]] == [(1, 1), (2, 2), (3, 3)]
    assert store.get_run(db, 2)["repeat"] == {"id": repeat_id, "position": 2} and store.repeat_of(db, 3) == (1, 3)
    assert store.delete_run(db, str(tmp_path), 2)
    assert [(r["id"], r["position"]) for r in store.get_repeat(db, repeat_id)["runs"]] == [(1, 1), (3, 3)]
    assert store.list_repeats(db)[0]["runs"] == 2 and store.get_repeat(db, repeat_id)["state"] == "done"
    with pytest.raises(sqlite3.IntegrityError):  # a set is of two runs or more
        store.create_repeat(db, {"path": "/dev/x"}, SimpleNamespace(name="s", sha256="h", locked=True), 1, {}, {})


def test_a_repeat_set_cut_off_is_interrupted_and_a_cancel_of_its_run_reaches_it(tmp_path):
    add_repeat(tmp_path, state="running")
    db = store.connect(tmp_path)
    with pytest.raises(store.RunBusy, match="repeat set 1 is running"):
        store.check_idle(db)
    store.request_cancel(db, 2)
    assert store.repeat_cancel_requested(db, 1) and store.cancel_requested(db, 2)
    store.mark_interrupted(db)
    held = store.get_repeat(db, 1)
    assert held["state"] == "interrupted" and "cut off" in held["error"] and held["pid"] is None
    store.check_idle(db)
