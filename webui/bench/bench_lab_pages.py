"""make bench, lab pages: what the pages cost on a lab that holds RUNS runs of MODELS drive models.

A real PostgreSQL (lab/cluster) is seeded with RUNS runs, each in a bundle of its own, by COPY: every row is made
from the documents of a real bundle (bench_web's standard-sized run) by the lab's own checks and card code
(lab/admit.index_rows), its drive model varied over MODELS models and its serial per run, and the bench is picked
as `lab migrate` picks it (lab/index.repick), the seeding appliance trusted. A million runs seed in minutes (12
here, busy). Every seeded bundle is a hard link to (a copy of) that one bundle under its
own name in the store, so that any run's page and download open as a real one's do.
Then the real `ssdbench lab serve` (gunicorn) answers, logged in, REQUESTS times each: /bench's first page, a
page deep in it and a search, the run list's first page and a page deep in it, /api/runs, a run page, its
bundle's download and a compare of 10 runs, one request at a time. It prints the number of runs seeded and each
page's p50 and p95, and fails when a p95 is over LIMIT_MS (not in --short mode: 2,000 runs, which checks that
every part works, not the times).
"""

import argparse
import datetime
import hashlib
import json
import os
import shutil
import sys
import time

from bench_lab import empty_lab, lab_server, standard_bundle
from session import Session, timed

from ssdbench.lab import access, admit, index, shelf
from ssdbench.web import data

RUNS, MODELS, REQUESTS, LIMIT_MS = 1_000_000, 10_000, 40, 200
LINKS, SAID = 50_000, 100_000
RECEIVED = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def model(n, models):
    return f"Bench SSD {n % models:04d}"


def seed(conn, store_dir, path, runs, models):
    """`runs` runs in the lab, each in a bundle of its own (a hard link to `path` under a made-up sha256), by
    COPY: rows made once from the bundle's documents by lab/admit, varied by model and serial."""
    manifest, documents = admit.documents(path)
    host, (row,) = admit.index_rows(manifest, documents)
    # Trusted, as the bench shows only trusted appliances' runs.
    appliance = conn.execute("UPDATE appliances SET trusted = true WHERE name = 'seed' RETURNING id").fetchone()["id"]
    testbed = conn.execute(
        "INSERT INTO testbeds (appliance_id, host, cpu, kernel) VALUES (%s, %s, %s, %s) RETURNING id",
        (appliance, *row.testbed),
    ).fetchone()["id"]
    # The card as the index writes it, its model and serial to fill in: one json.dumps, not a million.
    card = json.dumps({**row.card, "drive": {**row.card["drive"], "model": "@MODEL@", "serial": "@SERIAL@"}})
    kept = json.dumps(admit.kept_manifest(manifest, host))
    size, r = os.path.getsize(path), row.run
    started = time.perf_counter()
    with conn.transaction(), conn.cursor() as cur:  # one COPY at a time: a connection carries one
        # The appliance's stored bytes once, as the schema's migration counts them: its trigger's update of the one
        # appliance's row for each of a million bundles in one transaction walks a million versions of that row.
        cur.execute("ALTER TABLE bundles DISABLE TRIGGER bundles_stored")
        cur.execute("UPDATE appliances SET stored_bytes = stored_bytes + %s WHERE id = %s", (size * runs, appliance))
        with cur.copy("COPY drives (id, model, serial, firmware, capacity_bytes, transport) FROM STDIN") as copy:
            for n in range(runs):
                copy.write_row((n + 1, model(n, models), f"S{n}", *row.drive[2:]))
        with cur.copy(
            "COPY bundles (sha256, bytes, kind, appliance_id, host, received_at, manifest) FROM STDIN"
        ) as copy:
            for n in range(runs):
                received = RECEIVED + datetime.timedelta(seconds=n)
                copy.write_row((sha(n), size, "run", appliance, host, received, kept))
        with cur.copy(
            """COPY runs (id, bundle_sha256, member, source_id, testbed_id, drive_id, path, suite, suite_hash,
                          standard, state, error, created_at, started_at, finished_at, model, card) FROM STDIN"""
        ) as copy:
            for n in range(runs):
                name = model(n, models)
                copy.write_row(
                    (n + 1, sha(n), row.prefix, r["source_id"], testbed, n + 1, r["path"], r["suite"])
                    + (r["suite_hash"], r["standard"], r["state"], r["error"], r["created_at"], r["started_at"])
                    + (r["finished_at"], name, card.replace("@MODEL@", name).replace("@SERIAL@", f"S{n}"))
                )
                if (n + 1) % SAID == 0:
                    print(
                        f"seeded {n + 1} runs, {(n + 1) / (time.perf_counter() - started):.0f} a second",
                        file=sys.stderr,
                    )
        # The first run's headline figures, then each run's the same: 20 million rows made by PostgreSQL, where
        # writing each from Python took most of the seeding.
        with cur.copy("COPY figures (run_id, step, name, value, unit, kind) FROM STDIN") as copy:
            for f in row.figures:
                copy.write_row((1, f.step, f.name, f.value, f.unit, f.kind))
        cur.execute(
            """INSERT INTO figures (run_id, step, name, value, unit, kind)
               SELECT n, step, name, value, unit, kind FROM figures, generate_series(2, %s) n WHERE run_id = 1""",
            (runs,),
        )
        cur.execute("ALTER TABLE bundles ENABLE TRIGGER bundles_stored")
        for table in ("drives", "runs"):
            cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), %s)", (runs,))
    with conn.transaction():
        index.repick(conn)
    conn.execute("VACUUM (ANALYZE)")  # as autovacuum leaves a lab that has settled
    link(store_dir, path, runs)
    print(f"seeded {runs} runs of {models} models in {time.perf_counter() - started:.0f} s", file=sys.stderr)


def sha(n):
    return hashlib.sha256(f"seeded run {n}".encode()).hexdigest()


def link(store_dir, path, runs):
    """Each seeded run's bundle in the store: a hard link to a copy of `path`."""
    for n in range(runs):
        target = shelf.bundle_path(store_dir, sha(n))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if n % LINKS == 0:  # a file has at most 65,000 links on ext4: a fresh copy of the bundle now and then
            source = f"{path}.{n // LINKS}"
            shutil.copyfile(path, source)
        os.link(source, target)


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--short", action="store_true", help="2,000 runs, 5 requests a page: check that it works")
    short = args.parse_args().short
    runs, models, requests = (2_000, 250, 5) if short else (RUNS, MODELS, REQUESTS)
    results, problems = {}, []
    with empty_lab("ssdbench-bench-lab-pages-") as (work, db_url, conn):
        access.add_token(conn, "seed")
        password = access.add_user(conn, "bench")
        store_dir = os.path.join(work, "store")
        seed(conn, store_dir, standard_bundle(work), runs, models)
        print(f"runs seeded: {conn.execute('SELECT count(*) AS n FROM runs').fetchone()['n']}", flush=True)
        last, middle = runs, runs // 2  # the seeded runs' ids are 1 to runs
        deep = models // data.BENCH_PAGE // 2 + 1
        pages = {
            "/bench": ("/bench", 'rel="next"'),
            "/bench, a page deep in it": (f"/bench?page={deep}", model((deep - 1) * data.BENCH_PAGE, models)),
            "/bench, a search by model": ("/bench?model=bench+ssd+01", model(199, models)),
            "run list, first page": ("/history", f'href="/runs/{last}"'),
            "run list, a page deep in it": (f"/history?before={middle}", f'href="/runs/{middle - 1}"'),
            "/api/runs": (f"/api/runs?before={middle}", f'"id":{middle - 1}'),
            "a run page": (f"/runs/{middle}", "Bench SSD"),
            "a run's bundle": (f"/api/runs/{middle}/bundle", "manifest.json"),
            "compare of 10 runs": (
                f"/compare?runs={','.join(map(str, range(last - 9, last + 1)))}",
                'class="chart bars"',
            ),
        }
        with lab_server(db_url, store_dir) as url:
            client = Session(url, user="bench", password=password)
            for name, (path, expect) in pages.items():
                if expect not in client.get(path).replace(": ", ":"):
                    problems.append(f"{name}: {path} does not show {expect!r}")
                results[name] = took = timed(requests, lambda path=path: client.get(path))
                print(f"{name} ({path[:40]}): p50 {took['p50_ms']:.0f} ms, p95 {took['p95_ms']:.0f} ms", flush=True)
                if not short and took["p95_ms"] > LIMIT_MS:
                    problems.append(f"{name}: p95 {took['p95_ms']:.0f} ms, over {LIMIT_MS} ms")
    for p in problems:
        print(f"PROBLEM: {p}")
    print(json.dumps({"runs": runs, "pages": results, "ok": not problems}))
    sys.exit(0 if not problems else 1)


if __name__ == "__main__":
    main()
