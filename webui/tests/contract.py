"""The API's answers held to its own OpenAPI document, as the tests receive them: `problems` says how one answer
breaks the document, `ContractClient` (the test client of every app conftest's make_app makes) and conftest's
`Browser` (a lab over HTTP) fail a test on any answer that does.

An answer keeps the document when its operation documents its status, its content type is the documented one,
and a JSON body is valid against that answer's schema (jsonschema, Draft 2020-12; a $ref points into the
document's components). Paths that no operation of the document serves (the pages, an unknown path, a method
a path does not take) are not held to it."""

import json
import re

import jsonschema
from flask.testing import FlaskClient
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from ssdbench.web import api

DOCUMENT_URI = "urn:ssdbench:openapi"
# What a problem quotes of a value: a run document is far too long to read in a failure.
QUOTED = 300


def operation(document, method, path):
    """The path template of the document's operation that serves `method` on `path`, or None."""
    for template, item in document["paths"].items():
        pattern = "[^/]+".join(map(re.escape, re.split(r"\{[^}]+\}", template)))
        if method.lower() in item and re.fullmatch(pattern, path):
            return template
    return None


def problems(document, method, path, status, mimetype, body):
    """How an answer (its status, content type and body bytes) breaks `document`: a list of sentences, empty when
    it keeps it or when no operation serves the request."""
    template = operation(document, method, path)
    if template is None:
        return []
    where = f"{method} {path} answered {status}"
    answer = document["paths"][template][method.lower()]["responses"].get(str(status))
    if answer is None:
        return [f"{where}, which its operation does not document"]
    content = answer.get("content", {})
    if not content:
        return [f"{where} with a body, where the document gives none"] if body else []
    if mimetype not in content:
        return [f"{where} as {mimetype}, where the document gives {', '.join(content)}"]
    if mimetype != "application/json":
        return []
    pointer = ("paths", template, method.lower(), "responses", str(status), "content", mimetype, "schema")
    return [f"{where}: {problem}" for problem in _problems(document, pointer, json.loads(body))]


def component_problems(document, name, value):
    """How `value` breaks the schema the document's components give as `name`."""
    return _problems(document, ("components", "schemas", name), value)


def _problems(document, pointer, value):
    """How `value` breaks the schema at `pointer` (its parts) in `document`."""
    escaped = "/".join(p.replace("~", "~0").replace("/", "~1") for p in pointer)
    registry = Registry().with_resource(DOCUMENT_URI, DRAFT202012.create_resource(document))
    validator = jsonschema.Draft202012Validator({"$ref": f"{DOCUMENT_URI}#/{escaped}"}, registry=registry)
    return [
        f"at /{'/'.join(map(str, error.absolute_path))}: {error.message[:QUOTED]}"
        for error in validator.iter_errors(value)
    ]


def assert_keeps(document, method, path, status, mimetype, body):
    found = problems(document, method, path, status, mimetype, body)
    assert not found, "the answer breaks the API's document:\n" + "\n".join(found)


class ContractClient(FlaskClient):
    """Flask's test client, failing the test on any answer of the app that breaks the document it serves (an
    appliance's or a lab's)."""

    def open(self, *args, **kwargs):
        response = super().open(*args, **kwargs)
        with self.application.app_context():
            document = api.document()
        # Only a JSON body is read: a bundle streams from its file, which the test may still want whole.
        body = response.get_data() if response.is_json else b""
        assert_keeps(
            document, response.request.method, response.request.path, response.status_code, response.mimetype, body
        )
        return response
