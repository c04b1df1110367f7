"""make bench, lab pages: what the pages cost on a lab that holds RUNS runs.

A real PostgreSQL (lab/cluster) is seeded with RUNS runs through the lab's own checks and index code
(lab/admit, lab/index.add_bundle), from the documents of a real bundle: bench_web's standard-sized run, its drive
model varied over MODELS models and its serial per run, each run in a bundle of its own. Every seeded bundle
is a hard link to (a copy of) that one bundle under its own name in the store, so that any run's page opens as a
real one does.
Then the real `ssdbench lab serve` (gunicorn) answers, logged in, REQUESTS times each: /bench, the run list's
first page and a page deep in it, /api/runs, a run page and a compare of 10 runs, one request at a time. It
reports each page's p50 and p95 and fails when a p95 is over LIMIT_MS (not in --short mode: 2,000 runs, which
checks that every part works, not the times).
"""

import argparse
import hashlib
import http.cookiejar
import json
import os
import re
import shutil
import statistics
import sys
import time
import urllib.parse
import urllib.request

from bench_lab import empty_lab, lab_server, standard_bundle

from ssdbench.lab import access, admit, index, shelf

RUNS, MODELS, REQUESTS, LIMIT_MS = 100_000, 1_000, 40, 200
BATCH, LINKS = 1_000, 50_000


def seed(conn, store_dir, path, runs, models):
    """`runs` runs in the lab, each in a bundle of its own (a hard link to `path` under a made-up sha256)."""
    manifest, documents = admit.documents(path)
    host, (row,) = admit.index_rows(manifest, documents)
    appliance = conn.execute("SELECT id FROM appliances WHERE name = 'seed'").fetchone()
    size = os.path.getsize(path)
    started = time.perf_counter()
    for first in range(0, runs, BATCH):
        with conn.transaction():
            for n in range(first, min(first + BATCH, runs)):
                sha256 = hashlib.sha256(f"seeded run {n}".encode()).hexdigest()
                target = shelf.bundle_path(store_dir, sha256)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                if n % LINKS == 0:  # a file has at most 65,000 links on ext4: a fresh copy of the bundle now and then
                    source = f"{path}.{n // LINKS}"
                    shutil.copyfile(path, source)
                os.link(source, target)
                model = f"Bench SSD {n % models:04d}"
                made = row._replace(
                    drive=(model, f"S{n}", *row.drive[2:]),
                    card={**row.card, "drive": {**row.card["drive"], "model": model, "serial": f"S{n}"}},
                )
                index.add_bundle(conn, sha256, size, manifest, host, [made], appliance)
        done = min(first + BATCH, runs)
        print(f"seeded {done} runs, {done / (time.perf_counter() - started):.0f} a second", file=sys.stderr, flush=True)


class Client:
    """A logged-in browser's plain HTTP: the login form's CSRF token, then the session cookie."""

    def __init__(self, url, user, password):
        self.url = url
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', self.get("/login"))[1]
        form = urllib.parse.urlencode({"user": user, "password": password, "csrf_token": csrf}).encode()
        with self.opener.open(url + "/login", data=form) as response:
            if not response.geturl().endswith("/history"):
                raise SystemExit("the login failed")

    def get(self, path):
        with self.opener.open(self.url + path, timeout=120) as response:
            if response.status != 200:
                raise SystemExit(f"{path}: {response.status}")
            return response.read().decode()


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--short", action="store_true", help="2,000 runs, 5 requests a page: check that it works")
    short = args.parse_args().short
    runs, models, requests = (2_000, 50, 5) if short else (RUNS, MODELS, REQUESTS)
    results, problems = {}, []
    with empty_lab("ssdbench-bench-lab-pages-") as (work, db_url, conn):
        access.add_token(conn, "seed")
        password = access.add_user(conn, "bench")
        store_dir = os.path.join(work, "store")
        seed(conn, store_dir, standard_bundle(work), runs, models)
        ids = [r["id"] for r in conn.execute("SELECT id FROM runs ORDER BY id")]
        middle = ids[len(ids) // 2]
        pages = {
            "/bench": ("/bench", f"Bench SSD {models - 1:04d}"),
            "run list, first page": ("/history", f'href="/runs/{ids[-1]}"'),
            "run list, a page deep in it": (f"/history?before={middle}", f'href="/runs/{middle - 1}"'),
            "/api/runs": (f"/api/runs?before={middle}", f'"id":{middle - 1}'),
            "a run page": (f"/runs/{middle}", "Bench SSD"),
            "compare of 10 runs": (f"/compare?runs={','.join(map(str, ids[-10:]))}", 'class="chart bars"'),
        }
        with lab_server(db_url, store_dir) as url:
            client = Client(url, "bench", password)
            for name, (path, expect) in pages.items():
                if expect not in client.get(path).replace(": ", ":"):
                    problems.append(f"{name}: {path} does not show {expect!r}")
                took = []
                for _ in range(requests):
                    began = time.perf_counter()
                    client.get(path)
                    took.append((time.perf_counter() - began) * 1000)
                cuts = statistics.quantiles(took, n=100, method="inclusive")
                results[name] = {"p50_ms": cuts[49], "p95_ms": cuts[94]}
                print(f"{name} ({path[:40]}): p50 {cuts[49]:.0f} ms, p95 {cuts[94]:.0f} ms", flush=True)
                if not short and cuts[94] > LIMIT_MS:
                    problems.append(f"{name}: p95 {cuts[94]:.0f} ms, over {LIMIT_MS} ms")
    for p in problems:
        print(f"PROBLEM: {p}")
    print(json.dumps({"runs": runs, "pages": results, "ok": not problems}))
    sys.exit(0 if not problems else 1)


if __name__ == "__main__":
    main()
