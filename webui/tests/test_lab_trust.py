"""Who the lab trusts and what it records (issue 35, item 8): the bench shows the runs of trusted tokens only and
History every run; a run is removed with its bundle and its bench pick; logins, uploads and the operator's
commands are in an audit log, and requests in an access log, neither holding a secret; the lab runs as a user
and a database role of its own, with no control socket shared between servers. A real PostgreSQL, the real
`ssdbench lab serve`, uploads from the real CLI."""

import hashlib
import json
import os
import pathlib
import re
import signal
import subprocess
import urllib.parse

import psycopg
import pytest
import yaml
from conftest import Browser, lab, lab_server, needs_root, rewritten, rows, ssdbench, wait_until

from ssdbench.lab import audit, cluster, schema

pytestmark = needs_root()

REPO = pathlib.Path(__file__).resolve().parents[2]


def bench_runs(browser):
    """The run each row of /bench shows, in its order."""
    status, _, page = browser.get("/bench")
    assert status == 200
    return [int(n) for n in re.findall(r'<tr data-model(?:(?!</tr>).)*?href="/runs/(\d+)"', page, re.S)]


def history_runs(browser):
    status, _, page = browser.get("/history")
    assert status == 200
    return sorted({int(n) for n in re.findall(r'href="/runs/(\d+)"', page)})


def another(finished_bundle, tmp_path):
    """Another bundle of the same run (one more member): the same drive model, a bundle of its own."""
    return rewritten(finished_bundle, tmp_path / "another.zip", lambda name, content: content if name else {"x": b"1"})


def test_the_bench_shows_the_runs_of_trusted_tokens_and_history_every_run(lab_db, finished_bundle, tmp_path):
    """A token holder's run, received later than the trusted one of the same model, would have taken the model's
    row on /bench. It does not until the lab's operator trusts its token, and leaves it when they distrust it;
    History lists both throughout."""
    password = lab("user", "add", "ann", db=lab_db).stdout.strip()
    trusted = lab("token", "add", "bench-a", db=lab_db).stdout.strip()
    assert lab("token", "trust", "bench-a", db=lab_db).returncode == 0
    anyone = lab("token", "add", "bench-b", db=lab_db).stdout.strip()
    with lab_server(lab_db, tmp_path / "store") as (_, url):
        ssdbench("upload", finished_bundle, "--to", url, "--token", trusted, check=True)
        ssdbench("upload", another(finished_bundle, tmp_path), "--to", url, "--token", anyone, check=True)
        browser = Browser(url)
        browser.login("ann", password)
        assert bench_runs(browser) == [1] and history_runs(browser) == [1, 2]
        assert "whose tokens the lab trusts" in browser.get("/bench")[2]
        assert rows(lab_db, "SELECT run_id, runs FROM bench") == [(1, 1)]
        listed = lab("token", "list", db=lab_db).stdout
        assert re.search(r"bench-a +valid +trusted ", listed) and re.search(r"bench-b +valid +untrusted ", listed)
        assert lab("token", "trust", "bench-b", db=lab_db).returncode == 0
        assert bench_runs(browser) == [2] and history_runs(browser) == [1, 2]
        assert rows(lab_db, "SELECT run_id, runs FROM bench") == [(2, 2)]
        assert lab("token", "distrust", "bench-b", db=lab_db).returncode == 0
        assert bench_runs(browser) == [1] and history_runs(browser) == [1, 2]
        assert lab("token", "distrust", "bench-a", db=lab_db).returncode == 0
        assert bench_runs(browser) == [] and history_runs(browser) == [1, 2]
    assert lab("token", "trust", "nobody", db=lab_db).returncode == 2


def test_a_removed_run_takes_its_bundle_and_its_bench_pick_with_it(lab_db, finished_bundle, tmp_path):
    password = lab("user", "add", "ann", db=lab_db).stdout.strip()
    token = lab("token", "add", "bench-a", db=lab_db).stdout.strip()
    lab("token", "trust", "bench-a", db=lab_db)
    store = tmp_path / "store"
    with lab_server(lab_db, store) as (_, url):
        ssdbench("upload", finished_bundle, "--to", url, "--token", token, check=True)
        ssdbench("upload", another(finished_bundle, tmp_path), "--to", url, "--token", token, check=True)
        files = {p.name: p for p in store.glob("bundles/*/*.zip")}
        browser = Browser(url)
        browser.login("ann", password)
        assert bench_runs(browser) == [2]
        second = rows(lab_db, "SELECT bundle_sha256 FROM runs WHERE id = 2")[0][0]
        # Without --yes: what would go, and nothing goes.
        asked = lab("remove", "2", "--store", str(store), db=lab_db)
        assert asked.returncode == 2 and f"would remove bundle {second}, with lab runs 2: nothing" in asked.stdout
        assert {p.name for p in store.glob("bundles/*/*.zip")} == set(files)
        assert rows(lab_db, "SELECT count(*) FROM runs") == [(2,)]
        done = lab("remove", "2", "--store", str(store), "--yes", db=lab_db)
        assert done.returncode == 0 and f"removed bundle {second}, runs 2" in done.stdout, done.stderr
        assert not files[f"{second}.zip"].exists() and len(list(store.glob("bundles/*/*.zip"))) == 1
        assert rows(lab_db, "SELECT run_id, runs FROM bench") == [(1, 1)]
        assert bench_runs(browser) == [1] and history_runs(browser) == [1]
        assert browser.get("/runs/2")[0] == 404
        assert lab("remove", "1", "--store", str(store), "--yes", db=lab_db).returncode == 0
        assert bench_runs(browser) == [] and rows(lab_db, "SELECT count(*) FROM bench") == [(0,)]
        assert not list(store.glob("bundles/*/*.zip"))
        gone = lab("remove", "1", "--store", str(store), "--yes", db=lab_db)
        assert gone.returncode == 2 and "no run 1 in the lab" in gone.stderr
        # Nothing is left half: the same bundle sent again is kept again, and picked.
        again = ssdbench("upload", finished_bundle, "--to", url, "--token", token, check=True)
        assert "stored as lab run 3" in again.stdout and bench_runs(browser) == [3]
    removed = [e for e in json.loads(lab("audit", "--json", db=lab_db).stdout) if e["action"] == "remove"]
    assert [e["subject"] for e in removed][0] == f"bundle {second}, runs 2" and len(removed) == 2


def test_the_audit_log_records_logins_uploads_and_commands_and_no_secret(lab_db, finished_bundle, tmp_path):
    """Every login decision, every upload of a valid token and every command that changes the lab is in the
    audit log, by whom and from where; every request in the access log, which logrotate can move (SIGUSR1). A
    password typed into the name field is not kept; no password, token or token hash is in either log."""
    access_log = tmp_path / "access.log"
    password = lab("user", "add", "ann", db=lab_db).stdout.strip()
    token = lab("token", "add", "bench-a", db=lab_db).stdout.strip()
    with lab_server(lab_db, tmp_path / "store", options=("--access-log", str(access_log))) as (server, url):
        browser = Browser(url)
        assert browser.login("ann", "not-" + password)[0] == 401
        assert browser.login(password, password)[0] == 401  # the password, in the name field
        assert browser.login("ann", password)[0] == 200
        ssdbench("upload", finished_bundle, "--to", url, "--token", token, check=True)
        assert ssdbench("upload", finished_bundle, "--to", url, "--token", "ssdb_" + "x" * 43).returncode != 0
        lab("token", "trust", "bench-a", db=lab_db)
        lab("token", "revoke", "bench-a", db=lab_db)
        sent = [f'"POST /lab/bundles HTTP/1.1" {status} ' for status in (201, 401)]
        wait_until(lambda: all(line in access_log.read_text() for line in sent), "the uploads in the access log")
        logged = access_log.read_text()
        # logrotate moves the file, then asks gunicorn to open its log again.
        access_log.rename(tmp_path / "access.log.1")
        os.kill(server.pid, signal.SIGUSR1)
        wait_until(
            lambda: browser.get("/login") and access_log.exists() and "GET /login" in access_log.read_text(),
            "the access log opened again",
        )
    entries = json.loads(lab("audit", "--json", db=lab_db).stdout)
    said = [(e["actor"], e["action"], e["subject"], e["outcome"], e["address"]) for e in entries]
    operator = audit.operator()
    assert said[:3] == [
        (operator, "migrate", "schema versions " + ", ".join(str(v) for v, _, _ in schema.MIGRATIONS), "done", None),
        (operator, "user add", "ann", "done", None),
        (operator, "token add", "bench-a", "done", None),
    ]
    assert said[3:6] == [
        ("ann", "login", None, "wrong password", "127.0.0.1"),
        ("(no such user)", "login", None, "wrong password", "127.0.0.1"),
        ("ann", "login", None, "ok", "127.0.0.1"),
    ]
    assert said[6][:2] == ("bench-a", "upload") and said[6][2].endswith(", runs 1")
    assert said[6][3:] == ("201", "127.0.0.1")
    # The upload without a valid token is in the access log only; then the operator's commands.
    assert [s[1:3] for s in said[7:]] == [("token trust", "bench-a"), ("token revoke", "bench-a")]
    assert logged.count('"POST /lab/bundles HTTP/1.1" 201 ') == 1 and logged.count("POST /login") == 3
    text = lab("audit", db=lab_db).stdout
    assert re.search(r"Z ann from 127\.0\.0\.1: login: ok", text), text
    stored = str(rows(lab_db, "SELECT * FROM audit"))
    for secret in (password, token, hashlib.sha256(token.encode()).hexdigest()):
        for where in (text, stored, logged, access_log.read_text()):
            assert secret not in where
    # Bounded: an entry older than the time the log keeps goes when the next one comes.
    with psycopg.connect(lab_db) as conn:
        conn.execute("UPDATE audit SET at = now() - make_interval(days => %s) WHERE id = 1", (audit.KEEP_DAYS + 1,))
    lab("user", "remove", "ann", db=lab_db)
    left = json.loads(lab("audit", "--json", db=lab_db).stdout)
    assert left[0]["id"] == 2 and left[-1]["action"] == "user remove"


def test_the_lab_runs_as_a_user_and_a_database_role_that_are_not_root(postgres, finished_bundle, tmp_path):
    """The container runs as a user of its own, and the lab reaches PostgreSQL as the lab database's owner, which
    lab-db-init.sh makes, not as the superuser. compose.yaml and lab.Dockerfile are read (there is no Docker
    here); lab-db-init.sh runs as it is, on a real PostgreSQL, and the lab then migrates, serves and takes an
    upload as that role, which can make no role and run no program."""
    dockerfile = (REPO / "lab.Dockerfile").read_text()
    users = re.findall(r"^USER\s+(\S+)", dockerfile, re.M)
    assert users and users[-1] not in ("root", "0") and dockerfile.index("USER") < dockerfile.index("CMD")
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]
    role = urllib.parse.urlsplit(compose["lab"]["environment"]["SSDBENCH_LAB_DB"]).username
    assert role == "ssdbench" and role != compose["db"]["environment"]["POSTGRES_USER"]
    assert "./lab-db-init.sh:/docker-entrypoint-initdb.d/lab-db-init.sh:ro" in compose["db"]["volumes"]
    assert "user" not in compose["lab"]  # the image's USER stands

    folder = urllib.parse.parse_qs(urllib.parse.urlsplit(postgres()).query)["host"][0]
    env = {
        **os.environ,
        "PATH": f"{cluster.bindir()}:{os.environ['PATH']}",
        "PGHOST": folder,
        "POSTGRES_USER": cluster.SUPERUSER,
        "POSTGRES_DB": "postgres",
        "LAB_DB_PASSWORD": "not-checked-on-this-socket",
    }
    subprocess.run(["sh", str(REPO / "lab-db-init.sh")], env=env, check=True, capture_output=True)
    db = f"postgresql:///lab?host={folder}&user=ssdbench"
    assert lab("migrate", db=db).returncode == 0
    password = lab("user", "add", "ann", db=db).stdout.strip()
    token = lab("token", "add", "bench-a", db=db).stdout.strip()
    with lab_server(db, tmp_path / "store") as (_, url):
        done = ssdbench("upload", finished_bundle, "--to", url, "--token", token, check=True)
        assert "stored as lab run 1" in done.stdout
        browser = Browser(url)
        assert browser.login("ann", password)[0] == 200 and history_runs(browser) == [1]
    with psycopg.connect(db, autocommit=True) as conn:
        me = conn.execute("SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user")
        assert me.fetchone() == (False, False, False)
        for sql in ("CREATE ROLE intruder SUPERUSER", "COPY (SELECT 1) TO PROGRAM 'true'"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql)


def test_two_lab_servers_on_a_host_share_no_control_socket(lab_db, tmp_path, monkeypatch):
    """gunicorn makes a control socket at one path per user ($XDG_RUNTIME_DIR or $HOME/.gunicorn), through which
    gunicornc changes a server's workers: a second lab server on the host took it over from the first. A lab
    server makes none."""
    for name in ("HOME", "XDG_RUNTIME_DIR"):
        (tmp_path / name).mkdir()
        monkeypatch.setenv(name, str(tmp_path / name))
    with lab_server(lab_db, tmp_path / "store") as (_, one), lab_server(lab_db, tmp_path / "store") as (_, two):
        assert Browser(one).get("/login")[0] == 200 and Browser(two).get("/login")[0] == 200
        made = [p for name in ("HOME", "XDG_RUNTIME_DIR") for p in (tmp_path / name).rglob("*")]
    assert made == []
