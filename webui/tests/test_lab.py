"""The lab (ssdbench/lab, web in lab mode): a real PostgreSQL, the real `ssdbench lab serve`, uploads from the
real CLI. Bundles are kept once and only whole, a tampered one is refused, a killed server leaves nothing half
done, and the pages show every appliance's runs side by side."""

import contextlib
import email.utils
import glob
import hashlib
import http.client
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import zipfile

import contract
import psycopg
import pytest
from conftest import (
    Browser,
    free_port,
    lab,
    lab_server,
    login,
    login_from,
    make_app,
    make_ca,
    needs_root,
    rewritten,
    rows,
    ssdbench,
    two_appliances,
    wait_until,
)

from ssdbench.errors import SsdbenchError
from ssdbench.lab import access as lab_access
from ssdbench.lab import cluster, receive, schema, shelf
from ssdbench.results import bundle, run_schema, store, upload
from ssdbench.web import openapi

pytestmark = needs_root()


def kept(store):
    """The bundles the store keeps: {sha256: the sha256 of the file's bytes}."""
    found = {}
    for folder, _, names in os.walk(os.path.join(store, "bundles")):
        for name in names:
            with open(os.path.join(folder, name), "rb") as f:
                found[name.removesuffix(".zip")] = hashlib.sha256(f.read()).hexdigest()
    return found


def test_migrate_is_idempotent_and_the_server_wants_a_current_schema(postgres, tmp_path):
    url = postgres()
    proc = lab("runs", db=url)
    assert proc.returncode == 2 and "run `ssdbench lab migrate`" in proc.stderr
    first, again = lab("migrate", db=url), lab("migrate", db=url)
    versions = [m[0] for m in schema.MIGRATIONS]
    assert versions == list(range(1, len(versions) + 1))
    assert first.stdout.strip() == f"applied {', '.join(map(str, versions))}: schema version {versions[-1]}"
    assert again.stdout.strip() == f"schema version {versions[-1]}, current"
    assert rows(url, "SELECT version FROM schema_migrations ORDER BY version") == [(v,) for v in versions]
    assert lab("runs", db=url).stdout == ""
    proc = ssdbench("lab", "runs", env={**os.environ, "SSDBENCH_LAB_DB": ""})
    assert proc.returncode == 2 and "--db postgresql://USER@HOST/DB, or $SSDBENCH_LAB_DB" in proc.stderr


def test_a_local_labs_database_is_its_owners_alone():
    """Issue 26, item 7: `ssdbench lab local` trusts whoever reaches its socket; another local user cannot."""
    top = tempfile.mkdtemp(prefix="ssdbench-pg-")  # not under pytest's folder, which nobody cannot enter
    pg = cluster.Cluster(top)
    pg.start()
    try:
        sockets = glob.glob(os.path.join(top, ".s.PGSQL.[0-9]*[0-9]"))
        assert len(sockets) == 1
        assert stat.S_IMODE(os.stat(sockets[0]).st_mode) == 0o700 and stat.S_IMODE(os.stat(top).st_mode) == 0o700
        psql = [os.path.join(pg.bin, "psql"), pg.url("postgres"), "-c", "SELECT 1"]
        other = subprocess.run(psql, user="daemon", capture_output=True, text=True)
        assert other.returncode != 0 and "Permission denied" in other.stderr, other.stderr
        assert subprocess.run(psql, capture_output=True).returncode == 0  # root, which runs the lab server
    finally:
        pg.stop()
        shutil.rmtree(top, ignore_errors=True)


def test_wrong_passwords_are_counted_per_address_behind_a_proxy_and_per_user(lab_db, tmp_path):
    """Issue 26, item 4: behind the proxy docs/lab.md asks for, every client had the proxy's address, and five
    wrong passwords locked every user out."""
    bob = lab("user", "add", "bob", db=lab_db).stdout.strip()
    ann = lab("user", "add", "ann", db=lab_db).stdout.strip()
    with lab_server(lab_db, tmp_path / "store", options=("--behind-proxy", "127.0.0.1")) as (_, url):
        for _ in range(5):
            assert login_from(url, "ann", "wrong", "198.51.100.7") == 401
        assert login_from(url, "bob", bob, "198.51.100.7") == 429  # that address waits, whoever it names
        assert login_from(url, "ann", ann, "203.0.113.9") == 200  # ann logs in from anywhere else (issue 35)
        assert login_from(url, "bob", bob, "203.0.113.9") == 200  # and so does everybody else
    for options in ((), ("--behind-proxy", "192.0.2.254")):
        with psycopg.connect(lab_db) as conn:
            conn.execute("DELETE FROM login_tries")
        with lab_server(lab_db, tmp_path / "store", options=options) as (_, url):
            # Not behind a proxy, or from an address that is not the proxy's (issue 46, item 8): the header is
            # anybody's to write, and means nothing.
            for n in range(5):
                assert login_from(url, f"nobody{n}", "wrong", f"192.0.2.{n}") == 401
            assert login_from(url, "bob", bob, "192.0.2.77") == 429


def test_a_missing_user_costs_the_one_scrypt_a_wrong_password_costs(lab_db, monkeypatch):
    lab("user", "add", "ann", db=lab_db)
    conn = schema.connect(lab_db)
    lab_access.login(conn, "nobody", "x")  # the missing user's stand-in hash, made once
    runs = []
    scrypt = hashlib.scrypt
    monkeypatch.setattr(hashlib, "scrypt", lambda *a, **k: runs.append(1) or scrypt(*a, **k))
    for name in ("ann", "nobody", "somebody else"):
        runs.clear()
        assert lab_access.login(conn, name, "wrong") is None and len(runs) == 1, name


def test_no_token_begins_with_a_dash_which_a_command_line_would_take_for_an_option():
    # A bare urlsafe token began with "-" once in 64 and failed CI: ssdbench upload --token -x... is an error.
    tokens = [lab_access.new_token() for _ in range(2000)]
    assert all(t.startswith(lab_access.TOKEN_PREFIX) and len(t) >= 48 for t in tokens)
    assert len(set(tokens)) == len(tokens)


def test_tokens_are_stored_hashed_and_a_revoked_one_uploads_nothing(lab_db, finished_bundle, tmp_path):
    token = lab("token", "add", "bench-a", db=lab_db).stdout.strip()
    assert token.startswith(lab_access.TOKEN_PREFIX) and len(token) >= 48
    assert lab("token", "add", "bench-a", db=lab_db).returncode == 2  # one valid token per appliance
    stored = rows(lab_db, "SELECT * FROM appliances")
    assert stored and token not in repr(stored)
    assert stored[0][2] == hashlib.sha256(token.encode()).hexdigest()
    assert re.search(r"^bench-a\s+valid\s", lab("token", "list", db=lab_db).stdout, re.M)
    with lab_server(lab_db, tmp_path / "store") as (_, url):
        wrong = ssdbench("upload", finished_bundle, "--to", url, "--token", "not-a-token", "--attempts", "1")
        assert wrong.returncode == 2 and "no valid token" in wrong.stderr
        assert lab("token", "revoke", "bench-a", db=lab_db).returncode == 0
        token_file = tmp_path / "token"
        token_file.write_text(token + "\n")
        revoked = ssdbench("upload", finished_bundle, "--to", url, "--token-file", token_file, "--attempts", "1")
        assert revoked.returncode == 2 and "no valid token" in revoked.stderr and token not in revoked.stderr
    assert re.search(r"^bench-a\s+revoked ", lab("token", "list", db=lab_db).stdout, re.M)
    assert rows(lab_db, "SELECT count(*) FROM bundles") == [(0,)] and kept(tmp_path / "store") == {}


def test_an_upload_is_kept_once_as_it_came_and_indexed(lab_db, finished_bundle, tmp_path):
    token = lab("token", "add", "bench-a", db=lab_db).stdout.strip()
    store = tmp_path / "store"
    with open(finished_bundle, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    with lab_server(lab_db, store) as (_, url):
        first = ssdbench("upload", finished_bundle, "--to", url, "--token", token, check=True)
        again = ssdbench("upload", finished_bundle, "--to", url, "--token", token, check=True)
    assert f"stored as lab run 1 (sha256 {digest})" in first.stdout
    assert f"already in the lab as lab run 1 (sha256 {digest})" in again.stdout
    assert kept(store) == {digest: digest}
    listed = json.loads(lab("runs", "--json", db=lab_db).stdout)
    with zipfile.ZipFile(finished_bundle) as zf:
        doc = json.loads(zf.read(bundle.RESULT))
    assert [(r["id"], r["source_id"], r["appliance"], r["suite"], r["suite_hash"], r["state"]) for r in listed] == [
        (1, doc["id"], "bench-a", doc["suite"], doc["suite_hash"], doc["state"])
    ]
    # The headline figures, indexed from the run's own metrics.
    figures = rows(lab_db, "SELECT step, name, value FROM figures WHERE run_id=1 ORDER BY step, name")
    metrics = {(s["key"], m["name"]): m["value"] for s in doc["steps"] for m in s["metrics"]}
    assert figures and all(metrics[(step, name)] == value for step, name, value in figures)
    assert rows(lab_db, "SELECT model, serial FROM drives") == [
        (doc["drive"]["model"] or "", doc["drive"]["serial"] or "")
    ]


def test_a_tampered_bundle_is_refused_and_nothing_is_kept(lab_db, finished_bundle, tmp_path):
    token = lab("token", "add", "bench-a", db=lab_db).stdout.strip()

    def edit(name, content):
        if name and name.startswith("metrics/"):
            return content.replace(b"1", b"2", 1)  # a figure changed after the manifest was written
        return content

    with zipfile.ZipFile(finished_bundle) as src, zipfile.ZipFile(tmp_path / "t.zip", "w") as dst:
        for name in src.namelist():
            dst.writestr(name, edit(name, src.read(name)))
    with lab_server(lab_db, tmp_path / "store") as (_, url):
        proc = ssdbench("upload", str(tmp_path / "t.zip"), "--to", url, "--token", token)
    assert proc.returncode == 2
    assert re.search(r"the lab refused it: refused, nothing was kept: the bundle: \d+ problem\(s\):", proc.stderr)
    assert "(changed)" in proc.stderr
    assert rows(lab_db, "SELECT count(*) FROM bundles") == [(0,)] and kept(tmp_path / "store") == {}
    assert os.listdir(next((tmp_path / "store" / "incoming").glob("*-*[!k]"))) == []


# Where the pages read a text of a run document (the run page, History, compare, the bench and their cards).
PAGE_TEXTS = (
    *("suite", "suite_hash", "error", "warnings/0"),
    *(f"drive/{name}" for name in ("model", "serial", "path", "firmware", "transport")),
    *("environment/kernel/release", "environment/cpu/model", "environment/tools/fio"),
    "environment/suite/workload_sha256",
    *(f"steps/1/{name}" for name in ("title", "key", "error", "job_file", "suspect/0")),
    *(f"steps/1/metrics/0/{name}" for name in ("name", "unit", "source")),
    *(f"series/0/{name}" for name in ("name", "unit", "source")),
)
# The texts the lab's index keys on (run_schema.KEYED), within what PostgreSQL's B-tree takes of a row.
KEYED_TEXTS = ("drive/model", "drive/serial", "drive/firmware", "environment/kernel/release", "environment/cpu/model")


def bound(path):
    """The most characters the lab takes of the text at `path`."""
    if "job_file" in path:
        return run_schema.JOB_FILE
    return run_schema.KEYED if path in KEYED_TEXTS else run_schema.TEXT


# What each such text may be instead: (what, the value at `path`, what the lab says of it).
BAD_TEXTS = (
    ("over its bound", lambda path: "x" * bound(path) + "x"),
    ("a NUL", lambda path: "text\x00"),
    ("a list", lambda path: ["text"]),
)
BAD_TEXT_SAID = {"over its bound": "is a text of over", "a NUL": "is a text holding a NUL", "a list": "is not of type"}
# The texts the bundle's own checks weigh first (bundle.document_problems), in its words.
BUNDLE_SAYS = {
    "suite": "result.json: suite name ",
    "suite_hash": "result.json: suite_hash is not a sha256",
    "steps/1/key": "result.json: step 1: key ",
}


def put(doc, path, value):
    """Set the field at `path` ("a/0/b") of a document, making the records and the list item on the way."""
    *parents, last = path.split("/")
    here = doc
    for part in parents:
        here = here[int(part)] if isinstance(here, list) else here.setdefault(part, {})
    if isinstance(here, list):
        here[:1] = [value]
    else:
        here[last] = value


def nested(depth):
    """A record nesting `depth` records, the innermost holding one text."""
    value = "deep"
    for _ in range(depth):
        value = {"in": value}
    return value


def hostile(doc, what):
    """A run document changed as a hostile appliance could send it."""
    if " at " in what:  # one of BAD_TEXTS at one of PAGE_TEXTS
        kind, path = what.split(" at ")
        put(doc, path, dict(BAD_TEXTS)[kind](path))
    elif what == "a string id":
        doc["id"] = str(doc["id"])
    elif what == "an id past the column's":
        doc["id"] = run_schema.INTEGER + 1
    elif what == "a lone surrogate in the serial":
        doc["drive"]["serial"] = "S123\ud800"
    elif what == "a capacity that is not whole":
        doc["drive"]["capacity_bytes"] = 1.5
    elif what == "a step without a state":
        del doc["steps"][0]["state"]
    elif what == "no environment":
        del doc["environment"]
    elif what == "a state no finished run has":
        doc["state"] = "running"
    elif what == "a field the document does not have":
        doc["extra"] = 1
    elif what == "NaN":
        doc["created_at"] = float("nan")
    elif what == "a start that is not a number":  # the download's name reads it from the index (issue 35, item 9)
        doc["started_at"] = "yesterday"
    elif what == "1e400":  # as written: JSON's own number, which reads as infinite
        doc["steps"][-1]["metrics"].append({"name": "x", "value": "1e400", "unit": "IOPS", "source": "x"})
        return json.dumps(doc).replace('"1e400"', "1e400").encode()
    elif what == "a time past the year 9999":
        doc["created_at"] = run_schema.LAST_TIME + 1
    elif what == "a start before 1970":
        doc["started_at"] = -1
    elif what == "an end past the year 9999":  # as 1e300 was: History's date raised OverflowError (issue 46)
        doc["finished_at"] = 1e300
    elif what == "a metric's value that is text":
        doc["steps"][1]["metrics"][0]["value"] = "1"
    elif what == "tools that are not an object":  # what compare and the bench read: refused, not a 500 later
        doc["environment"]["tools"] = "fio 3.33"
    elif what == "a deep nest":
        return ('{"nest": ' + "[" * 100_000 + "]" * 100_000 + "}").encode()
    elif what == "a record nested too deep":
        doc["steps"][0]["detail"] = nested(run_schema.DEPTH + 1)
    elif what == "a record of too many fields":
        doc["environment"]["extra"] = {str(n): n for n in range(run_schema.FIELDS + 1)}
    elif what == "too many warnings":
        doc["warnings"] = ["a warning"] * (run_schema.ITEMS + 1)
    elif what == "a series' point that is text":  # the lab weighs a list of numbers in one pass (admit._items)
        doc["series"][0]["y"][-1] = "1"
    elif what == "a series' point that is true":
        doc["series"][0]["x"][0] = True
    elif what == "a series of too many points":
        doc["series"][0]["y"] = [0] * (run_schema.POINTS + 1)
    elif what == "a document of 17 MiB":
        doc["padding"] = "x" * (17 << 20)
    elif what == "a fio version of 8 MB":  # issue 35, item 4: the card took it twice
        doc["environment"]["tools"]["fio"] = "fio-" + "3" * (8 << 20)
    elif what == "an environment.suite that is not an object":  # the run page reads it
        doc["environment"]["suite"] = "engine-test"
    elif what == "a long key in the environment":
        doc["environment"]["k" * 5000] = 1
    elif what == "a hostile key's long value":  # the refusal names the key, shortened, and never quotes the value
        doc["environment"]["<script>" + "k" * 100] = "<script>" * 1000
    elif what == "a lone surrogate in a key of the tools":
        doc["environment"]["tools"]["fio\udc80"] = "fio-3.33"
    elif what == "invalid UTF-8":
        return json.dumps(doc).encode().replace(b'"state": "done"', b'"state": "done", "x": "\xff\xfe"')
    return json.dumps(doc).encode()


HOSTILE = {
    "a string id": "at /id: is not of type integer",
    "an id past the column's": f"at /id: is over {run_schema.INTEGER}",
    "a lone surrogate in the serial": "result.json is damaged (no low surrogate in string",
    "a capacity that is not whole": "at /drive/capacity_bytes: is not of type",
    "a step without a state": "at /steps/0: lacks state",
    "no environment": "at /: lacks environment",
    "a state no finished run has": "state 'running' is not one of done, failed, cancelled, interrupted",
    "a field the document does not have": "at /: has a field the lab's API document does not state",
    # orjson's words (admit._loads), which change between its versions but for these
    "NaN": "result.json is damaged (unexpected character",
    "1e400": "result.json is damaged (number is infinity",
    "a time past the year 9999": f"at /created_at: is over {run_schema.LAST_TIME}",
    "a start before 1970": "at /started_at: is under 0",
    "an end past the year 9999": f"at /finished_at: is over {run_schema.LAST_TIME}",
    "a metric's value that is text": "at /steps/1/metrics/0/value: is not of type number",
    "tools that are not an object": "at /environment/tools: is not of type ['object', 'null']",
    "a start that is not a number": "at /started_at: is not of type",
    "a deep nest": "depth",
    "a record nested too deep": f"at /steps/0/detail/{'/'.join(['in'] * run_schema.DEPTH)}: nests a record more than",
    "a record of too many fields": f"at /environment/extra: has over {run_schema.FIELDS} fields",
    "too many warnings": f"at /warnings: is a list of over {run_schema.ITEMS} items",
    "a series' point that is text": "at /series/0/y/",
    "a series' point that is true": "at /series/0/x/0: is not of type number",
    "a series of too many points": f"at /series/0/y: is a list of over {run_schema.POINTS} items",
    "a document of 17 MiB": "the lab takes 16777216 a run",
    "a fio version of 8 MB": f"at /environment/tools/fio: is a text of over {run_schema.TEXT} characters",
    "an environment.suite that is not an object": "at /environment/suite: is not of type ['object', 'null']",
    "a long key in the environment": "at /environment: has a field whose name is over 256 characters",
    "a hostile key's long value": f"at /environment/<script>{'k' * 32}...: is a text of over",
    "a lone surrogate in a key of the tools": "surrogate in string",
    "invalid UTF-8": "result.json is damaged (str is not valid UTF-8",
    **{
        f"{kind} at {path}": BUNDLE_SAYS.get(path, f"at /{path}: {BAD_TEXT_SAID[kind]}")
        for path in PAGE_TEXTS
        for kind, _ in BAD_TEXTS
    },
}


def not_a_number(name):
    raise ValueError(f"{name} is no number the lab reads")


def refused_by_the_lab_document(content):
    """Whether the lab's API document (its Run) refuses a document as the lab would serve it: the schema the lab
    admits by is the one its document states."""
    try:
        doc = json.loads(content, parse_constant=not_a_number)
    except (ValueError, RecursionError):  # not JSON as the lab reads it: no schema weighs it
        return True
    served = {**doc, "appliance": "bench-a", "bundle_sha256": "0" * 64, "received_at": 1.8e9}
    return bool(contract.component_problems(openapi.LAB_DOCUMENT, "Run", served))


def test_a_bundle_the_index_cannot_take_is_refused_before_it_is_kept(lab_db, finished_bundle, tmp_path):
    """Issue 26, items 2 and 3, issue 35, item 4: each of these verifies (its manifest lists its hashes) but holds
    what the index cannot take, or what would blow up a page: every text a page reads, over its bound, with a NUL
    or of another type, and a record nested too deep or too wide. Each is refused with 422 and what was wrong,
    where, in a sentence that quotes none of it, as the lab's API document refuses it too; nothing of any is kept:
    no row, no file in the store, no part file; and the lab's pages are as they were, byte for byte."""
    # Tokens enough that no hour's quota of uploads (receive.UPLOADS_AN_HOUR) is met.
    tokens = [
        lab("token", "add", f"bench-a{n}", db=lab_db).stdout.strip()
        for n in range(-(-len(HOSTILE) // receive.UPLOADS_AN_HOUR))
    ]
    other = lab("token", "add", "bench-b", db=lab_db).stdout.strip()
    password = lab("user", "add", "ann", db=lab_db).stdout.strip()
    store = tmp_path / "store"
    with zipfile.ZipFile(finished_bundle) as zf:
        document = zf.read(bundle.RESULT)
    with lab_server(lab_db, store) as (_, url):
        ssdbench("upload", finished_bundle, "--to", url, "--token", other, check=True)
        browser = Browser(url)
        browser.login("ann", password)
        pages = ("/history", "/bench", "/runs/1", "/compare?run=1", "/api/runs", "/api/runs/1")
        before = {page: browser.get(page) for page in pages}
        for n, (what, said) in enumerate(HOSTILE.items()):
            content = hostile(json.loads(document), what)
            path = rewritten(
                finished_bundle,
                tmp_path / f"hostile{n}.zip",
                lambda name, was, content=content: content if name == bundle.RESULT else was,
            )
            with pytest.raises(upload.UploadError) as refused:
                upload.send(path, url, tokens[n // receive.UPLOADS_AN_HOUR])
            error = str(refused.value)
            assert refused.value.status == 422 and error.startswith("the lab refused it: refused, nothing was kept")
            assert said in error and len(error) < 400, (what, error[:1000])
            assert refused_by_the_lab_document(content), what
            if n == 0:  # the command line says the lab's words
                proc = ssdbench("upload", path, "--to", url, "--token", tokens[-1])
                assert proc.returncode == 2 and said in proc.stderr, proc.stderr
            os.unlink(path)
        assert rows(lab_db, "SELECT count(*) FROM bundles") == [(1,)] and len(kept(store)) == 1
        assert not list(store.glob("incoming/*/*"))
        assert {page: browser.get(page) for page in pages} == before
        # Each bound itself is taken (issue 46, item 4), and every page reads what it took: the last date a page
        # writes, the largest id the column holds, and each text keyed on at its most, of 4-byte characters.
        at_bound = {
            **json.loads(document),
            **dict.fromkeys(("created_at", "started_at", "finished_at"), run_schema.LAST_TIME),
            "id": run_schema.INTEGER,
        }
        for path in KEYED_TEXTS:
            put(at_bound, path, "\U0001d11e" * bound(path))
        path = rewritten(
            finished_bundle,
            tmp_path / "at-bound.zip",
            lambda name, was: json.dumps(at_bound).encode() if name == bundle.RESULT else was,
            manifest_change=lambda m: {**m, "run": {**m["run"], "host": "h" * run_schema.KEYED}},
        )
        taken = upload.send(path, url, other)
        assert taken["stored"], taken
        for page in ("/history", "/bench", f"/runs/{taken['runs'][0]}"):
            assert browser.get(page)[0] == 200, page
        with browser.opener.open(f"{url}/api/runs/{taken['runs'][0]}/bundle") as download:
            assert download.status == 200 and "9999" in download.headers["Content-Disposition"]
        assert "9999-12-31" in lab("runs", db=lab_db).stdout
    # A store file without its row, whatever left it, is found by the sweep, and put aside when told; a kept one
    # stays. Nothing is deleted (issue 35, item 5).
    stray = pathlib.Path(shelf.bundle_path(str(store), "ab" * 32))
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_bytes(b"left by a crash")
    swept = lab("sweep", "--store", str(store), db=lab_db)
    assert "3 bundle files in" in swept.stdout and "1 without their row in the database, left" in swept.stdout
    assert "ab" * 32 in swept.stdout and stray.exists()
    swept = lab("sweep", "--store", str(store), "--quarantine", db=lab_db)
    assert "1 without their row in the database, moved to" in swept.stdout
    assert not stray.exists() and (store / "quarantine" / stray.name).read_bytes() == b"left by a crash"
    assert len(kept(store)) == 2


def test_bench_shows_a_models_run_the_lab_received_last_and_who_sent_it(lab_db, finished_bundle, tmp_path):
    """Issue 26, item 8: an appliance's clock (or its sender) sets a document's created_at to anything; the lab's
    /bench takes a model's latest run by when the lab received it."""
    forged = rewritten(
        finished_bundle,
        tmp_path / "forged.zip",
        lambda name, content: (
            json.dumps({**json.loads(content), "created_at": 4e9}).encode() if name == "result.json" else content
        ),
    )
    password = lab("user", "add", "ann", db=lab_db).stdout.strip()
    with lab_server(lab_db, tmp_path / "store") as (_, url):
        for appliance, path in (("bench-a", forged), ("bench-b", finished_bundle)):
            token = lab("token", "add", appliance, db=lab_db).stdout.strip()
            lab("token", "trust", appliance, db=lab_db)
            ssdbench("upload", path, "--to", url, "--token", token, check=True)
        runs = {r["appliance"]: r for r in json.loads(lab("runs", "--json", db=lab_db).stdout)}
        assert runs["bench-a"]["created_at"] > runs["bench-b"]["created_at"]
        assert runs["bench-a"]["received_at"] <= runs["bench-b"]["received_at"]
        browser = Browser(url)
        browser.login("ann", password)
        status, _, page = browser.get("/bench")
    row = re.search(r"<tr data-model(?:(?!</tr>).)*</tr>", page, re.S)[0]
    assert status == 200 and "sent by bench-b" in row and f'href="/runs/{runs["bench-b"]["id"]}"' in row, row


def test_the_same_bundle_sent_at_once_by_many_clients_to_two_servers_is_kept_once(lab_db, finished_bundle, tmp_path):
    """Two lab servers (each of several workers) on one database and one store, as docs/lab.md grows a lab: the
    same bundle sent to both at once is one row and one file, every client is told so, and a session made on one
    server is good on the other."""
    tokens = [lab("token", "add", f"bench-{n}", db=lab_db).stdout.strip() for n in range(8)]
    for n in range(8):
        lab("token", "trust", f"bench-{n}", db=lab_db)
    answers_seen, failures, start = [], [], threading.Barrier(len(tokens))

    def client(secret, url):
        start.wait()
        try:
            answers_seen.append(upload.send(finished_bundle, url, secret))
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    password = lab("user", "add", "ann", db=lab_db).stdout.strip()
    with lab_server(lab_db, tmp_path / "store") as (_, one), lab_server(lab_db, tmp_path / "store") as (_, two):
        threads = [threading.Thread(target=client, args=(t, (one, two)[n % 2])) for n, t in enumerate(tokens)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        browser = Browser(one)
        browser.login("ann", password)
        browser.url = two
        assert browser.get("/history")[0] == 200 and 'href="/runs/1"' in browser.get("/history")[2]
    assert not failures
    assert sorted(a["stored"] for a in answers_seen) == [False] * 7 + [True]
    assert {(a["sha256"], tuple(a["runs"])) for a in answers_seen} == {(list(kept(tmp_path / "store"))[0], (1,))}
    assert rows(lab_db, "SELECT count(*) FROM bundles") == [(1,)]
    assert rows(lab_db, "SELECT count(*) FROM runs") == [(1,)]
    assert rows(lab_db, "SELECT runs FROM bench") == [(1,)]


def test_a_server_killed_mid_upload_leaves_neither_a_half_bundle_nor_a_row(lab_db, finished_bundle, tmp_path):
    token = lab("token", "add", "bench-a", db=lab_db).stdout.strip()
    store = tmp_path / "store"
    big = os.urandom(256 << 20)  # incompressible: a long write, to be killed during
    large = rewritten(finished_bundle, tmp_path / "large.zip", lambda n, c: c if n else {"raw/big.bin": big})
    size = os.path.getsize(large)
    with lab_server(lab_db, store) as (server, url):
        parts = urllib.parse.urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
        sender = threading.Thread(
            target=lambda: _post_ignoring_errors(conn, large, token, size), name="sender", daemon=True
        )
        sender.start()
        # The server is writing the bundle into its folder: kill it there, with its workers, as a power cut would.
        wait_until(lambda: any(p.stat().st_size > 0 for p in store.glob("incoming/*/*.part")), "the upload's part")
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        sender.join()
    assert list(store.glob("incoming/*/*.part")), "the kill came after the part was written whole"
    with lab_server(lab_db, store) as (_, url):
        # The dead server's folder is gone; only the new server's own, empty, is there.
        assert [p.name for p in store.glob("incoming/*") if p.is_dir()] and not list(store.glob("incoming/*/*"))
        assert len(list(store.glob("incoming/*.lock"))) == 1
        assert kept(store) == {} and rows(lab_db, "SELECT count(*) FROM bundles") == [(0,)]
        done = ssdbench("upload", large, "--to", url, "--token", token, check=True)
    assert "stored as lab run 1" in done.stdout and len(kept(store)) == 1


def answer_before_the_body(url, head, sent):
    """Send a request's head and the first bytes of its body, and read the answer that comes while the rest is
    still unsent: (its status, whether the server then closed the connection, reading no more of the body). The
    socket's time limit only bounds a hang: a server that waits for the whole body never answers."""
    parts = urllib.parse.urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=120) as sock:
        sock.sendall(head + sent)
        answer = b""
        while b"\r\n\r\n" not in answer and (chunk := sock.recv(65536)):
            answer += chunk
        while chunk := sock.recv(65536):  # the answer's body, then the end of the connection
            answer += chunk
    return int(answer.split(b" ", 2)[1]), True


def test_a_body_is_refused_from_its_headers_before_a_token_or_a_login_is_checked(lab_db, finished_bundle, tmp_path):
    """HIGH (issue 26): waitress buffered every body, up to 4 GiB, before the lab saw the request. Now each refusal
    comes while a request that announced 1 GiB has sent 10 kB of it, and the connection ends there."""
    token = lab("token", "add", "bench-a", db=lab_db).stdout.strip()
    store = tmp_path / "store"
    with lab_server(lab_db, store) as (_, url):
        cases = [
            # (request line, its other headers, the status it gets)
            ("POST /lab/bundles", "Authorization: Bearer ssdb_not-a-token\r\n", 401),
            ("POST /lab/bundles", "", 401),
            ("POST /login", "Content-Type: application/x-www-form-urlencoded\r\n", 413),
            ("GET /history", "", 413),
            ("GET /api/runs", "", 413),
            ("POST /no/such/route", "", 413),
        ]
        for line, headers, status in cases:
            head = f"{line} HTTP/1.1\r\nHost: lab\r\n{headers}Content-Length: {1 << 30}\r\n\r\n".encode()
            assert answer_before_the_body(url, head, b"x" * 10_000) == (status, True), line
        # Over the largest bundle, even with a good token: refused from the length alone.
        head = f"POST /lab/bundles HTTP/1.1\r\nHost: lab\r\nAuthorization: Bearer {token}\r\n"
        head += f"Content-Length: {(4 << 30) + 1}\r\n\r\n"
        assert answer_before_the_body(url, head.encode(), b"x" * 10_000) == (413, True)
        # A body without a length, which none of the lab's clients sends.
        head = b"POST /login HTTP/1.1\r\nHost: lab\r\nTransfer-Encoding: chunked\r\n\r\n"
        assert answer_before_the_body(url, head, b"2710\r\n" + b"x" * 10_000) == (411, True)
        # Nothing of any refused body was kept; a real upload still goes through.
        assert not list(store.glob("incoming/*/*")) and kept(store) == {}
        done = ssdbench("upload", finished_bundle, "--to", url, "--token", token, check=True)
    assert "stored as lab run 1" in done.stdout


def _post_ignoring_errors(conn, path, token, size):
    try:
        with open(path, "rb") as body:
            conn.request(
                "POST",
                "/lab/bundles",
                body=body,
                headers={"Authorization": f"Bearer {token}", "Content-Length": str(size)},
            )
            conn.getresponse().read()
    except (OSError, http.client.HTTPException):
        pass  # the server was killed


def test_a_dead_servers_linked_bundle_goes_unless_its_row_committed(lab_db, finished_bundle, tmp_path):
    """The crash between linking a bundle into the store and committing its row: a sweep removes the file.
    The same sweep keeps a file whose row did commit."""
    token = lab("token", "add", "bench-a", db=lab_db).stdout.strip()
    store = tmp_path / "store"
    with lab_server(lab_db, store) as (_, url):
        ssdbench("upload", finished_bundle, "--to", url, "--token", token, check=True)
    committed = next(iter(kept(store)))
    other = rewritten(finished_bundle, tmp_path / "other.zip", lambda n, c: c if n else {"raw/x": b"x"})
    with open(other, "rb") as f:
        orphan = hashlib.sha256(f.read()).hexdigest()
    dead = store / "incoming" / "gone-1-abcd"
    dead.mkdir()
    (store / "incoming" / "gone-1-abcd.lock").touch()
    for sha, source in ((orphan, other), (committed, store / "bundles" / committed[:2] / f"{committed}.zip")):
        held = dead / f"{sha}.0123.zip"
        if not held.exists():
            os.link(source, held)
        final = store / "bundles" / sha[:2] / f"{sha}.zip"
        final.parent.mkdir(exist_ok=True)
        if not final.exists():
            os.link(held, final)
    (dead / "0123.part").write_bytes(b"half")
    assert set(kept(store)) == {committed, orphan}
    with lab_server(lab_db, store):
        assert set(kept(store)) == {committed}
        assert not dead.exists() and not (store / "incoming" / "gone-1-abcd.lock").exists()


def test_the_lab_pages_show_every_appliances_runs_side_by_side(lab_db, finished_bundle, tmp_path):
    password = lab("user", "add", "ann", db=lab_db).stdout.strip()
    with lab_server(lab_db, tmp_path / "store") as (_, url):
        two_appliances(lab_db, finished_bundle, tmp_path, url)
        browser = Browser(url)
        status, where, _ = browser.get("/compare?run=1&run=2")
        assert status == 200 and where.startswith(url + "/login")  # a login first
        assert browser.login("ann", "wrong")[0] == 401
        assert browser.login("ann", password) == (200, url + "/history")
        status, _, history = browser.get("/history")
        assert status == 200 and "bench-a" in history and "bench-b" in history and "Other SSD 2TB" in history
        status, _, page = browser.get("/compare?run=1&run=2")
        assert status == 200 and "sent by bench-a" in page and "sent by bench-b" in page
        assert 'class="ranked"' in page and 'class="chart bars"' in page  # the ranked bars, from the bundles
        status, _, bench = browser.get("/bench")
        assert status == 200 and "Other SSD 2TB" in bench
        status, _, text = browser.get("/api/compare?run=1&run=2")
        compared = json.loads(text)
        assert [r["appliance"] for r in compared["runs"]] == ["bench-a", "bench-b"]
        assert all(r["series"] and "x" in r["series"][0] for r in compared["runs"])  # the charts' data
        status, _, page = browser.get("/runs/2")
        assert status == 200 and "Other SSD 2TB" in page and "Delete this run" not in page
        # An id past 64 bits is nobody's, and PostgreSQL would have read every row to find so (issue 35, item 8).
        for path in (
            "/runs/99999999999999999999",
            "/runs/9223372036854775808",
            "/compare?run=1&run=10000000000000000000",
        ):
            assert browser.get(path)[0] == 404, path
        assert browser.get("/history?before=99999999999999999999")[0] == 200  # as without: from the newest
        # The bundle as it came, under its own name: the one the appliance gives it, from the index alone, the file
        # unopened (issue 35, item 9): a kept file that is no bundle any more is sent as it is, under that name.
        named = bundle.bundle_name(json.loads(browser.get("/api/runs/1")[2]))
        kept_file = shelf.bundle_path(
            str(tmp_path / "store"), rows(lab_db, "SELECT bundle_sha256 FROM runs WHERE id=1")[0][0]
        )
        with open(finished_bundle, "rb") as f:
            sent = f.read()
        for content in (sent, b"no longer a zip"):
            pathlib.Path(kept_file).write_bytes(content)
            with browser.opener.open(url + "/api/runs/1/bundle") as response:
                assert response.read() == content
                assert response.headers["Content-Disposition"] == f"attachment; filename={named}"
        pathlib.Path(kept_file).write_bytes(sent)
        # The Bench by a model name's start, in any case; a search longer than any page takes, or with a NUL, is
        # refused before a query.
        status, _, found = browser.get("/bench?model=oTHER+ssd")
        assert status == 200 and "Other SSD 2TB" in found and found.count("<tr data-model=") == 1
        assert "No drive model" in browser.get("/bench?model=none+such")[2]
        assert browser.get("/bench?model=" + "x" * 201)[0] == 400 and browser.get("/bench?model=a%00")[0] == 400
        assert "No model on this page" in browser.get("/bench?page=99999999999999999999")[2]  # past the last
        # The appliance's own pages and controls are not in a lab.
        for path in ("/", "/traces", "/api/drives", "/api/sticks"):
            assert browser.get(path)[0] == 404
        assert lab("user", "remove", "ann", db=lab_db).returncode == 0
        assert browser.get("/history")[1].startswith(url + "/login")  # removed: the session ended


def test_the_run_list_compare_and_bench_come_from_the_index_alone(lab_db, finished_bundle, tmp_path):
    """Issue 26, Scale: the pages that list or rank many runs read the index, never a document; a lab indexed
    before the cards were (schema 1) gets them from `lab migrate --store`."""
    password = lab("user", "add", "ann", db=lab_db).stdout.strip()
    store_dir, away = tmp_path / "store", tmp_path / "away"
    with lab_server(lab_db, store_dir) as (_, url):
        two_appliances(lab_db, finished_bundle, tmp_path, url)
        browser = Browser(url)
        browser.login("ann", password)
        before = {path: browser.get(path)[2] for path in ("/bench", "/compare?run=1&run=2", "/api/runs?limit=1")}
        store_dir.rename(away)  # no bundle, no document to open: what still answers reads the index
        pages = {path: browser.get(path) for path in before}
        assert browser.get("/runs/1")[0] == 500  # the run page does read its document
        away.rename(store_dir)
    for path, (status, _, body) in pages.items():
        assert status == 200 and body == before[path], path
    assert "Other SSD 2TB" in pages["/bench"][2] and "sent by bench-b" in pages["/bench"][2]
    assert 'class="chart bars"' in pages["/compare?run=1&run=2"][2]
    first = json.loads(pages["/api/runs?limit=1"][2])
    assert [r["id"] for r in first["runs"]] == [2] and first["next"] == 2
    with lab_server(lab_db, store_dir) as (_, url):
        browser = Browser(url)
        browser.login("ann", password)
        rest = json.loads(browser.get(f"/api/runs?limit=1&before={first['next']}")[2])
        assert [r["id"] for r in rest["runs"]] == [1] and rest["next"] is None
        assert browser.get("/api/runs?limit=0")[0] == 400
        cards = rows(lab_db, "SELECT id, model, card FROM runs ORDER BY id")
        picks = rows(lab_db, "SELECT * FROM bench ORDER BY model")
    # As a lab of schema 1 holds them: no card, no bench. `lab migrate --store` fills them in, the same.
    with psycopg.connect(lab_db) as conn:
        conn.execute("DELETE FROM bench")
        conn.execute("UPDATE runs SET card = NULL, model = NULL")
    # Bundles missing from the store: each run is named, and skipped (issue 35, item 7: it stopped the start).
    proc = lab("migrate", "--store", str(away), db=lab_db)
    assert proc.returncode == 2, proc.stderr
    for run_id in (1, 2):
        assert f"run {run_id}: no card, its bundle" in proc.stdout and "cannot be read" in proc.stdout
    with lab_server(lab_db, store_dir) as (_, url):  # a server starts, whatever the cards
        browser = Browser(url)
        browser.login("ann", password)
        status, _, page = browser.get("/compare?run=1&run=2")
        assert status == 503 and "Run 1, 2 is being indexed" in page
    proc = lab("migrate", "--store", str(store_dir), db=lab_db)
    assert proc.returncode == 0 and "2 runs got their cards" in proc.stdout, proc.stderr
    with lab_server(lab_db, store_dir) as (_, url):
        browser = Browser(url)
        browser.login("ann", password)
        table = re.compile(r"<table.*</table>", re.S)
        assert table.search(browser.get("/bench")[2])[0] == table.search(before["/bench"])[0]
    assert rows(lab_db, "SELECT id, model, card FROM runs ORDER BY id") == cards
    assert rows(lab_db, "SELECT * FROM bench ORDER BY model") == picks


class Clock:
    """The upload queue's clock, moved by the test rather than waited for."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


# The scale of the upgrade test: here (2 cores, busy) 1,000 runs fill in about half a minute.
UPGRADE_RUNS = 1000


def test_an_upgrade_fills_the_cards_in_batches_while_the_lab_serves(postgres, finished_bundle, tmp_path, monkeypatch):
    """Issue 35, item 7: a start filled every card in one transaction, and one missing bundle stopped it. A lab of
    schema 2 with UPGRADE_RUNS runs (one bundle in the store holds them all, each in its own folder) and one run
    in the middle whose bundle is missing: `lab migrate --store` fills the cards in committed batches while a
    server serves every page (a run without its card is "being indexed", never a 500), goes on past the missing
    one, and names it."""
    url = postgres()
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:2])
    schema.migrate(schema.connect(url))
    monkeypatch.undo()
    store_dir, kept_sha, lost_sha = tmp_path / "store", "ab" * 32, "cd" * 32
    path = pathlib.Path(shelf.bundle_path(str(store_dir), kept_sha))
    path.parent.mkdir(parents=True)
    with zipfile.ZipFile(finished_bundle) as zf:
        doc = zf.read("result.json")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n in range(UPGRADE_RUNS):
            zf.writestr(f"r{n}/result.json", doc)
    half, lost = UPGRADE_RUNS // 2, UPGRADE_RUNS // 2 + 1
    with psycopg.connect(url) as conn:
        conn.execute("INSERT INTO appliances (name, token_sha256) VALUES ('bench-a', repeat('0', 64))")
        conn.execute(
            """INSERT INTO bundles (sha256, bytes, kind, appliance_id, host, manifest)
               VALUES (%s, 1, 'run', 1, 'h', '{}'), (%s, 1, 'run', 1, 'h', '{}')""",
            (kept_sha, lost_sha),
        )
        conn.execute("INSERT INTO testbeds (appliance_id, host, cpu, kernel) VALUES (1, 'h', 'c', 'k')")
        conn.execute("INSERT INTO drives (model, serial, firmware) VALUES ('m', 's', 'f')")
        add = """INSERT INTO runs (bundle_sha256, member, source_id, testbed_id, drive_id, suite, suite_hash,
                                   standard, state, created_at)
                 SELECT %s, 'r' || n || '/', n + 1, 1, 1, 'engine-test', 'x', true, 'done', 0
                 FROM generate_series(%s::int, %s::int) n"""
        conn.execute(add, (kept_sha, 0, half - 1))
        conn.execute(add, (lost_sha, 0, 0))
        conn.execute(add, (kept_sha, half, UPGRADE_RUNS - 1))
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ssdbench.cli", "lab", "migrate", "--db", url, "--store", str(store_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    filled = "SELECT count(*) FROM runs WHERE card IS NOT NULL"
    try:
        wait_until(lambda: rows(url, filled)[0][0] > 0, "the first batch of cards", timeout=120)
        password = lab("user", "add", "ann", db=url).stdout.strip()
        served_while_filling = 0
        with lab_server(url, store_dir) as (_, lab_url):
            browser = Browser(lab_url)
            browser.login("ann", password)
            while proc.poll() is None:
                now = rows(url, filled)[0][0]
                for page in ("/history", "/bench", f"/compare?run=1&run={UPGRADE_RUNS + 1}"):
                    status, _, body = browser.get(page)
                    assert status == 200 or (status == 503 and "is being indexed" in body), (page, status)
                served_while_filling += now < UPGRADE_RUNS
            out, err = proc.communicate()
            took = time.monotonic() - started
            assert served_while_filling > 0
            status, _, body = browser.get(f"/compare?run=1&run={lost}")
            assert status == 503 and f"Run {lost} is being indexed" in body
            assert browser.get(f"/compare?run=1&run={UPGRADE_RUNS + 1}")[0] == 200
            assert browser.get("/bench")[0] == 200
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"{UPGRADE_RUNS} runs filled in {took:.1f} s, served {served_while_filling} times while filling")
    assert proc.returncode == 2, err
    assert f"{UPGRADE_RUNS} runs got their cards" in out
    assert f"run {lost}: no card, its bundle {lost_sha} cannot be read" in out
    assert rows(url, "SELECT id FROM runs WHERE card IS NULL") == [(lost,)]
    assert rows(url, "SELECT model, run_id, runs FROM bench")[0][2] == UPGRADE_RUNS


def test_a_run_stays_queued_on_the_appliance_until_the_lab_confirms_it(lab_db, finished_run, tmp_path):
    token = lab("token", "add", "bench-a", db=lab_db).stdout.strip()
    data_dir, _ = finished_run
    port, clock, said = free_port(), Clock(), []
    lab_queue = upload.Queue(f"http://127.0.0.1:{port}", token, clock=clock)
    db = store.connect(data_dir)
    try:
        lab_queue.after_run(db, str(data_dir), 1, said.append)
    finally:
        db.close()
    lab_queue.drain(str(data_dir), said.append)  # the runner, idle again; the lab is down
    queued = list((data_dir / upload.QUEUE_DIR).glob("*.zip"))
    assert len(queued) == 1 and bundle.verify(queued[0])
    assert "not uploaded" in said[-1] and f"next try in {upload.RETRY_FIRST_S} s" in said[-1]
    with lab_server(lab_db, tmp_path / "store", port=port):
        clock.now += upload.RETRY_FIRST_S - 1
        lab_queue.drain(str(data_dir), said.append)  # still waiting
        assert queued[0].exists() and lab("runs", db=lab_db).stdout == ""
        clock.now += 1
        lab_queue.drain(str(data_dir), said.append)
    assert not queued[0].exists() and "uploaded (lab runs 1)" in said[-1]
    assert len(json.loads(lab("runs", "--json", db=lab_db).stdout)) == 1
    assert not any(token in line for line in said)


def test_a_bundle_the_lab_fails_on_waits_on_its_own_and_is_set_aside_stuck(lab_db, finished_bundle, tmp_path):
    """Issue 35, item 6: a bundle the lab answered with 500 held back every later run, for ever. The lab fails on
    the oldest bundle (a trigger in its database refuses that bundle's row: a real 500 from the real server); the
    queue goes on to the next, tries the failing one again after its own wait, doubling, and after MAX_TRIES sets
    it aside as stuck, which the appliance's History shows with the lab's answer."""
    token = lab("token", "add", "bench-a", db=lab_db).stdout.strip()
    data_dir = tmp_path / "data"
    folder = data_dir / upload.QUEUE_DIR
    folder.mkdir(parents=True)
    bad = pathlib.Path(shutil.copy(finished_bundle, folder / "a-bad.zip"))
    good = pathlib.Path(
        rewritten(finished_bundle, folder / "b-good.zip", lambda n, c: c and c.replace(b'\n "id": 1,', b'\n "id": 2,'))
    )
    os.utime(bad, (1, 1))  # the oldest: sent first
    with open(bad, "rb") as f:
        sha256 = hashlib.sha256(f.read()).hexdigest()
    with psycopg.connect(lab_db) as conn:
        conn.execute(
            f"""CREATE FUNCTION fail() RETURNS trigger AS $$ BEGIN
                  IF NEW.sha256 = '{sha256}' THEN RAISE EXCEPTION 'the lab fails on this bundle'; END IF;
                  RETURN NEW; END $$ LANGUAGE plpgsql;
                CREATE TRIGGER fail BEFORE INSERT ON bundles FOR EACH ROW EXECUTE FUNCTION fail()"""
        )
    port, clock, said = free_port(), Clock(), []
    lab_queue = upload.Queue(f"http://127.0.0.1:{port}", token, clock=clock)
    tried = []

    def drain():
        said.clear()
        lab_queue.drain(str(data_dir), said.append)
        tried.extend(line for line in said if line.startswith(bad.name))

    with lab_server(lab_db, tmp_path / "store", port=port):
        drain()
        assert not good.exists() and "b-good.zip: uploaded (lab runs" in said[-1]  # past the failing one
        assert len(tried) == 1 and "Internal Server Error" in tried[0], said
        assert f"try 1 of {upload.MAX_TRIES}, next in 10 s; the queue goes on" in tried[0]
        waited = [upload.RETRY_FIRST_S]
        for n in range(2, upload.MAX_TRIES + 1):
            clock.now += waited[-1] - 1
            drain()
            assert len(tried) == n - 1, f"tried again before its wait of {waited[-1]} s"
            clock.now += 1
            drain()
            assert len(tried) == n and bad.exists() == (n < upload.MAX_TRIES), tried[-1]
            waited.append(min(waited[-1] * 2, upload.RETRY_MAX_S))
        assert waited[:-1] == [10, 20, 40, 80, 160, 320, 600, 600, 600, 600, 600]
        assert f"after {upload.MAX_TRIES} tries, kept as a-bad.zip.stuck" in tried[-1]
        clock.now += 3600
        drain()
        assert len(tried) == upload.MAX_TRIES  # stuck: tried no more
    assert rows(lab_db, "SELECT source_id FROM runs") == [(2,)]
    assert (folder / "a-bad.zip.stuck").exists() and not (folder / "a-bad.zip").exists()
    held = upload.held(str(data_dir))
    assert [(h["name"], h["state"], h["tries"]) for h in held] == [("a-bad.zip", "stuck", upload.MAX_TRIES)]
    assert "Internal Server Error" in held[0]["error"]
    client = make_app(data_dir).test_client()
    login(client)
    page = client.get("/history").get_data(as_text=True)
    assert "Not uploaded to the lab" in page and "a-bad.zip" in page and ">stuck<" in page
    assert "Internal Server Error" in page
    for path in ("/runs/99999999999999999999", "/repeats/9223372036854775808"):  # SQLite took neither: a 500
        assert client.get(path).status_code == 404, path


def test_a_lab_that_asks_to_wait_is_waited_out_and_no_try_is_counted(finished_bundle, tmp_path):
    """Issue 46, item 8: a 429 counted as a failed try and its Retry-After was ignored, so a lab at its quota set a
    queue's bundles aside as stuck. Now the queue waits as long as the lab asks (seconds, or an HTTP date), and no
    try is counted; a date it cannot read, or an answer without one, is a failure as before."""
    body = b'{"error": "busy"}'
    head = b"Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n" % len(body)
    for status, after, waited in (
        (b"429 Too Many Requests", b"120", 120),
        (b"503 Service Unavailable", email.utils.formatdate(time.time() + 300, usegmt=True).encode(), 300),
        (b"429 Too Many Requests", b"9" * 40, upload.RETRY_AFTER_MAX_S),
    ):
        answer = b"HTTP/1.1 %s\r\nRetry-After: %s\r\n%s\r\n%s" % (status, after, head, body)
        data_dir = tmp_path / f"data{waited}"
        (data_dir / upload.QUEUE_DIR).mkdir(parents=True)
        queued = pathlib.Path(shutil.copy(finished_bundle, data_dir / upload.QUEUE_DIR / "a.zip"))
        with hostile_lab(answer) as url:
            clock, said = Clock(), []
            lab_queue = upload.Queue(url, "ssdb_test", clock=clock)
            lab_queue.drain(str(data_dir), said.append)
            assert "no try counted" in said[-1] and not pathlib.Path(f"{queued}{upload.NOTE}").exists(), said
            assert waited - 2 <= lab_queue.next_try - clock.now <= waited, said
        assert queued.exists()
    answer = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: soon\r\n%s\r\n%s" % (head, body)
    with hostile_lab(answer) as url:
        said = []
        upload.Queue(url, "ssdb_test", clock=Clock()).drain(str(data_dir), said.append)
    assert f"try 1 of {upload.MAX_TRIES}" in said[-1], said


def test_the_token_goes_in_clear_only_to_this_machine_or_when_told():
    for url in ("http://127.0.0.1:8090/", "http://localhost:8090", "http://[::1]:8090/", "https://lab.example/"):
        upload.lab_url(url)
    for url in ("http://10.0.2.2:8090/", "http://lab.example/"):
        with pytest.raises(SsdbenchError, match="would send the token in clear"):
            upload.lab_url(url)
        upload.lab_url(url, insecure=True)
    refused = ssdbench("upload", "x.zip", "--to", "http://lab.example/", "--token-file", "/dev/null")
    assert refused.returncode == 2 and "--insecure" in refused.stderr


@contextlib.contextmanager
def hostile_lab(answer, context=None):
    """A lab on a free port of 127.0.0.1 that reads each upload whole, then gives `answer` (raw HTTP bytes, or a
    function that answers on the connection until the event it is given is set), or, with None, never answers.
    With an SSL `context`, over TLS (an https:// URL)."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        while True:
            conn, _ = listener.accept()
            if stop.is_set():  # the wake-up call below
                conn.close()
                return
            if context:
                conn = context.wrap_socket(conn, server_side=True)
            with conn:
                conn.settimeout(60)
                head = b""
                while b"\r\n\r\n" not in head:
                    head += conn.recv(65536)
                length = int(re.search(rb"Content-Length: (\d+)", head)[1]) - len(head.split(b"\r\n\r\n", 1)[1])
                while length > 0:
                    length -= len(conn.recv(65536))
                if answer is None:
                    stop.wait()
                elif callable(answer):
                    answer(conn, stop)
                else:
                    conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"{'https' if context else 'http'}://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        socket.create_connection(listener.getsockname()).close()  # a closed listener would not wake accept()
        thread.join(timeout=60)
        listener.close()


def test_a_lab_that_hangs_or_answers_wrongly_keeps_the_bundle_queued(finished_bundle, tmp_path):
    """Issue 26, item 5: a lab that never answers is given up on as soon as a run is queued (the runner's
    interrupted()), or at the send's deadline; an answer that names the bundle but is not a lab's keeps it queued."""
    secret = "ssdb_test"
    with hostile_lab(None) as url:
        checks = []
        with pytest.raises(upload.UploadError, match="set aside: a run was queued"):
            upload.send(finished_bundle, url, secret, interrupted=lambda: checks.append(1) or len(checks) > 3)
        clock = Clock()
        with pytest.raises(upload.UploadError, match="not done within 9[0-9] s"):
            upload.send(finished_bundle, url, secret, clock=lambda: clock.now + 1000 * len(checks.append(1) or checks))
    digest = hashlib.sha256(open(finished_bundle, "rb").read()).hexdigest()
    for body in (
        {"sha256": digest, "stored": "yes", "runs": [1]},
        {"sha256": digest, "stored": True, "runs": ["1"]},
        {"sha256": digest, "stored": True},
        [digest],
    ):
        text = json.dumps(body).encode()
        answer = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
        answer += b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(text), text)
        data_dir = tmp_path / f"data{len(text)}"
        (data_dir / upload.QUEUE_DIR).mkdir(parents=True)
        shutil.copy(finished_bundle, data_dir / upload.QUEUE_DIR)
        said = []
        with hostile_lab(answer) as url:
            upload.Queue(url, secret).drain(str(data_dir), said.append)
        assert len(list((data_dir / upload.QUEUE_DIR).glob("*.zip"))) == 1, (body, said)
        assert ("not one a lab gives" in said[-1] or "refused" in said[-1]) and "try 1 of" in said[-1], said


def trickle(fast):
    """An answer sent a byte every 0.2 s, well within each read's STEP_S, for a minute at most; its first `fast`
    bytes at once."""
    text = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n" + b" " * 1000

    def answer(conn, stop):
        conn.sendall(text[:fast])
        until = time.monotonic() + 60
        for byte in text[fast:]:
            if stop.wait(0.2) or time.monotonic() > until:
                return
            try:
                conn.sendall(bytes([byte]))
            except OSError:  # the client gave up
                return

    return answer


@pytest.mark.parametrize("scheme,part", [("http", "head"), ("https", "head"), ("https", "body")])
def test_a_lab_that_trickles_its_answer_is_cut_off_at_the_deadline(
    finished_bundle, tmp_path, monkeypatch, scheme, part
):
    """Issue 34, item 1: each read of the answer goes through within STEP_S, but the whole answer would take
    minutes; the send's deadline (3 s here) ends it, whether the lab trickles its headers or its body, over
    plain HTTP or over TLS (a lab with a CA of its own, given as cafile)."""
    monkeypatch.setattr(upload, "TIMEOUT_S", 3)
    monkeypatch.setattr(upload, "MIN_RATE", 10**12)
    ca, cert, key = make_ca(str(tmp_path), "127.0.0.1")
    context = None
    if scheme == "https":
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
    with hostile_lab(trickle(60 if part == "body" else 0), context) as url:
        started = time.monotonic()
        with pytest.raises(upload.UploadError, match="not done within 3 s"):
            upload.send(finished_bundle, url, "ssdb_test", cafile=ca)
        took = time.monotonic() - started
    print(f"a lab trickling its answer's {part} over {scheme}: given up after {took:.1f} s (deadline 3 s)")
    assert took < 10


def test_the_runner_service_sends_its_queue_and_never_shows_the_token(lab_db, finished_bundle, tmp_path):
    token = lab("token", "add", "bench-a", db=lab_db).stdout.strip()
    data_dir = tmp_path / "data"
    (data_dir / upload.QUEUE_DIR).mkdir(parents=True)
    shutil.copy(finished_bundle, data_dir / upload.QUEUE_DIR)
    with lab_server(lab_db, tmp_path / "store") as (_, url):
        runner = subprocess.Popen(
            [sys.executable, "-m", "ssdbench.cli", "runner", "--upload-to", url, "--data-dir", str(data_dir)],
            env={**os.environ, upload.TOKEN_VAR: token},
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until(lambda: not list((data_dir / upload.QUEUE_DIR).glob("*.zip")), "the queue to be sent")
        finally:
            runner.terminate()
            log = runner.communicate(timeout=60)[1]
    assert "uploaded (lab runs 1)" in log and token not in log
    assert token not in " ".join(runner.args)
    with zipfile.ZipFile(finished_bundle) as zf:
        assert not any(token.encode() in zf.read(n) for n in zf.namelist())
