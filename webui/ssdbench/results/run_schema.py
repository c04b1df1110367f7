"""The JSON schema of a run document: what the API's document states of a run (web/openapi), and what a lab
admits of an uploaded one (lab/admit), defined once for both.

RUN is a run as an appliance serves it. ADMITTED is the run document of a bundle as a lab takes it: RUN without
the appliance's queue (LOCAL_FIELDS), of a run that has ended, with a bound on every string, list, number
and free-form record, and the types of the few record fields the lab reads stated. A lab's GET /api/runs/ID
answers ADMITTED with where the run came from (openapi.LAB_RUN), so what the lab refuses is what its API document
says; its records' values are the components VALUES, which the document holding ADMITTED must hold too.
"""

from ..suites import locked
from . import store, zip_safety


def closed(properties, required=()):
    """An object with these fields and no others. A request's misspelt field is refused, not ignored; an answer
    holds no field that is not stated here, and the tests hold every answer to that (tests/contract.py), so a
    field the code adds is stated the day it is added. A record kept as it was found, whose fields this document
    does not promise (a drive's link, a run's environment), is stated as a free-form object instead: record."""
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def record(description, nullable=False):
    """A free-form object: any fields, as the code that made it found them."""
    return {"type": ["object", "null"] if nullable else "object", "description": description}


def nullable(schema):
    return {**schema, "type": [schema["type"], "null"]}


NULLABLE_STRING = {"type": ["string", "null"]}
NULLABLE_NUMBER = {"type": ["number", "null"]}
NULLABLE_INTEGER = {"type": ["integer", "null"]}
STRINGS = {"type": "array", "items": {"type": "string"}}
# A Unix time, from 1970 to the last second of the year 9999: what every page writes as a date (human.when).
LAST_TIME = 253402300799
UNIX_TIME = {"type": "number", "minimum": 0, "maximum": LAST_TIME, "description": "Unix time"}
NULLABLE_TIME = {**UNIX_TIME, "type": ["number", "null"]}
STATE = {"enum": list(store.STATES)}

# Fields of a run's or a repeat set's document that describe this machine's queue, not the result.
LOCAL_FIELDS = ("pid", "cancel_requested", "request", "step_index", "eta_s", "cur_iops", "cur_bw", "progress_at")
# A string a page shows (a model, a fio version, a warning, a step's error): far above any real one (the longest
# of a smoke run is 1151 characters, in its host cost), far below what made a page of tens of MB.
TEXT = 4096
# A text the lab's index keys on (a drive's model, serial and firmware; a testbed's host, CPU and kernel; a suite's
# hash): three in one index row, at up to 4 bytes a character, stay under the 2,704 bytes that PostgreSQL's B-tree
# takes of a row. A real one is under 64 characters.
KEYED = 200
# A step's fio job file, which the run page shows whole: a smoke run's longest is 2768 characters.
JOB_FILE = 64 << 10
# Neither a NUL nor a lone surrogate, which PostgreSQL stores in neither text nor jsonb.
STORABLE = r"^[^\x00\ud800-\udfff]*$"
# A field's name in a free-form record.
KEY = {"maxLength": 256, "pattern": STORABLE}
# Steps, metrics, series, warnings: a smoke run has 20 steps, 146 metrics in a step and 73 series.
ITEMS = 4096
# A series' points: a point a second for 12 days. The document's own size (admit) bounds them long before.
POINTS = 1 << 20
# A free-form record's fields, and how deep objects and lists nest in it, itself counted (a smoke run's: 4).
FIELDS = 256
DEPTH = 8
# What PostgreSQL's bigint holds; a number of a run a double holds with room for its sums.
BIGINT = 2**63 - 1
# PostgreSQL's integer, the column of a run's id on the appliance that made it.
INTEGER = 2**31 - 1
LARGEST = 1e300


# A run's own fields, of which its summary in the list, its document and its progress each give a part.
RUN_FIELDS = {
    "id": {"type": "integer"},
    "suite": {"type": "string"},
    "suite_hash": {"type": "string"},
    "standard": {"type": "integer", "description": "1: a locked suite, unchanged"},
    "state": STATE,
    "origin": {"type": "string", "description": "local, or the bundle it was imported from"},
    "created_at": UNIX_TIME,
    "started_at": NULLABLE_TIME,
    "finished_at": NULLABLE_TIME,
    "error": NULLABLE_STRING,
    "percent": {"type": "number"},
    "step_index": {**NULLABLE_INTEGER, "description": "the step it is at"},
    "step_count": {"type": "integer"},
    "eta_s": NULLABLE_NUMBER,
    "cur_iops": NULLABLE_NUMBER,
    "cur_bw": {**NULLABLE_NUMBER, "description": "bytes/s"},
    "progress_at": {**NULLABLE_NUMBER, "description": "Unix time of the last progress update"},
    "cancel_requested": {"type": "integer", "description": "1: a cancel was asked for"},
    "pid": {**NULLABLE_INTEGER, "description": "the process running it, while it runs"},
    "drive_id": {"type": "integer", "description": "the appliance's record of the drive"},
}


METRIC = closed(
    {
        "name": {"type": "string", "examples": ["read.iops", "write.lat_p99.99", "steady.avg_iops"]},
        "value": {"type": "number", "description": "full precision, never rounded"},
        "unit": {"type": "string"},
        "source": {"type": "string", "description": "the fio JSON pointer it was read from, or how it was derived"},
    },
    ["name", "value", "unit", "source"],
)
SERIES = closed(
    {
        "id": {"type": "integer"},
        "step_id": {**NULLABLE_INTEGER, "description": "null: run-level"},
        "name": {"type": "string", "examples": ["write.iops", "temperature", "write.mb_s", "read.clat_hist"]},
        "unit": {"type": "string"},
        "source": {"type": "string"},
        "x_unit": {
            "enum": ["ms", "ns", "bytes", "offset"],
            "description": "x is ms since the step's (or run's) start; a latency histogram's bin in ns (y: the IOs "
            "in it); a block size in bytes; or a zone's byte offset",
        },
        "x": {"type": "array", "items": {"type": "number"}},
        "y": {"type": "array", "items": {"type": "number"}},
    },
    ["id", "step_id", "name", "unit", "source", "x_unit", "x", "y"],
)
STEP = closed(
    {
        "idx": {"type": "integer"},
        "key": {"type": "string"},
        "kind": {"enum": list(locked.STEP_KINDS)},
        "title": {"type": "string"},
        "state": {"type": "string"},
        "estimate_s": NULLABLE_NUMBER,
    },
    ["idx", "key", "kind", "title", "state", "estimate_s"],
)
RUN = closed(
    {
        **RUN_FIELDS,
        "drive": record("the drive as it was found when the run was queued (the fields of GET /api/drives)"),
        "request": record(
            "what the tester asked for when queueing it from the web (device, confirmation, options); null: "
            "started at the console",
            nullable=True,
        ),
        "environment": record("the testbed, the tools and the OS controls the run had; null: not recorded", True),
        "warnings": STRINGS,
        "repeat": {
            **nullable(closed({"id": {"type": "integer"}, "position": {"type": "integer"}}, ["id", "position"])),
            "description": "the repeat set it belongs to and its place in it (1 is the first run); null: none",
        },
        "steps": {
            "type": "array",
            "items": closed(
                {
                    **STEP["properties"],
                    "id": {"type": "integer"},
                    "run_id": {"type": "integer"},
                    "started_at": NULLABLE_TIME,
                    "finished_at": NULLABLE_TIME,
                    "error": NULLABLE_STRING,
                    "job_file": NULLABLE_STRING,
                    "out_dir": {**NULLABLE_STRING, "description": "its folder of raw files, in the data folder"},
                    "detail": record(
                        "what the step did besides fio: its cool-down, purge, trace or background", nullable=True
                    ),
                    "spec": record("the step as its suite declares it; null: not a suite this image ships", True),
                    "metrics": {"type": "array", "items": METRIC},
                    "suspect": {
                        **STRINGS,
                        "description": "why the step's figures may not be the drive's (docs/methodology.md, "
                        "Validity guards); empty when nothing is wrong",
                    },
                },
                [*STEP["required"], "id", "run_id", "started_at", "finished_at", "error", "job_file", "out_dir"]
                + ["detail", "spec", "metrics", "suspect"],
            ),
        },
        "series": {"type": "array", "items": SERIES},
    },
    [*RUN_FIELDS, "drive", "request", "environment", "warnings", "repeat", "steps", "series"],
)


def _value_ref(level):
    return {"$ref": f"#/components/schemas/Value{level}"}


# A value at each level of a free-form record, nesting no deeper than DEPTH: one schema a level, not a recursive
# one, so that a document nested deeper is refused by the schema itself, and none is duplicated where it is used.
VALUES = {
    f"Value{level}": {
        "type": ["string", "number", "boolean", "null", *(["array", "object"] if level <= DEPTH else [])],
        "maxLength": TEXT,
        "pattern": STORABLE,
        "minimum": -LARGEST,
        "maximum": LARGEST,
        **(
            {
                "maxItems": ITEMS,
                "items": _value_ref(level + 1),
                "maxProperties": FIELDS,
                "propertyNames": KEY,
                "additionalProperties": _value_ref(level + 1),
            }
            if level <= DEPTH
            else {}
        ),
        "description": f"a value of a free-form record, within {level - 1} objects or lists",
    }
    for level in range(2, DEPTH + 2)
}


def _text(schema, limit=TEXT):
    return {**schema, "maxLength": limit, "pattern": STORABLE}


def _bounded(schema):
    """`schema` with a bound on each string, list, number and free-form record in it (at the top of a record)."""
    if "properties" not in schema and schema.get("type") in ("object", ["object", "null"]):
        return _bounded_record(schema, 1)
    types = schema.get("type", [])
    limits = {}
    if "string" in types:
        limits.update(maxLength=TEXT, pattern=STORABLE)
    if "array" in types:
        limits["maxItems"] = ITEMS
    if "integer" in types:
        limits.update(minimum=-BIGINT, maximum=BIGINT)
    elif "number" in types:
        limits.update(minimum=-LARGEST, maximum=LARGEST)
    # The bounds first: a list over its bound is refused before its items are weighed.
    out = {**limits, **schema}
    if "properties" in out:
        out["properties"] = {name: _bounded(each) for name, each in out["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = _bounded(out[key])
    return out


def _bounded_record(schema, level, properties=None):
    """A free-form record at `level`, its values the VALUES of the next, but for `properties`, stated."""
    return {
        **schema,
        **({"properties": properties} if properties else {}),
        "maxProperties": FIELDS,
        "propertyNames": KEY,
        "additionalProperties": _value_ref(level + 1),
    }


def _read(*names, level, limit=TEXT):
    """A record of the lab's document, or null, whose fields `names` a page or the index reads: each text of
    `limit` characters at most, or null."""
    return _bounded_record({"type": ["object", "null"]}, level, {name: _text(NULLABLE_STRING, limit) for name in names})


_RUN = {name: schema for name, schema in RUN["properties"].items() if name not in LOCAL_FIELDS}
_STEP = _RUN["steps"]["items"]
NUMBER = {"type": "number"}
_POINTS = {"type": "array", "maxItems": POINTS, "items": NUMBER}
ADMITTED = _bounded(closed(_RUN, [name for name in RUN["required"] if name not in LOCAL_FIELDS]))
ADMITTED["properties"].update(
    id={**ADMITTED["properties"]["id"], "minimum": 1, "maximum": INTEGER},
    suite_hash=_text(_RUN["suite_hash"], KEYED),
    state={"enum": list(store.ENDED), "description": "a lab takes a run that has ended"},
    drive=_bounded_record(
        _RUN["drive"],
        1,
        {
            **{name: _text(NULLABLE_STRING) for name in ("path", "transport")},
            **{name: _text(NULLABLE_STRING, KEYED) for name in ("model", "serial", "firmware")},
            "capacity_bytes": {**NULLABLE_INTEGER, "minimum": 0, "maximum": BIGINT},
        },
    ),
    environment=_bounded_record(
        _RUN["environment"],
        1,
        {
            "kernel": _read("release", level=2, limit=KEYED),
            "cpu": _read("model", level=2, limit=KEYED),
            "suite": _read("workload_sha256", level=2),
            "tools": _read("fio", level=2),
        },
    ),
    steps={
        **ADMITTED["properties"]["steps"],
        "items": {
            **ADMITTED["properties"]["steps"]["items"],
            "properties": {
                **ADMITTED["properties"]["steps"]["items"]["properties"],
                "job_file": _text(_STEP["properties"]["job_file"], JOB_FILE),
            },
        },
    },
    series={
        **ADMITTED["properties"]["series"],
        "items": {
            **ADMITTED["properties"]["series"]["items"],
            "properties": {**ADMITTED["properties"]["series"]["items"]["properties"], "x": _POINTS, "y": _POINTS},
        },
    },
)
# What the lab reads of a bundle's manifest.json (bundle.write's): the rest it neither reads nor keeps. The host
# is keyed on (a testbed's), and what the manifest describes is a run or a repeat set, a record.
_DESCRIBED = {**_read("host", level=2, limit=KEYED), "type": "object"}
MANIFEST = _bounded_record(
    {"type": "object", "required": ["format_version", "files"]},
    1,
    {
        "format_version": {"type": "integer", "minimum": 1, "maximum": INTEGER},
        "files": {
            "type": "object",
            "maxProperties": zip_safety.MAX_MEMBERS,
            "propertyNames": {"maxLength": zip_safety.MAX_NAME_BYTES, "pattern": STORABLE},
            "additionalProperties": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        },
        "run": _DESCRIBED,
        "repeat": _DESCRIBED,
    },
)
