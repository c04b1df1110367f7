"""The API keeps its OpenAPI document: the document is valid, describes every route, the server refuses
exactly what it forbids, and every answer holds what the document states and nothing else. Schemathesis, with
every check, fuzzes a real server (waitress) over a run of every kind (conftest's every_kind), and a real lab
that holds them; faster checks read every one of those runs through the checked test client
(tests/contract.py)."""

import copy
import json
import os
import re
import shutil
import subprocess
import sys

import contract
import jsonschema
import openapi_spec_validator
import pytest
from conftest import (
    EVERY_KIND,
    PIN,
    Browser,
    add_repeat,
    add_run,
    lab,
    lab_server,
    login,
    make_app,
    needs_root,
    ssdbench,
    web_server,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from ssdbench.results import document, run_schema
from ssdbench.suites import locked
from ssdbench.web import LAB_ENDPOINTS, openapi, validate

# The values where validators tend to differ: 1.0 is the integer 1, true is not, the 64-bit edge.
EDGES = [0, 1, 1.0, -0.0, True, False, "", "1", 2**63 - 1, 2**63, "smoke", "/dev/sdz"]
# A JSON value of any shape: what a hostile client can send.
JSON_VALUES = st.recursive(
    st.sampled_from(EDGES)
    | st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def request_schemas():
    """(name, schema) of every request body and parameter in the documents (a file upload's bytes aside)."""
    # A lab's paths that the appliance has too hold only part of its operations: the appliance's are read.
    for path, item in {**openapi.LAB_DOCUMENT["paths"], **openapi.DOCUMENT["paths"]}.items():
        for method, op in item.items():
            if method == "parameters":
                continue
            for param in item.get("parameters", []) + op.get("parameters", []):
                yield f"{method} {path} {param['name']}", param["schema"]
            if "application/json" in op.get("requestBody", {}).get("content", {}):
                yield f"{method} {path} body", op["requestBody"]["content"]["application/json"]["schema"]


def keywords(schema):
    for key, value in schema.items():
        yield key
        if key == "properties":
            for sub in value.values():
                yield from keywords(sub)
        elif key == "items":
            yield from keywords(value)


def test_the_documents_are_valid_openapi_3_1(client):
    document = client.get("/api/openapi.json").get_json()
    for each in (document, openapi.LAB_DOCUMENT):
        openapi_spec_validator.validate(each)
        assert each["openapi"] == "3.1.0"


def served(app, lab):
    """(rule, method) of every API route an appliance serves, or a lab (web.LAB_ENDPOINTS and its upload)."""
    found = {("/lab/bundles", "POST")} if lab else set()
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith("/api/") and (not lab or rule.endpoint in LAB_ENDPOINTS):
            found |= {(rule.rule, method) for method in rule.methods - {"HEAD", "OPTIONS"}}
    return found


@pytest.mark.parametrize("lab", [False, True], ids=["appliance", "lab"])
def test_each_document_describes_exactly_the_api_routes_its_server_serves(app, lab):
    document = openapi.LAB_DOCUMENT if lab else openapi.DOCUMENT
    routes = served(app, lab)
    for rule, method in routes:
        assert validate.operation(document, rule, method), (rule, method)
    described = {(path, m.upper()) for path, item in document["paths"].items() for m in item if m != "parameters"}
    assert {(validate.openapi_path(rule), method) for rule, method in routes} == described


def test_the_document_states_only_rules_the_server_checks():
    for name, schema in request_schemas():
        assert set(keywords(schema)) <= validate.KEYWORDS, name


@pytest.mark.parametrize("name,schema", list(request_schemas()), ids=lambda v: v if isinstance(v, str) else "")
@settings(max_examples=300, derandomize=True, deadline=None)
@given(value=JSON_VALUES)
def test_the_server_and_json_schema_agree_on_every_value(name, schema, value):
    expected = jsonschema.Draft202012Validator(schema).is_valid(value)
    assert (validate.problem(schema, value, "it") is None) == expected, (name, value)


def test_schemas_agree_at_their_edges():
    body = openapi.EXPORT_REQUEST
    for value, ok in [
        ({}, True),
        ({"runs": [1, 2.0]}, True),  # 2.0 is a whole number
        ({"runs": [1, 1.0]}, False),  # and the same number as 1
        ({"runs": [True]}, False),  # true is not 1
        ({"runs": [2**63 - 1]}, True),
        ({"runs": [2**63]}, False),
        ({"runs": [0]}, False),
        ({"device": ""}, False),
        ({"device": "/dev/sdb1", "extra": 1}, False),
    ]:
        assert (
            (validate.problem(body, value, "it") is None) == ok == jsonschema.Draft202012Validator(body).is_valid(value)
        ), value


def documented(path, method):
    return set(openapi.DOCUMENT["paths"][path][method]["responses"])


def test_every_error_is_json_and_documented(client, data_dir, token):
    add_run(data_dir)
    add_run(data_dir)
    add_repeat(data_dir)
    headers = {"X-CSRF-Token": token}
    cases = [
        # (method, url, JSON body or raw bytes, status, documented under)
        ("GET", "/api/runs/abc", None, 404, None),
        ("GET", f"/api/runs/{2**64}", None, 404, "/api/runs/{run_id}"),
        ("GET", f"/api/runs/{2**64}/bundle", None, 404, "/api/runs/{run_id}/bundle"),
        ("GET", f"/api/runs/{2**64}/progress", None, 404, "/api/runs/{run_id}/progress"),
        ("POST", f"/api/runs/{2**64}/cancel", None, 404, "/api/runs/{run_id}/cancel"),
        ("DELETE", f"/api/runs/{2**64}", None, 404, "/api/runs/{run_id}"),
        ("GET", "/api/no-such-thing", None, 404, None),
        ("GET", "/api/compare?run=1&run=1", None, 400, "/api/compare"),
        ("GET", "/api/compare?run=1,2", None, 400, "/api/compare"),
        ("GET", f"/api/compare?run=1&run={2**64}", None, 400, "/api/compare"),
        ("GET", "/api/compare?run=1&run=7", None, 404, "/api/compare"),
        ("POST", "/api/export", {"device": ""}, 400, "/api/export"),
        ("POST", "/api/export", {"runs": [1, 1]}, 400, "/api/export"),
        ("POST", "/api/export", {"runs": [7]}, 404, "/api/export"),
        ("POST", "/api/export", b"{not json", 400, "/api/export"),
        ("POST", "/api/runs", {"drive": "/dev/sdz", "suite": "smoke", "confirm": ""}, 400, "/api/runs"),
        ("POST", "/api/runs", {"drive": "/dev/sdz", "suite": "nope", "confirm": "x"}, 400, "/api/runs"),
        ("POST", "/api/runs", {"drive": "/dev/sdz", "suite": "smoke", "confirm": "x", "destroy": 1}, 400, "/api/runs"),
        ("POST", "/api/runs", {"drive": "/dev/sdz", "suite": "smoke", "confirm": "x"}, 404, "/api/runs"),
        ("POST", "/api/runs", None, 400, "/api/runs"),
        ("POST", "/api/runs", [1, 2], 400, "/api/runs"),
        ("POST", "/api/login", {"pin": 424242}, 400, "/api/login"),
        ("POST", "/api/runs", b"x" * (65 * 1024), 413, "/api/runs"),
        ("GET", f"/api/repeats/{2**64}", None, 404, "/api/repeats/{repeat_id}"),
        ("GET", "/api/repeats/9", None, 404, "/api/repeats/{repeat_id}"),
        ("GET", "/api/repeats/9/bundle", None, 404, "/api/repeats/{repeat_id}/bundle"),
        ("POST", "/api/repeats/9/cancel", None, 404, "/api/repeats/{repeat_id}/cancel"),
        ("POST", "/api/repeats/1/cancel", None, 409, "/api/repeats/{repeat_id}/cancel"),
        ("POST", "/api/repeats", {"drive": "/dev/sdz", "suite": "smoke", "confirm": "x"}, 400, "/api/repeats"),
        (
            "POST",
            "/api/repeats",
            {"drive": "/dev/sdz", "suite": "smoke", "confirm": "x", "times": 1},
            400,
            "/api/repeats",
        ),
        (
            "POST",
            "/api/repeats",
            {"drive": "/dev/sdz", "suite": "smoke", "confirm": "x", "times": 2},
            404,
            "/api/repeats",
        ),
    ]
    for method, url, body, status, path in cases:
        kw = {"data": body, "content_type": "application/json"} if isinstance(body, bytes) else {"json": body}
        response = client.open(url, method=method, headers=headers, **kw)
        assert response.status_code == status and response.is_json, (url, body, response.status_code, response.data)
        assert isinstance(response.get_json()["error"], str) and response.get_json()["error"], url
        if path:
            assert str(status) in documented(path, method.lower()), (path, method, status)
    not_allowed = client.put("/api/runs", headers=headers)
    assert not_allowed.status_code == 405 and not_allowed.is_json
    assert set(not_allowed.headers["Allow"].split(", ")) >= {"GET", "POST"}
    # The pages keep their HTML answers.
    assert client.get("/runs/abc").mimetype == "text/html"


def test_a_form_body_is_refused_as_not_json(client, token):
    response = client.post("/api/runs", data={"drive": "/dev/sdz"}, headers={"X-CSRF-Token": token})
    assert response.status_code == 400 and "Content-Type: application/json" in response.get_json()["error"]


def test_the_answers_check_fails_on_a_field_value_or_status_the_document_lacks(client, data_dir, token, monkeypatch):
    add_run(data_dir)
    doc = client.get("/api/runs/1").get_json()  # the test client checked it: it keeps the document

    def broken(change, status=200, against=openapi.DOCUMENT):
        """What the check says of the document changed by change(document)."""
        bad = copy.deepcopy(doc)
        change(bad)
        return contract.problems(against, "GET", "/api/runs/1", status, "application/json", json.dumps(bad).encode())

    assert broken(lambda d: None) == []
    assert "'new' was unexpected" in broken(lambda d: d.update(new=1))[0]
    assert "at /steps/1: Additional properties" in broken(lambda d: d["steps"][1].update(new=1))[0]
    unit = broken(lambda d: d["series"][1].update(x_unit="furlongs"))
    assert "at /series/1/x_unit: 'furlongs' is not one of" in unit[0]
    assert "'state' is a required property" in broken(lambda d: d.pop("state"))[0]
    assert broken(lambda d: None, status=418) == ["GET /api/runs/1 answered 418, which its operation does not document"]

    def as_a_lab_serves_it(d):
        for name in run_schema.LOCAL_FIELDS:  # its bundle leaves the appliance's queue out
            del d[name]
        d.update(appliance="bench-a", bundle_sha256="0" * 64, received_at=1.8e9)

    # A lab's run says which appliance sent it; an appliance's does not.
    assert broken(as_a_lab_serves_it, against=openapi.LAB_DOCUMENT) == [] and broken(as_a_lab_serves_it)
    # The test client fails the test on such an answer.
    served = document.run_document
    monkeypatch.setattr(document, "run_document", lambda db, run_id: {**served(db, run_id), "new": 1})
    with pytest.raises(AssertionError, match="GET /api/runs/1 answered 200: at /: Additional properties"):
        client.get("/api/runs/1")


def test_every_object_an_answer_describes_is_closed():
    """A field that the code adds to an answer fails the test client's check only where the object that holds it
    allows no other fields: every schema that lists fields does (run_schema.closed). The free-form records list
    none, but for a lab's, which list the fields the lab reads and bound every other (run_schema.VALUES)."""
    values = [{"$ref": f"#/components/schemas/{name}"} for name in run_schema.VALUES]
    for name, each in (("appliance", openapi.DOCUMENT), ("lab", openapi.LAB_DOCUMENT)):
        for where, schema in response_schemas(each):
            others = schema.get("additionalProperties")
            assert "properties" not in schema or others is False or others in values, (name, where)


def response_schemas(document):
    """(where, schema) of every schema and subschema of the document's answers and components."""
    found = [("components " + n, s) for n, s in document["components"]["schemas"].items()]
    for path, item in document["paths"].items():
        for method, op in item.items():
            if method != "parameters":
                for status, answer in op["responses"].items():
                    for kind, content in answer.get("content", {}).items():
                        found.append((f"{method} {path} {status} {kind}", content.get("schema", {})))
    while found:
        where, schema = found.pop()
        yield where, schema
        found += [(f"{where}.{n}", s) for n, s in schema.get("properties", {}).items()]
        for key in ("items", "additionalProperties"):
            if isinstance(schema.get(key), dict):
                found.append((f"{where} {key}", schema[key]))


@needs_root()
def test_every_kind_of_run_keeps_the_document_through_the_api(every_kind):
    """The fast check beside the fuzzer: every run document, progress, list, repeat set and drive list of a data
    folder holding every kind of run, read through the test client, which holds each answer to the document."""
    data_dir, dev = every_kind
    client = make_app(data_dir, SSDBENCH_EXTRA_DRIVES=[dev]).test_client()
    login(client)
    runs = {r["id"]: r for r in client.get("/api/runs").get_json()["runs"]}
    kinds = {k: (runs[i]["state"], runs[i]["origin"] != "local", runs[i]["repeat_id"]) for k, i in EVERY_KIND.items()}
    assert kinds == {
        "smoke": ("done", False, None),
        "imported": ("done", True, None),
        "imported repeat": ("done", True, 1),
        "cancelled": ("cancelled", False, 2),
        "failed": ("failed", False, None),
        "queued": ("queued", False, None),
    }
    docs = {run_id: client.get(f"/api/runs/{run_id}").get_json() for run_id in runs}
    for run_id in runs:
        assert client.get(f"/api/runs/{run_id}/progress").status_code == 200
    smoke = docs[EVERY_KIND["smoke"]]
    assert {s["x_unit"] for s in smoke["series"]} == {"ms", "ns", "bytes", "offset"}
    assert {s["kind"] for s in smoke["steps"]} == set(locked.STEP_KINDS)
    assert "cancelled" in [s["state"] for s in docs[EVERY_KIND["cancelled"]]["steps"]]
    failed = next(s for s in docs[EVERY_KIND["failed"]]["steps"] if s["state"] == "failed")
    assert "vanished during the step" in failed["error"]
    repeats = client.get("/api/repeats").get_json()["repeats"]
    assert [(r["id"], r["state"], r["runs"]) for r in repeats] == [(1, "done", 3), (2, "cancelled", 1)]
    for held in repeats:
        assert client.get(f"/api/repeats/{held['id']}").status_code == 200
    assert dev in [d["path"] for d in client.get("/api/drives").get_json()["drives"]]
    compared = client.get("/api/compare?" + "&".join(f"run={i}" for i in list(runs)[: openapi.MAX_COMPARE]))
    assert compared.status_code == 200


# A fixed seed, so that a failure is found again; SSDBENCH_FUZZ_SEED tries another.
SEED = int(os.environ.get("SSDBENCH_FUZZ_SEED", "20261123"))
SCHEMATHESIS = "from schemathesis.cli import schemathesis; schemathesis()"


def schemathesis_run(port, tmp_path, seed, examples=100, login=None):
    """Schemathesis with every check against the API on 127.0.0.1:port, logged in (schemathesis_session.py):
    with the PIN, or on a lab with `login`'s variables."""
    env = {
        **os.environ,
        **(login or {}),
        "SCHEMATHESIS_HOOKS": "schemathesis_session",
        "PYTHONPATH": os.pathsep.join(filter(None, [os.path.dirname(__file__), os.environ.get("PYTHONPATH")])),
        "SSDBENCH_TEST_PORT": str(port),
        "SSDBENCH_PIN": PIN,
        "NO_COLOR": "1",
    }
    config = os.path.join(os.path.dirname(__file__), "schemathesis.toml")
    argv = [
        sys.executable,
        "-c",
        SCHEMATHESIS,
        "--config-file",
        config,
        "run",
        f"http://127.0.0.1:{port}/api/openapi.json",
    ]
    argv += ["--checks", "all", "--seed", str(seed), "--max-examples", str(examples), "--no-color"]
    return subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=1800)


@needs_root()
def test_schemathesis_with_every_check_finds_nothing(every_kind, tmp_path):
    # A copy of a run of every kind: the fuzzer may delete runs, cancel the queued one, and start one on the
    # loop device the server lists (no runner takes it).
    data_dir = tmp_path / "data"
    shutil.copytree(every_kind[0], data_dir)
    with web_server(data_dir, "--drive", every_kind[1]) as (_, port):
        result = schemathesis_run(port, tmp_path, seed=SEED)
    assert_found_nothing(result)


def assert_found_nothing(result):
    summary = result.stdout[result.stdout.rfind("Test cases:") :]
    print(summary)  # how many requests it generated: pytest -s shows it
    assert result.returncode == 0, result.stdout[-12000:] + result.stderr[-3000:]
    generated = int(re.search(r"(\d+) generated", summary).group(1))
    assert generated > 1000, summary  # every operation was exercised, not skipped


@pytest.fixture(scope="module")
def every_kind_lab(postgres, every_kind, finished_bundle, tmp_path_factory):
    """A lab (the real `ssdbench lab serve`) holding every kind of run, shared by a module: appliance bench-a sent
    every_kind's smoke run, its cancelled and its failed runs and its imported repeat set (a repeat set's bundle);
    bench-b sent the finished run. Yields (its URL, schemathesis_session's login: a lab user's, bench-a's token)."""
    top = tmp_path_factory.mktemp("every-kind-lab")

    def bundle(*what):
        return ssdbench("bundle", *what, "-o", str(top), data_dir=every_kind[0], check=True).stdout.strip()

    sent = [bundle(str(EVERY_KIND[kind])) for kind in ("smoke", "cancelled", "failed")] + [bundle("--repeat", "1")]
    db = postgres()
    assert lab("migrate", db=db).returncode == 0
    login = {"SSDBENCH_LAB_USER": "ann", "SSDBENCH_LAB_PASSWORD": lab("user", "add", "ann", db=db).stdout.strip()}
    tokens = {name: lab("token", "add", name, db=db).stdout.strip() for name in ("bench-a", "bench-b")}
    for name in tokens:
        lab("token", "trust", name, db=db)
    with lab_server(db, top / "store") as (_, url):
        ssdbench("upload", *sent, "--to", url, "--token", tokens["bench-a"], check=True)
        ssdbench("upload", finished_bundle, "--to", url, "--token", tokens["bench-b"], check=True)
        yield url, {**login, "SSDBENCH_LAB_TOKEN": tokens["bench-a"]}


@needs_root()
def test_a_lab_serves_every_kind_of_run_as_its_document_states(every_kind_lab):
    """The lab's fast check: every run, the list and a comparison, read over HTTP by conftest's Browser, which
    holds each answer of the lab's API to the lab's document."""
    url, login = every_kind_lab
    browser = Browser(url)
    assert browser.login(login["SSDBENCH_LAB_USER"], login["SSDBENCH_LAB_PASSWORD"])[0] == 200
    status, _, text = browser.get("/api/runs")
    runs = json.loads(text)["runs"]
    assert status == 200 and {(r["appliance"], r["state"]) for r in runs} == {
        ("bench-a", "done"),
        ("bench-a", "cancelled"),
        ("bench-a", "failed"),
        ("bench-b", "done"),
    }
    assert {r["member"] for r in runs} == {"", "run-1/", "run-2/", "run-3/"}  # a run's bundle, and a set's
    for run in runs:
        assert browser.get(f"/api/runs/{run['id']}")[0] == 200
    assert browser.get(f"/api/compare?run={runs[0]['id']}&run={runs[-1]['id']}")[0] == 200


@needs_root()
def test_schemathesis_on_a_lab_with_every_check_finds_nothing(every_kind_lab, tmp_path):
    # The fuzzer reads as a lab user and uploads with bench-a's token.
    url, login = every_kind_lab
    result = schemathesis_run(int(url.rpartition(":")[2]), tmp_path, seed=SEED, login=login)
    assert_found_nothing(result)
