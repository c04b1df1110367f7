"""A lab of many runs (issue 35, item 9): on a real PostgreSQL seeded as make bench seeds it (COPY, from a real
bundle's documents through the lab's own card code), every query a page runs is planned as an index scan, never
a read of every run or every model; and `lab runs` streams."""

import json
import os
import subprocess
import sys

import psycopg
import pytest
from conftest import lab, needs_root, wait_until

from ssdbench.lab import access, index, schema

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from bench_lab import standard_bundle  # noqa: E402
from bench_lab_pages import model, seed  # noqa: E402

pytestmark = needs_root()

# Enough that a read of every row costs the planner more than an index's: here, about 20 s to seed.
RUNS, MODELS = 20_000, 2_000
# The tables that grow with the runs or the models: none may be read whole. (testbeds and appliances hold a few
# rows, which the planner may read whole to join.)
LARGE = {"runs", "drives", "bundles", "figures", "bench"}


@pytest.fixture(scope="module")
def seeded(postgres, tmp_path_factory):
    """A lab database of RUNS runs of MODELS models, analysed: (its URL, its store)."""
    work = tmp_path_factory.mktemp("scale")
    url = postgres()
    conn = schema.connect(url)
    schema.migrate(conn)
    access.add_token(conn, "seed")
    store_dir = str(work / "store")
    seed(conn, store_dir, standard_bundle(str(work)), RUNS, MODELS)
    conn.close()
    return url, store_dir


class Explained:
    """A lab connection that has PostgreSQL explain each query before it runs it: the plans, in order."""

    def __init__(self, conn):
        self.conn, self.plans = conn, []

    def execute(self, sql, params=None):
        plan = self.conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchone()["QUERY PLAN"]
        self.plans.append(plan[0]["Plan"])
        return self.conn.execute(sql, params)


def nodes(plan):
    yield plan
    for child in plan.get("Plans", ()):
        yield from nodes(child)


def scans(plan):
    """(node type, relation) of each scan of a table in the plan."""
    return [(n["Node Type"], n["Relation Name"]) for n in nodes(plan) if "Relation Name" in n]


def test_every_page_query_is_an_index_scan(seeded):
    url, store_dir = seeded
    conn = Explained(schema.connect(url))
    results = index.LabResults(conn, store_dir)
    middle = RUNS // 2
    pages = {
        "history": lambda: results.runs_page(None, 101),
        "a deep history page, and /api/runs": lambda: results.runs_page(middle, 101),
        "/bench": lambda: results.bench_page("", 0, 101),
        "a deep /bench page": lambda: results.bench_page("", MODELS // 2, 101),
        "a search of /bench": lambda: results.bench_page("BENCH ssd 01", 0, 101),
        "a run page": lambda: results.run_document(middle),
        "a run's bundle": lambda: results.bundle_file(middle),
        "compare": lambda: results.cards(list(range(RUNS - 9, RUNS + 1))),
    }
    for page, read in pages.items():
        conn.plans.clear()
        assert read(), page
        assert conn.plans, page
        for plan in conn.plans:
            found = scans(plan)
            read_whole = [table for kind, table in found if table in LARGE and "Index" not in kind]
            assert not read_whole and any("Index" in kind for kind, _ in found), (page, found)
    # What the pages show: a page of models by name, the next page after it, a search by a name's start in any case.
    first = [bench_model(row) for row in results.bench_page("", 0, 101)]
    assert first == sorted(model(n, MODELS) for n in range(101))
    assert bench_model(results.bench_page("", 100, 1)[0]) == model(100, MODELS)
    found = [bench_model(row) for row in results.bench_page("BENCH ssd 01", 0, 1000)]
    assert found == [model(n, MODELS) for n in range(100, 200)]
    assert results.bench_page("bench ssd 9999x", 0, 10) == []
    # A run's bundle is named from the index, as the appliance named it.
    path, name = results.bundle_file(middle)
    assert os.path.exists(path) and name.startswith(f"{model(middle - 1, MODELS).replace(' ', '-')}_S{middle - 1}_")


def bench_model(row):
    return row[0]["drive"]["model"]


def test_lab_runs_streams_every_run(seeded):
    """`lab runs` reads its rows a thousand at a time from a server-side cursor (lab/index.STREAM_ROWS), writing
    each batch before it fetches the next: while nobody reads its output, it waits inside the cursor, having
    fetched a part. Then it lists them all, oldest first."""
    url, _ = seeded
    argv = [sys.executable, "-m", "ssdbench.cli", "lab", "runs", "--json", "--db", url]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        with psycopg.connect(url, autocommit=True) as watch:  # each poll a fresh view of the activity

            def fetching():
                query = "SELECT 1 FROM pg_stat_activity WHERE state = 'idle in transaction' AND query LIKE 'FETCH%'"
                return watch.execute(query).fetchone() is not None or proc.poll() is not None

            wait_until(fetching, "lab runs to fetch its rows a part at a time")
            assert proc.poll() is None  # its output (megabytes) not read: it waits with the rest unfetched
        out, err = proc.communicate()
    assert proc.returncode == 0, err
    listed = json.loads(out)
    assert [r["id"] for r in listed] == list(range(1, RUNS + 1))
    assert listed[-1]["model"] == model(RUNS - 1, MODELS)
    text = lab("runs", db=url).stdout.splitlines()
    assert len(text) == RUNS and text[0].split()[0] == "1"
