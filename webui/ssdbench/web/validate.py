"""Requests checked against the API's own OpenAPI document (web/openapi.py): its path, query and JSON body.

The document is the one source of the API's rules, so the server enforces exactly what it publishes.
Only the JSON Schema keywords listed in KEYWORDS are understood; a test keeps the document to them, so
that it can never state a rule that nobody checks.
"""

import json
import re

from flask import request

KEYWORDS = {
    "type",
    "enum",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "pattern",
    "description",
    "examples",
}
TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    # JSON Schema's integer is a number with no fraction: 76.0 is one.
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) or isinstance(v, float) and v.is_integer(),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
# A number in a URL, written as JSON writes it (int() and float() would also take " 7", "7_000", "nan" and
# Arabic digits).
JSON_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")


class Refused(Exception):
    """A request that breaks the document: its HTTP status (404 for a path, else 400) and why."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def problem(schema, value, where):
    """The first way `value` breaks `schema`, as a sentence about `where`; None when it follows it."""
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(TYPES[t](value) for t in types):
            return f"{where} must be {' or '.join(types)}"
    # JSON's true is not 1: compare the type too.
    if "enum" in schema and not any(type(value) is type(e) and value == e for e in schema["enum"]):
        return f"{where} must be one of {', '.join(json.dumps(e) for e in schema['enum'])}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{where} must not be empty" if schema["minLength"] == 1 else f"{where} is too short"
        if len(value) > schema.get("maxLength", len(value)):
            return f"{where} is longer than {schema['maxLength']} characters"
        # JSON Schema's pattern matches anywhere in the string (re.search), unless it is anchored.
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return f"{where} must match {schema['pattern']}"
    if TYPES["number"](value):
        if value < schema.get("minimum", value):
            return f"{where} must be at least {schema['minimum']}"
        if value > schema.get("maximum", value):
            return f"{where} must be at most {schema['maximum']}"
    if isinstance(value, list):
        return _array_problem(schema, value, where)
    if isinstance(value, dict):
        return _object_problem(schema, value, where)
    return None


def _array_problem(schema, value, where):
    if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
        return f"{where} must hold {schema.get('minItems', 0)} to {schema.get('maxItems', 'any number of')} items"
    if schema.get("uniqueItems") and len({_json_value(v) for v in value}) < len(value):
        return f"{where} must not repeat an item"
    for i, item in enumerate(value):
        found = problem(schema.get("items", {}), item, f"{where}[{i}]")
        if found:
            return found
    return None


def _json_value(v):
    """A value as JSON compares it: 1 and 1.0 are one number, true is not 1."""
    return json.dumps(int(v) if TYPES["integer"](v) else v, sort_keys=True)


def _object_problem(schema, value, where):
    properties = schema.get("properties", {})
    for name in schema.get("required", ()):
        if name not in value:
            return f"{where} needs {name}"
    if schema.get("additionalProperties") is False:
        unknown = sorted(set(value) - set(properties))
        if unknown:
            return f"{where} has fields this API does not take: {', '.join(unknown)}"
    for name, sub in properties.items():
        if name in value:
            found = problem(sub, value[name], name)
            if found:
                return found
    return None


def openapi_path(rule):
    """A Flask URL rule as the document names its path: /api/runs/<int:run_id> is /api/runs/{run_id}."""
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule)


def operation(document, rule, method):
    """The document's operation for a Flask URL rule and method, with the path item's parameters; None if
    it has none (a HEAD is checked as its GET)."""
    item = document["paths"].get(openapi_path(rule), {})
    found = item.get("get" if method == "HEAD" else method.lower())
    if found is None:
        return None
    return {**found, "parameters": item.get("parameters", []) + found.get("parameters", [])}


def _from_url(schema, text):
    """A path or query value as its schema's type: a number where one is expected, else the text."""
    if schema.get("type") in ("integer", "number") and JSON_NUMBER.fullmatch(text):
        return json.loads(text)
    return text


def check(document):
    """Refuse (raise Refused) the current request if it breaks its operation in the document. Returns the
    query's values, numbers as numbers."""
    op = operation(document, request.url_rule.rule, request.method)
    query = {}
    if op is None:
        return query
    for param in op["parameters"]:
        name, schema = param["name"], param["schema"]
        if param["in"] == "path":
            # Flask's converter (<int:run_id>) has already made the value its type.
            found = problem(schema, request.view_args[name], name)
            if found:
                raise Refused(404, found)
        elif param["in"] == "query":
            values = request.args.getlist(name)
            if not values:
                if param.get("required"):
                    raise Refused(400, f"the query needs {name}")
                continue
            if schema.get("type") == "array":
                value = [_from_url(schema.get("items", {}), v) for v in values]
            elif len(values) == 1:
                value = _from_url(schema, values[0])
            else:
                raise Refused(400, f"give {name} once")
            found = problem(schema, value, name)
            if found:
                raise Refused(400, found)
            query[name] = value
    body = op.get("requestBody")
    if body is not None and request.method != "HEAD":
        _check_body(body)
    return query


def _check_body(spec):
    if "application/json" not in spec["content"]:
        return  # a file (a lab's upload), which its route reads and checks itself
    if not request.content_length and not request.data:
        if spec.get("required"):
            raise Refused(400, "send a JSON body (Content-Type: application/json)")
        return
    if not request.is_json:
        raise Refused(400, "the body must be JSON, sent as Content-Type: application/json")
    value = request.get_json(silent=True)
    if value is None and request.data.strip() != b"null":
        raise Refused(400, "the body is not valid JSON")
    found = problem(spec["content"]["application/json"]["schema"], value, "the body")
    if found:
        raise Refused(400, found)
