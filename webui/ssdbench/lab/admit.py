"""What the lab takes of an uploaded bundle before any of it is kept: its documents, bounded in size and number,
and each run document valid against the one schema the lab's API document states of its runs (run_schema.ADMITTED),
so that a bundle the database could not take, or whose pages would be blown up by one field, is refused (422)
before its file is placed in the store, never after.

The documents come from anybody with a token: a number may be NaN or 10^400, a string may hold a NUL or a lone
surrogate (neither of which PostgreSQL stores) or 8 MB, an id may be a string, a step may have no state, a drive's
model may be a list, a record may nest a thousand deep. Each is refused with what was wrong and where, in words
of the lab's own: a refusal never quotes the hostile value, nor more than PATH_PART characters of a field's name.
"""

import functools
from typing import NamedTuple

from ..errors import SsdbenchError
from ..results import bundle, card, headline, run_schema
from ..run.repeat import MAX_TIMES

# A run's document: a full suite's is a few MB. A bundle holds one run, or a repeat set of at most MAX_TIMES.
# The manifest lists a few hundred files (about 10 kB a run), and a repeat set's document is smaller than one run's:
# each JSON member is held to its size before it is parsed (a 28 MB manifest took a worker from 141 to 689 MB).
MAX_MANIFEST_BYTES = 1 << 20
MAX_REPEAT_BYTES = 1 << 20
MAX_DOCUMENT_BYTES = 16 << 20
MAX_DOCUMENTS_BYTES = 64 << 20
MAX_RUNS = MAX_TIMES
# A refusal's length, and what it shows of a field's name in the path that failed.
MAX_ERROR = 300
PATH_PART = 40


def _items(validator, items, instance, schema):
    """jsonschema's `items`, but a list whose items are numbers (a series' points) is weighed in one pass instead
    of a descent an item: a run's 77,000 points took 1.2 s, and the lab takes 50 uploads a second."""
    from jsonschema import Draft202012Validator, ValidationError

    if items != run_schema.NUMBER or not validator.is_type(instance, "array"):
        yield from Draft202012Validator.VALIDATORS["items"](validator, items, instance, schema)
        return
    if set(map(type, instance)) <= {int, float}:  # JSON Schema's number: a boolean is none
        return
    index = next(n for n, item in enumerate(instance) if type(item) not in (int, float))
    yield ValidationError(
        "is not of type 'number'", validator="type", validator_value="number", schema=items, path=[index]
    )


# JSON Schema's names of the types of a value as JSON is parsed (a float without a fraction is an integer too).
_TYPES = {
    str: {"string"},
    bool: {"boolean"},
    type(None): {"null"},
    list: {"array"},
    dict: {"object"},
    int: {"integer", "number"},
    float: {"number"},
}


def _type(validator, types, instance, schema):
    """jsonschema's `type`, but by one look-up of the value's Python type instead of a call of the type checker
    a type named: a run's 3,900 of them were a fifth of its check."""
    names = _TYPES.get(type(instance))
    if names is None:  # not a value JSON gives
        from jsonschema import Draft202012Validator

        yield from Draft202012Validator.VALIDATORS["type"](validator, types, instance, schema)
        return
    if type(instance) is float and instance.is_integer():
        names = _TYPES[int]
    if names.isdisjoint([types] if isinstance(types, str) else types):
        from jsonschema import ValidationError

        yield ValidationError(f"is not of type {types!r}")


# The keywords of a schema that weighs one value alone, without a schema of its own below it.
_LEAF = {"type", "enum", "maxLength", "pattern", "minimum", "maximum", "description", "examples"}


def _properties(validator, properties, instance, schema):
    """jsonschema's `properties`, but a field whose schema is a leaf (_LEAF: a text, a number) is weighed by the
    keywords' own functions in place, without jsonschema's descent (a new validator a field): a run's 1,200
    descents cost three quarters of its check."""
    from jsonschema import ValidationError

    if not validator.is_type(instance, "object"):
        return
    for name, each in properties.items():
        if name not in instance:
            continue
        if not each.keys() <= _LEAF:
            yield from validator.descend(instance[name], each, path=name, schema_path=name)
            continue
        for keyword, value in each.items():
            check = validator.VALIDATORS.get(keyword)
            for error in (check and check(validator, value, instance[name], each)) or ():
                yield ValidationError(
                    error.message,
                    validator=keyword,
                    validator_value=value,
                    instance=instance[name],
                    schema=each,
                    path=[name],
                    schema_path=[name, keyword],
                )


@functools.cache
def _validator(schema="ADMITTED"):
    """The validator of run_schema's ADMITTED (a run document) or MANIFEST, in the document it is resolved in (the
    schema and the record values it refers to). jsonschema is the lab's (its `lab` extra): an appliance, whose web
    app imports this module, admits nothing."""
    try:
        import jsonschema
    except ImportError as exc:
        raise SsdbenchError(f"the lab needs jsonschema ({exc}); install it with pip install 'ssdbench[lab]'") from exc
    extended = jsonschema.validators.extend(
        jsonschema.Draft202012Validator, {"items": _items, "properties": _properties, "type": _type}
    )
    return extended({**getattr(run_schema, schema), "components": {"schemas": run_schema.VALUES}})


@functools.cache
def _loads():
    """The parser of the lab's run documents: orjson, the lab's too (its `lab` extra). It is as strict as
    bundle.finite_json (no NaN, no infinite number, no lone surrogate, no invalid UTF-8, 1,024 levels deep at
    most), and takes a 1.3 MB document in 3 ms where Python's json takes 20: most of an upload's time at 50 a
    second."""
    try:
        import orjson
    except ImportError as exc:
        raise SsdbenchError(f"the lab needs orjson ({exc}); install it with pip install 'ssdbench[lab]'") from exc
    return orjson.loads


# Why a value fails, by the keyword it fails (formatted with the keyword's value in the schema, never the document).
_WHY = {
    "type": "is not of type {}",
    "required": "lacks {}",
    "additionalProperties": "has a field the lab's API document does not state",
    "enum": "is none of {}",
    "minimum": "is under {}",
    "maximum": "is over {}",
    "maxLength": "is a text of over {} characters",
    "pattern": "is a text holding a NUL or a lone surrogate",
    "maxItems": "is a list of over {} items",
    "maxProperties": "has over {} fields",
    "propertyNames": f"has a field whose name is over {run_schema.KEY['maxLength']} characters, or holds a NUL or "
    "a lone surrogate",
}
_DEEPEST = run_schema.VALUES[f"Value{run_schema.DEPTH + 1}"]


class Refused(Exception):
    """A bundle the lab does not take: what was wrong, where."""


class Run(NamedTuple):
    """One run as the index writes it: the member prefix in the bundle, then each table's values."""

    prefix: str
    testbed: tuple  # host, cpu, kernel
    drive: tuple  # model, serial, firmware, capacity_bytes, transport
    run: dict
    figures: list  # headline.Figure
    card: dict  # results/card.py: what the lab's lists and compare read instead of the document


def documents(part):
    """The verified bundle's manifest (the part of it the lab keeps) and documents (bundle.read_documents' runs),
    each within its bounds (and, as _loads reads them, holding only finite numbers). Every member's
    size and compression ratio are held to zip_safety's before a byte is inflated, and zipfile inflates no member
    past the size it states. Raises Refused, or bundle.BundleError."""
    try:
        with bundle.open_zip(part) as zf:
            for name, limit in ((bundle.MANIFEST, MAX_MANIFEST_BYTES), (bundle.REPEAT, MAX_REPEAT_BYTES)):
                if name in zf.NameToInfo and zf.getinfo(name).file_size > limit:
                    raise Refused(f"{name} of {zf.getinfo(name).file_size} bytes: the lab takes {limit}")
            sizes = [i.file_size for i in zf.infolist() if i.filename.endswith(bundle.RESULT)]
            if len(sizes) > MAX_RUNS:
                raise Refused(f"{len(sizes)} run documents: a bundle holds one run, or a repeat set of {MAX_RUNS}")
            if max(sizes, default=0) > MAX_DOCUMENT_BYTES or sum(sizes) > MAX_DOCUMENTS_BYTES:
                raise Refused(
                    f"run documents of {max(sizes)} bytes ({sum(sizes)} in all): the lab takes "
                    f"{MAX_DOCUMENT_BYTES} a run, {MAX_DOCUMENTS_BYTES} a bundle"
                )
            # The documents, inflated once: as they are hashed, then parsed.
            kept = dict.fromkeys(n for n in zf.namelist() if n.endswith(bundle.RESULT) or n == bundle.REPEAT)
            manifest = bundle.verify_zip(zf, part, kept)
            _, runs = bundle.read_documents(zf, part, _loads(), kept)
    except RecursionError as exc:
        raise Refused("a document nests too deeply") from exc
    except (NotImplementedError, RuntimeError, *bundle.DAMAGED) as exc:
        # An encrypted member, a compression method zipfile cannot read, a stream that breaks.
        raise Refused(f"a member cannot be read ({exc})") from exc
    return manifest, runs


def kept_manifest(manifest, host):
    """What the lab keeps of a manifest: what it reads, its format and the bundle's kind and host."""
    kind = "repeat" if "repeat" in manifest else "run"
    return {"format_version": manifest.get("format_version"), kind: {"host": host}}


def index_rows(manifest, runs):
    """(the bundle's host, [Run]): every value the index writes, checked. Raises Refused."""
    _admitted(manifest, bundle.MANIFEST, "MANIFEST")
    kind = "repeat" if "repeat" in manifest else "run"
    host = (manifest.get(kind) or {}).get("host") or "unnamed"
    return host, [_run(host, doc, prefix) for _, doc, prefix in runs]


def _run(host, doc, prefix):
    where = prefix + bundle.RESULT
    _admitted(doc, where)
    env = doc["environment"] or {}
    d = doc["drive"]
    drive = (
        *(d.get(k) or "" for k in ("model", "serial", "firmware")),
        d.get("capacity_bytes"),
        d.get("transport") or "",
    )
    row = {
        "source_id": int(doc["id"]),  # JSON Schema's integer takes 7.0 too
        "path": d.get("path") or "",
        "suite": doc["suite"],
        "suite_hash": doc["suite_hash"],
        "standard": bool(doc["standard"]),
        "state": doc["state"],
        "error": doc["error"],
        "created_at": float(doc["created_at"]),
        "started_at": doc.get("started_at"),
        "finished_at": doc["finished_at"],
    }
    testbed = (
        host,
        (env.get("cpu") or {}).get("model") or "unknown",
        (env.get("kernel") or {}).get("release") or "unknown",
    )
    try:
        summarised = card.of(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        # What the compare page would have met reading the document, met now, while it can be refused.
        raise Refused(f"{where}: its figures and warnings cannot be read ({type(exc).__name__})") from exc
    return Run(prefix, testbed, drive, row, headline.figures(doc), summarised)


def _admitted(doc, where, schema="ADMITTED"):
    """Refuse a document that is not valid against `schema`: ADMITTED, the schema the lab's API document states of
    its runs, or MANIFEST; naming the first place it fails and how, never quoting what it holds there."""
    try:
        error = next(_validator(schema).iter_errors(doc), None)
    except RecursionError as exc:
        raise Refused(f"{where}: nests too deeply") from exc
    if error is None:
        return
    at = "/".join(_step_of_path(part) for part in error.absolute_path)
    if error.schema == _DEEPEST and isinstance(error.instance, (dict, list)):
        why = f"nests a record more than {run_schema.DEPTH} objects or lists deep"
    elif "propertyNames" in error.schema_path:  # the keyword a field's name failed is KEY's
        why = _WHY["propertyNames"]
    elif error.validator == "required":
        why = _WHY["required"].format(next(n for n in error.validator_value if n not in error.instance))
    else:
        why = _WHY.get(error.validator, "is not as the lab's API document states a run").format(error.validator_value)
    raise Refused(f"{where}: at /{at}: {why}"[:MAX_ERROR])


def _step_of_path(part):
    """A step of a path in a document: an index, or a field's name, shortened and escaped."""
    text = str(part)
    return ascii(text[:PATH_PART])[1:-1] + ("..." if len(text) > PATH_PART else "")
