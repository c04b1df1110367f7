"""The OpenAPI 3.1 description of the JSON API: the one source of its rules.

web/validate.py checks every /api/ request against this document (path, query, body), so the server
refuses exactly what the document forbids. A lab serves LAB_DOCUMENT instead: the reading part of the same
operations, and the appliances' upload; its runs (the components Run and RunSummary) also say where each came
from. Each operation's error answers follow from what it takes: a body or a query can be refused (400), a run
id can name no run (404), a session is needed (401), a state change needs the CSRF token (403), a body can be
too large (413).

An answer holds exactly the fields stated for it (run_schema.closed), but for a free-form record (record). A run's
schemas are results/run_schema's, which a lab admits its uploads by (ADMITTED). The server
does not check its answers; the tests do, every one they receive (tests/contract.py).
"""

from .. import __version__
from ..lab.receive import MAX_BUNDLE_BYTES
from ..results import headline
from ..results.run_schema import (
    ADMITTED,
    NULLABLE_INTEGER,
    NULLABLE_NUMBER,
    NULLABLE_STRING,
    RUN,
    RUN_FIELDS,
    STATE,
    STEP,
    STRINGS,
    UNIX_TIME,
    VALUES,
    closed,
    nullable,
    record,
)
from ..run.repeat import MAX_TIMES
from ..suites import locked, user_traces
from .data import HISTORY_PAGE, MAX_COMPARE, MAX_ID, MAX_RUNS_PAGE, TRACE_UPLOAD_BYTES

# SQLite's largest row id: a larger one names no run.
RUN_ID_SCHEMA = {"type": "integer", "minimum": 1, "maximum": MAX_ID}


def _json(description, schema):
    return {"description": description, "content": {"application/json": {"schema": schema}}}


ERROR = closed({"error": {"type": "string", "description": "what went wrong, in a sentence"}}, ["error"])
NO_RUN = _json("no such run", ERROR)


def _listing(name, item):
    """A list of things found, with the problems met finding them (a device that could not be read)."""
    return closed({name: {"type": "array", "items": item}, "problems": STRINGS}, [name, "problems"])


def _ref(name):
    """One of the components' schemas, which a lab's document states its own way (its runs say where they came
    from)."""
    return {"$ref": f"#/components/schemas/{name}"}


THRESHOLDS = closed(
    {"cov_percent": {"type": "number"}, "qd1_latency_cov_percent": {"type": "number"}},
    ["cov_percent", "qd1_latency_cov_percent"],
)
SESSION = closed(
    {"authenticated": {"type": "boolean"}, "csrf_token": {"type": "string"}}, ["authenticated", "csrf_token"]
)
# A drive as drives/discovery finds it. A run and a repeat set keep this as a record of their drive.
DRIVE = closed(
    {
        "path": {"type": "string", "examples": ["/dev/nvme0n1"]},
        "name": {"type": "string", "description": "the kernel's name of the device"},
        "transport": {"type": "string", "examples": ["nvme", "sata", "sas", "usb", "loop"]},
        "model": NULLABLE_STRING,
        "serial": NULLABLE_STRING,
        "firmware": NULLABLE_STRING,
        "identity_source": {
            **NULLABLE_STRING,
            "description": "where model, serial and firmware come from, e.g. ATA IDENTIFY (smartctl), or the USB "
            "bridge only (SCSI INQUIRY) when the bridge passes no ATA command",
        },
        "capacity_bytes": {"type": "integer"},
        "logical_block_size": {"type": "integer"},
        "physical_block_size": {"type": "integer"},
        "rotational": {"type": "boolean"},
        "link": record(
            "the link it sits on (PCIe speed and width and their maxima, or SATA speed, the drive's maximum and its "
            "port's), as found",
            nullable=True,
        ),
        "host_controller": record(
            "the PCI function it is reached through (address, vendor:device id, class, driver, mode, interrupts, "
            "NUMA node, IOMMU domain type); null: none (a loop device)",
            nullable=True,
        ),
        "hba": record(
            "the SAS HBA it sits behind (driver, PCI address, SCSI address host:channel:target:LUN, lsblk's transport, "
            "the SCSI/ATA translation a SATA drive is reached through); null: none",
            nullable=True,
        ),
        "pcie_path": {
            "type": "array",
            "items": {"type": "object"},
            "description": "every PCIe link from its nearest PCI function up to the root port, nearest first: "
            "address, current and most speed and width, ASPM states; empty: none (a loop device)",
        },
        "volatile_write_cache": {"type": "boolean", "description": "NVMe: the controller has a volatile write cache"},
        "trim_supported": {"type": "boolean"},
        "erase": record("the erase methods it supports (NVMe Format and Sanitize, ATA security), as found"),
        "temperature_source": {
            **NULLABLE_STRING,
            "description": "where its temperature is read: hwmon, the NVMe SMART log or smartctl (a SAS drive's "
            "Temperature log page)",
        },
        "controller": {"type": "string", "description": "an NVMe namespace's controller device"},
        "apst_supported": {"type": "boolean", "description": "NVMe: autonomous power state transitions"},
        "warning_temp_c": {**NULLABLE_INTEGER, "description": "NVMe: the drive's warning composite temperature"},
        "partitions": STRINGS,
        "mounts": STRINGS,
        "signatures": {**STRINGS, "description": "the file system or partition table signatures wipefs found"},
        "confirm_id": {"type": "string", "description": "what Start's confirm must be: the serial, or the name"},
        "development_target": {"type": "boolean", "description": "a loop device: its results compare with no drive's"},
        "notes": STRINGS,
        "eligible": {"type": "boolean"},
        "needs_wipe_confirmation": {"type": "boolean", "description": "it holds data: Start needs destroy_data"},
        "reason": {**NULLABLE_STRING, "description": "why the drive can or cannot be tested"},
        "temperature_c": NULLABLE_NUMBER,
        "estimates": {
            "type": "object",
            "additionalProperties": NULLABLE_NUMBER,
            "description": "each suite's estimated seconds on this drive; null: the drive is too small for it",
        },
    },
    ["path", "name", "transport", "model", "serial", "firmware", "identity_source", "capacity_bytes"]
    + ["logical_block_size", "physical_block_size", "rotational", "link", "host_controller", "pcie_path"]
    + ["trim_supported", "erase"]
    + ["temperature_source", "partitions", "mounts", "signatures", "confirm_id", "development_target", "notes"]
    + ["eligible", "needs_wipe_confirmation", "reason", "temperature_c", "estimates"],
)
SUITE = closed(
    {
        "name": {"type": "string"},
        "version": {"type": "integer"},
        "title": {"type": "string"},
        "sha256": {"type": "string", "description": "the workload hash: runs with one hash are comparable"},
        "locked": {"type": "boolean"},
        "comparable": {"type": "boolean"},
        "steps": {"type": "integer"},
        "repeat": {
            **THRESHOLDS,
            "description": "a repeat set of this suite flags a headline figure whose CoV (percent) is above these",
        },
    },
    ["name", "version", "title", "sha256", "locked", "comparable", "steps", "repeat"],
)


def _run_fields(*names):
    return {name: RUN_FIELDS[name] for name in names}


RUN_SUMMARY = closed(
    {
        **_run_fields("id", "suite", "suite_hash", "standard", "state", "origin", "created_at", "finished_at"),
        **_run_fields("percent", "error"),
        "path": NULLABLE_STRING,
        "model": NULLABLE_STRING,
        "serial": NULLABLE_STRING,
        "repeat_id": {**NULLABLE_INTEGER, "description": "the repeat set it belongs to, if any"},
    },
    ["id", "suite", "suite_hash", "standard", "state", "origin", "created_at", "finished_at", "percent", "error"]
    + ["path", "model", "serial", "repeat_id"],
)
# A run's testbed in a compare (results/testbed.py), beside the runs in their order.
TESTBED = closed(
    {
        "run": {"type": "integer"},
        "cpu": {"type": "string"},
        "controller": {"type": "string", "description": "the PCI function the drive is reached through"},
        "kernel": {"type": "string"},
        "link": {"type": "string"},
        "path": {"type": "string", "description": "the PCIe links from the drive up to its root port"},
        "host": {
            "type": "string",
            "description": "what this PC cost each IO, on fio's null engine and through the kernel before the "
            "run, and the null engine's again at its end",
        },
        "purge": {"type": "string", "description": "the methods its purges used"},
        "fio": {"type": "string"},
        "classes": record(
            "its class in each part of the rule that decides whether two testbeds compare (docs/methodology.md, "
            "The summary, compare and the bench): link, path, controller, cache, link_power, iommu, cpu_clock, "
            "purge, fio, heat, flagged (the causes of its flags, or none)"
        ),
        "apart": {
            **STRINGS,
            "description": "why compare sets it apart from the first run (another workload, or a part of its "
            "testbed); empty: ranked with it",
        },
        "unverified": {
            **STRINGS,
            "description": "the parts of its testbed that neither it nor the first run knows: compared, not verified",
        },
    },
    ["run", "cpu", "kernel", "controller", "link", "path", "host", "purge", "fio", "classes", "apart", "unverified"],
)
# A lab's runs are its appliances' (lab/index): the same, and where each came from.
LAB_RUN_SUMMARY = closed(
    {
        **RUN_SUMMARY["properties"],
        "firmware": {"type": "string"},
        "source_id": {"type": "integer", "description": "the run's id on its appliance"},
        "host": {"type": "string", "description": "the appliance's host name"},
        "appliance": {"type": "string", "description": "the appliance that sent it, by its token's name"},
        "bundle_sha256": {"type": "string", "description": "the bundle it came in"},
        "member": {"type": "string", "description": "its folder in that bundle: empty, or run-N/ in a repeat set's"},
        "received_at": {
            "type": "number",
            "description": "when the lab received its bundle (UNIX seconds, the lab's clock; created_at is the "
            "appliance's)",
        },
    },
    [*RUN_SUMMARY["required"], "firmware", "source_id", "host", "appliance", "bundle_sha256", "member", "received_at"],
)
# A lab's run document is the one its bundle holds, as the lab admitted it (run_schema.ADMITTED: the appliance's
# queue left out, every string, list and record bounded), and where it came from.
LAB_RUN = closed(
    {
        **ADMITTED["properties"],
        "appliance": LAB_RUN_SUMMARY["properties"]["appliance"],
        "bundle_sha256": LAB_RUN_SUMMARY["properties"]["bundle_sha256"],
        "received_at": LAB_RUN_SUMMARY["properties"]["received_at"],
    },
    [*ADMITTED["required"], "appliance", "bundle_sha256", "received_at"],
)
REPEAT_FIELDS = {
    **_run_fields("id", "suite", "suite_hash", "standard", "state", "origin", "created_at", "started_at"),
    **_run_fields("finished_at", "error", "cancel_requested", "pid"),
    "times": {"type": "integer", "description": "how many runs the set was asked for"},
}
REPEAT_SUMMARY = closed(
    {
        **{k: v for k, v in REPEAT_FIELDS.items() if k not in ("started_at", "cancel_requested", "pid")},
        "runs": {"type": "integer", "description": "how many runs it has"},
        "path": NULLABLE_STRING,
        "model": NULLABLE_STRING,
        "serial": NULLABLE_STRING,
    },
    ["id", "suite", "suite_hash", "standard", "times", "runs", "state", "origin", "created_at", "finished_at"]
    + ["error", "path", "model", "serial"],
)
FIGURE = closed(
    {
        "key": {"type": "string", "examples": ["rand-read-4k/read.iops"], "description": "step/metric"},
        "step": {"type": "string"},
        "name": {"type": "string", "description": "the metric's name in each run's step"},
        "unit": {"type": "string"},
        "kind": {"enum": [headline.THROUGHPUT, headline.LATENCY, headline.QD1_LATENCY, headline.DERIVED]},
        "runs": {"type": "array", "items": {"type": "integer"}, "description": "the runs it was taken from"},
        "values": {"type": "array", "items": {"type": "number"}, "description": "its value in each, full precision"},
        "n": {"type": "integer"},
        "mean": {"type": "number"},
        "stdev": {**NULLABLE_NUMBER, "description": "sample standard deviation (n - 1); null with one value"},
        "cov_percent": {**NULLABLE_NUMBER, "description": "stdev / |mean| x 100; null with one value or a mean of 0"},
        "min": {"type": "number"},
        "max": {"type": "number"},
        "threshold_percent": {"type": "number", "description": "the CoV above which it is flagged"},
        "flagged": {"type": "boolean"},
    },
    ["key", "step", "name", "unit", "kind", "runs", "values", "n", "mean", "stdev", "cov_percent", "min", "max"]
    + ["threshold_percent", "flagged"],
)
REPEAT = closed(
    {
        **REPEAT_FIELDS,
        "thresholds": THRESHOLDS,
        "drive": record("the drive as it was found when the set was queued (the fields of GET /api/drives)"),
        "request": RUN["properties"]["request"],
        "runs": {
            "type": "array",
            "items": closed(
                {"id": {"type": "integer"}, "position": {"type": "integer"}, "state": STATE},
                ["id", "position", "state"],
            ),
        },
        "counted": {
            "type": "array",
            "items": {"type": "integer"},
            "description": "the runs that ended done: the summary takes their figures",
        },
        "figures": {"type": "array", "items": FIGURE, "description": "each headline figure across the runs"},
        "flagged": {"type": "integer", "description": "how many figures are above their threshold"},
    },
    [*REPEAT_FIELDS, "thresholds", "drive", "request", "runs", "counted", "figures", "flagged"],
)
PROGRESS = closed(
    {
        **_run_fields("id", "state", "step_index", "step_count", "percent", "eta_s", "cur_iops", "cur_bw"),
        **_run_fields("progress_at", "started_at", "finished_at", "cancel_requested", "error"),
        "temperature": nullable(
            closed(
                {"t_ms": {"type": "integer"}, "value": {"type": "number", "description": "°C"}},
                ["t_ms", "value"],
            )
        ),
        "steps": {"type": "array", "items": STEP},
    },
    ["id", "state", "step_index", "step_count", "percent", "eta_s", "cur_iops", "cur_bw", "progress_at"]
    + ["started_at", "finished_at", "cancel_requested", "error", "temperature", "steps"],
)
SECONDS = {"type": "array", "items": {"type": "number"}, "description": "seconds since the run started"}
LIVE_HISTORY = closed(
    {
        "t_s": SECONDS,
        "iops": {"type": "array", "items": NULLABLE_NUMBER, "description": "fio's IOPS at each of t_s"},
        "bw": {"type": "array", "items": NULLABLE_NUMBER, "description": "fio's bytes/s at each of t_s"},
        "temperature": closed(
            {"t_s": SECONDS, "value": {"type": "array", "items": {"type": "number"}, "description": "°C"}},
            ["t_s", "value"],
        ),
    },
    ["t_s", "iops", "bw", "temperature"],
)
TRACE_NAME = {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$", "maxLength": 64, "examples": ["my-workstation"]}
TRACE = closed(
    {
        "name": TRACE_NAME,
        "label": {"type": "string"},
        "format": {"type": "string", "examples": ["blkparse", "fio iolog v3", "MSR-Cambridge CSV"]},
        "source": {"type": "string", "description": "the file it was imported from"},
        "qd": {"type": "string", "description": "how each IO's queue depth was found"},
        "sha256": {"type": "string", "description": "of the imported trace file: a run that plays it names it"},
        "imported_at": UNIX_TIME,
        "stats": record("reads, writes, bytes, size mix, sequential share and runs, queue depths, footprint"),
        "segments": {
            "type": "array",
            "items": {"type": "array", "items": {"type": "integer"}},
            "description": "[queue depth, IO count] of each segment, in playing order",
        },
    },
    ["name", "label", "format", "source", "qd", "sha256", "imported_at", "stats", "segments"],
)
STICK = closed(
    {
        "device": {"type": "string", "description": "the file system's device"},
        "disk": {"type": "string", "description": "the kernel's name of the disk it is on"},
        "fstype": {"type": "string"},
        "label": NULLABLE_STRING,
        "size": {**NULLABLE_INTEGER, "description": "bytes"},
        "model": NULLABLE_STRING,
        "serial": NULLABLE_STRING,
        "mountpoint": NULLABLE_STRING,
        "boot": {"type": "boolean", "description": "the appliance's own stick"},
    },
    ["device", "disk", "fstype", "label", "size", "model", "serial", "mountpoint", "boot"],
)
EXPORTED = closed(
    {
        "device": {"type": "string"},
        "unmounted": {"type": "boolean", "description": "true: the stick's file system was unmounted after the export"},
        "pull": {"type": "string", "description": "whether the stick can be pulled out now, in words"},
        "exported": {
            "type": "array",
            "items": closed(
                {
                    "run": {"type": "integer"},
                    "file": {"type": "string"},
                    "bytes": {"type": "integer"},
                    "state": {"enum": ["written and verified", "already on the stick"]},
                },
                ["run", "file", "bytes", "state"],
            ),
        },
    },
    ["device", "unmounted", "pull", "exported"],
)

# What a request sends: web/validate.py holds the server to exactly these.
LOGIN_REQUEST = closed({"pin": {"type": "string", "description": "the PIN on the appliance's console"}}, ["pin"])
START_REQUEST = closed(
    {
        "drive": {"type": "string", "minLength": 1, "examples": ["/dev/nvme0n1"]},
        "suite": {"enum": locked.names(), "examples": ["standard"]},
        "confirm": {
            "type": "string",
            "minLength": 1,
            "description": "the drive's confirm_id: its serial, or its kernel name when it has none",
        },
        "destroy_data": {"type": "boolean", "description": "needed when the drive holds partitions or file systems"},
    },
    ["drive", "suite", "confirm"],
)
REPEAT_REQUEST = closed(
    {
        **START_REQUEST["properties"],
        "times": {"type": "integer", "minimum": 2, "maximum": MAX_TIMES, "description": "how many runs"},
    },
    [*START_REQUEST["required"], "times"],
)
RESUME_REQUEST = closed({k: START_REQUEST["properties"][k] for k in ("confirm", "destroy_data")}, ["confirm"])
TRACE_START_REQUEST = closed(
    {k: START_REQUEST["properties"][k] for k in ("drive", "confirm", "destroy_data")}, ["drive", "confirm"]
)
IMPORT_REQUEST = closed(
    {
        "format": {
            "enum": sorted(user_traces.FORMATS),
            "description": "blktrace: blkparse's text output; fio-iolog: a fio iolog v2 or v3; csv: an MSR-Cambridge "
            "CSV",
        },
        "text": {"type": "string", "minLength": 1, "description": "the trace file's content"},
        "name": {**TRACE_NAME, "description": "what to call it (default: uploaded-trace)"},
        "qd": {
            "type": "integer",
            "minimum": 1,
            "maximum": 32,
            "description": "the queue depth to play a fio iolog at (it records none); default 1",
        },
    },
    ["format", "text"],
)
EXPORT_REQUEST = closed(
    {
        "runs": {
            "type": "array",
            "items": RUN_ID_SCHEMA,
            "uniqueItems": True,
            "description": "default: every run that has ended",
        },
        "device": {"type": "string", "minLength": 1, "description": "the stick's file system (default: the one found)"},
    }
)
RUN_ID = {"name": "run_id", "in": "path", "required": True, "schema": {**RUN_ID_SCHEMA, "examples": [1]}}
REPEAT_ID = {"name": "repeat_id", "in": "path", "required": True, "schema": {**RUN_ID_SCHEMA, "examples": [1]}}
NO_REPEAT = _json("no such repeat set", ERROR)
COMPARE_RUNS = {
    "name": "run",
    "in": "query",
    "required": True,
    "style": "form",
    "explode": True,
    "description": "run=1&run=2",
    "schema": {
        "type": "array",
        "items": RUN_ID_SCHEMA,
        "minItems": 2,
        "maxItems": MAX_COMPARE,
        "uniqueItems": True,
    },
}

SESSION_ONLY = [{"session": []}]
STATE_CHANGE = [{"session": [], "csrf": []}]


RUNS_PAGE = [
    {
        "name": "before",
        "in": "query",
        "description": "only runs with a smaller id (the next page: the answer's next); none: from the newest",
        "schema": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
    },
    {
        "name": "limit",
        "in": "query",
        "description": f"at most this many runs (default {HISTORY_PAGE})",
        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_RUNS_PAGE},
    },
]


def _operation(summary, answers, *, security=SESSION_ONLY, body=None, query=(), largest="64 KiB"):
    """An operation: its own answers, then the errors that follow from what it takes (a body up to
    `largest`)."""
    responses = dict(answers)
    if body is not None or query:
        responses["400"] = _json("the request breaks this document: the error says how", ERROR)
    if {"session": []} in security or {"session": [], "csrf": []} in security:
        responses["401"] = _json("not logged in", ERROR)
    if any("csrf" in s for s in security):
        responses["403"] = _json("missing or wrong X-CSRF-Token", ERROR)
    if body is not None:
        responses["413"] = _json(f"the body is over {largest}", ERROR)
    op = {"summary": summary, "security": security, "responses": dict(sorted(responses.items()))}
    if body is not None:
        # A body with required fields must be sent; one without (export) may be left out.
        op["requestBody"] = {"required": bool(body["required"]), "content": {"application/json": {"schema": body}}}
    if query:
        op["parameters"] = list(query)
    return op


def _run_path(**operations):
    """A path under /api/runs/{run_id}: each of its operations may find no such run."""
    return _id_path(RUN_ID, NO_RUN, operations)


def _repeat_path(**operations):
    """A path under /api/repeats/{repeat_id}: each of its operations may find no such repeat set."""
    return _id_path(REPEAT_ID, NO_REPEAT, operations)


def _id_path(parameter, missing, operations):
    for op in operations.values():
        op["responses"] = dict(sorted({**op["responses"], "404": missing}.items()))
    return {"parameters": [parameter], **operations}


DOCUMENT = {
    "openapi": "3.1.0",
    "info": {
        "title": "ssdbench",
        "version": __version__,
        "description": "Every request needs a session: GET /api/session for a CSRF token, then POST /api/login with "
        "the PIN from the appliance's console and that token in X-CSRF-Token. Every POST and DELETE "
        'carries X-CSRF-Token. Every answer is JSON, errors too ({"error": "..."}), except a bundle.',
    },
    "components": {
        "securitySchemes": {
            "session": {"type": "apiKey", "in": "cookie", "name": "session"},
            "csrf": {"type": "apiKey", "in": "header", "name": "X-CSRF-Token"},
        },
        "schemas": {"Run": RUN, "RunSummary": RUN_SUMMARY},
    },
    "security": SESSION_ONLY,
    "paths": {
        "/api/session": {
            "get": _operation(
                "Whether this session is logged in, and its CSRF token",
                {"200": _json("the session", SESSION)},
                security=[],
            )
        },
        "/api/login": {
            "post": _operation(
                "Log in with the PIN",
                {
                    "200": _json("logged in; the new session's CSRF token", SESSION),
                    "401": _json("wrong PIN", ERROR),
                    "429": _json("too many wrong PINs from this address in the last minute", ERROR),
                },
                security=[{"csrf": []}],
                body=LOGIN_REQUEST,
            )
        },
        "/api/logout": {
            "post": _operation(
                "End every session",
                {"200": _json("logged out", closed({"authenticated": {"const": False}}, ["authenticated"]))},
                security=STATE_CHANGE,
            )
        },
        "/api/drives": {
            "get": _operation(
                "Every drive: identity, link, temperature, eligibility with its reason, and each suite's estimated "
                "seconds on it",
                {
                    "200": _json(
                        "drives, and devices that could not be described",
                        _listing("drives", DRIVE),
                    )
                },
            )
        },
        "/api/suites": {
            "get": _operation(
                "The locked suites and their hashes",
                {
                    "200": _json(
                        "the suites that can run, and why a shipped suite cannot (its file no longer matches its lock)",
                        _listing("suites", SUITE),
                    )
                },
            )
        },
        "/api/runs": {
            "get": _operation(
                "The runs with their state, newest first, a page at a time: ?before=next goes on",
                {
                    "200": _json(
                        "a page of runs",
                        closed(
                            {
                                "runs": {"type": "array", "items": _ref("RunSummary")},
                                "next": {
                                    **NULLABLE_INTEGER,
                                    "description": "the before= of the next (older) page; null: this is the last",
                                },
                            },
                            ["runs", "next"],
                        ),
                    )
                },
                query=RUNS_PAGE,
            ),
            "post": _operation(
                "Queue a suite on a drive (destroys its data); the runner service executes it",
                {
                    "201": _json(
                        "queued",
                        closed({"id": {"type": "integer"}, "url": {"type": "string"}}, ["id", "url"]),
                    ),
                    "404": _json("not a drive that GET /api/drives lists", ERROR),
                    "409": _json(
                        "refused: another run is queued or running, the drive is not eligible, the confirmation is "
                        "not its confirm_id, it holds data and destroy_data is not true, the suite's file no "
                        "longer matches its lock, or the data partition has less room than the run's results need "
                        "(the error names both)",
                        ERROR,
                    ),
                },
                security=STATE_CHANGE,
                body=START_REQUEST,
            ),
        },
        "/api/runs/{run_id}": _run_path(
            get=_operation(
                "A run as one document: steps, metrics, environment, all series", {"200": _json("the run", _ref("Run"))}
            ),
            delete=_operation(
                "Delete a finished run and its folder",
                {
                    "204": {"description": "deleted"},
                    "409": _json("the run is queued or running, or its bundle is being written", ERROR),
                },
                security=STATE_CHANGE,
            ),
        ),
        "/api/runs/{run_id}/bundle": _run_path(
            get=_operation(
                "The run's result bundle: a .zip with manifest.json, result.json, CSVs, fio's raw files, the job "
                "files with rerun.sh, and an offline report.html",
                {
                    "200": {"description": "the bundle", "content": {"application/zip": {}}},
                    "409": _json("the run has not ended", ERROR),
                },
            )
        ),
        "/api/runs/{run_id}/progress": _run_path(
            get=_operation(
                "Live progress: step, percent, ETA, current IOPS and bytes/s, temperature",
                {"200": _json("progress", PROGRESS)},
            )
        ),
        "/api/runs/{run_id}/live": _run_path(
            get=_operation(
                "The live view's history: the runner's progress samples since the run started, and the drive's "
                "temperature (none is a result: the run's document holds those)",
                {"200": _json("the samples", LIVE_HISTORY)},
            )
        ),
        "/api/runs/{run_id}/cancel": _run_path(
            post=_operation(
                "Ask the runner to stop the run cleanly",
                {
                    "202": _json(
                        "cancel requested",
                        closed({"id": {"type": "integer"}, "cancel_requested": {"const": True}}, ["id"]),
                    ),
                    "409": _json("the run is not queued or running", ERROR),
                },
                security=STATE_CHANGE,
            )
        ),
        "/api/runs/{run_id}/resume": _run_path(
            post=_operation(
                "Queue a run cut off by a crash or power loss to resume on its drive (destroys its data): from the "
                "last purge at or before the step that was cut",
                {
                    "202": _json(
                        "queued to resume",
                        closed(
                            {
                                "id": {"type": "integer"},
                                "url": {"type": "string"},
                                "from_step": {"type": "string", "description": "the step it starts again from"},
                            },
                            ["id", "url", "from_step"],
                        ),
                    ),
                    "404": _json("the drive the run ran on is not connected", ERROR),
                    "409": _json(
                        "refused: the run was not cut off (or is a lab's), another run is queued or running, the "
                        "confirmation is not the drive's confirm_id, the drive is no longer eligible, or its suite or "
                        "plan changed since",
                        ERROR,
                    ),
                },
                security=STATE_CHANGE,
                body=RESUME_REQUEST,
            )
        ),
        "/api/repeats": {
            "get": _operation(
                "Every repeat set with its state",
                {
                    "200": _json(
                        "repeat sets", closed({"repeats": {"type": "array", "items": REPEAT_SUMMARY}}, ["repeats"])
                    )
                },
            ),
            "post": _operation(
                "Queue a repeat set: the suite `times` times on a drive (destroys its data), each run whole, one "
                "after another; the runner service executes them",
                {
                    "201": _json(
                        "queued, with its first run",
                        closed({"id": {"type": "integer"}, "url": {"type": "string"}}, ["id", "url"]),
                    ),
                    "404": _json("not a drive that GET /api/drives lists", ERROR),
                    "409": _json(
                        "refused: another run or repeat set is queued or running, the drive is not eligible, the "
                        "confirmation is not its confirm_id, it holds data and destroy_data is not true, or the "
                        "suite's file no longer matches its lock",
                        ERROR,
                    ),
                },
                security=STATE_CHANGE,
                body=REPEAT_REQUEST,
            ),
        },
        "/api/repeats/{repeat_id}": _repeat_path(
            get=_operation(
                "A repeat set with its runs and its summary: each headline figure's values, mean, standard "
                "deviation, CoV, minimum and maximum, flagged when its CoV is above the suite's threshold",
                {"200": _json("the repeat set", REPEAT)},
            )
        ),
        "/api/repeats/{repeat_id}/cancel": _repeat_path(
            post=_operation(
                "Stop a repeat set: no further run starts, and its run in progress stops cleanly",
                {
                    "202": _json(
                        "cancel requested",
                        closed({"id": {"type": "integer"}, "cancel_requested": {"const": True}}, ["id"]),
                    ),
                    "409": _json("the repeat set is not queued or running", ERROR),
                },
                security=STATE_CHANGE,
            )
        ),
        "/api/repeats/{repeat_id}/bundle": _repeat_path(
            get=_operation(
                "The repeat set's bundle: a .zip with every run (as a run's bundle holds it, under run-N/), "
                "repeat.json and summary.csv, and one manifest.json over them all",
                {
                    "200": {"description": "the bundle", "content": {"application/zip": {}}},
                    "409": _json("the repeat set has not ended", ERROR),
                },
            )
        ),
        "/api/traces": {
            "get": _operation(
                "The traces imported to play (a tester's own, never a standard trace), with their figures",
                {"200": _json("the traces, and records that could not be read", _listing("traces", TRACE))},
            ),
            "post": _operation(
                "Import a trace file: blkparse text, a fio iolog or an MSR-Cambridge CSV, at most "
                f"{TRACE_UPLOAD_BYTES // 2**20} MiB (import larger ones with `ssdbench trace import` at the console)",
                {
                    "201": _json("imported", TRACE),
                    "409": _json("a trace of that name is already imported", ERROR),
                    "422": _json("the file is not a trace of that format: the error names the line at fault", ERROR),
                },
                security=STATE_CHANGE,
                body=IMPORT_REQUEST,
                largest=f"{TRACE_UPLOAD_BYTES // 2**20} MiB",
            ),
        },
        "/api/traces/{name}/runs": {
            "parameters": [{"name": "name", "in": "path", "required": True, "schema": TRACE_NAME}],
            "post": _operation(
                "Queue the (non-standard) suite that plays an imported trace on a drive, after the standard suite's "
                "purge and fill (destroys the drive's data)",
                {
                    "201": _json(
                        "queued",
                        closed({"id": {"type": "integer"}, "url": {"type": "string"}}, ["id", "url"]),
                    ),
                    "404": _json("no such trace, or not a drive that GET /api/drives lists", ERROR),
                    "409": _json(
                        "refused: another run is queued or running, the drive is not eligible, the confirmation is "
                        "not its confirm_id, or it holds data and destroy_data is not true",
                        ERROR,
                    ),
                },
                security=STATE_CHANGE,
                body=TRACE_START_REQUEST,
            ),
        },
        "/api/sticks": {
            "get": _operation(
                "USB sticks with a FAT32 or exFAT file system, where bundles can be exported",
                {
                    "200": _json(
                        "the sticks, and why they could not be listed",
                        _listing("sticks", STICK),
                    )
                },
            )
        },
        "/api/export": {
            "post": _operation(
                "Write bundles to a USB stick (in ssdbench-results/), read them back, verify, unmount",
                {
                    "200": _json("what was written or already there", EXPORTED),
                    "404": _json("no such run, or not a stick that GET /api/sticks lists", ERROR),
                    "409": _json("no stick, several sticks, a full stick, or a failed read-back", ERROR),
                },
                security=STATE_CHANGE,
                body=EXPORT_REQUEST,
            )
        },
        "/api/compare": {
            "get": _operation(
                f"2 to {MAX_COMPARE} runs side by side",
                {
                    "200": _json(
                        "the runs, whether they are comparable (one suite hash, workload hash and fio version), "
                        "and each run's testbed",
                        closed(
                            {
                                "comparable": {"type": "boolean"},
                                "warning": NULLABLE_STRING,
                                "runs": {"type": "array", "items": _ref("Run")},
                                "testbeds": {"type": "array", "items": TESTBED},
                            },
                            ["comparable", "warning", "runs", "testbeds"],
                        ),
                    ),
                    "404": NO_RUN,
                },
                query=[COMPARE_RUNS],
            )
        },
        "/api/openapi.json": {
            "get": _operation("This document", {"200": _json("OpenAPI 3.1", {"type": "object"})}, security=[])
        },
    },
}


# What a lab serves of the API (web.LAB_ENDPOINTS): reading runs, their bundles and comparisons.
LAB_OPERATIONS = {
    "/api/session": ("get",),
    "/api/runs": ("get",),
    "/api/runs/{run_id}": ("get",),
    "/api/runs/{run_id}/bundle": ("get",),
    "/api/compare": ("get",),
    "/api/openapi.json": ("get",),
}


def _uploaded(description, stored):
    return _json(
        description,
        closed(
            {
                "sha256": {"type": "string"},
                "stored": {"const": stored},
                "runs": {"type": "array", "items": {"type": "integer"}, "description": "the lab's ids of its runs"},
            },
            ["sha256", "stored", "runs"],
        ),
    )


UPLOAD = {
    "summary": "An appliance uploads a result bundle (ssdbench upload, or its runner service): kept once, as it came",
    "security": [{"token": []}],
    "requestBody": {
        "required": True,
        "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
    },
    "responses": {
        "200": _uploaded("the lab had the bundle already", stored=False),
        "201": _uploaded("kept; the lab's ids of its runs", stored=True),
        "400": _json("the body ended before its Content-Length, or came too slowly: nothing is kept", ERROR),
        "401": _json("no valid token (Authorization: Bearer TOKEN, from ssdbench lab token add NAME)", ERROR),
        "411": _json("the body has no Content-Length", ERROR),
        "413": _json(f"the bundle is over {MAX_BUNDLE_BYTES >> 30} GiB", ERROR),
        "422": _json("not a bundle that verifies: nothing of it is kept", ERROR),
        "429": _json(
            "the token has as many uploads in flight as it may (send one at a time), or has sent its hour's quota "
            "of uploads or bytes (its Retry-After says when to send again)",
            ERROR,
        ),
        "507": _json(
            "the token's bundles fill its storage quota, or the lab's disk is at its free-space floor: nothing is kept",
            ERROR,
        ),
    },
}
# What a lab's server (gunicorn, web/lab_server.py) refuses itself, before the app sees the request, with an HTML
# page: a request line, or a header field, over 8 KiB.
SERVER_REFUSALS = {
    "414": {
        "description": "the request line is over 8 KiB: the server's own answer",
        "content": {"text/html": {"schema": {"type": "string"}}},
    },
    "431": {
        "description": "a header field is over 8 KiB, or the headers over 64 KiB in all: the server's own answer",
        "content": {"text/html": {"schema": {"type": "string"}}},
    },
}


# What a lab answers of the routes that read run documents from their bundles, past what a server process reads at
# once (lab/index.Budget).
DOCUMENT_REFUSALS = {
    "413": _json("the runs asked for hold more results than a lab reads for one request: ask for fewer", ERROR),
    "503": _json(
        "the lab is reading as many results as it may for other requests (Retry-After: when to ask again)", ERROR
    ),
}
READS_DOCUMENTS = ("/api/runs/{run_id}", "/api/compare")


def _served_by_a_lab(item, extra=None):
    """A path's operations with the answers a lab's server gives of its own, and `extra` ones."""
    return {
        method: op
        if method == "parameters"
        else {**op, "responses": dict(sorted((op["responses"] | SERVER_REFUSALS | (extra or {})).items()))}
        for method, op in item.items()
    }


LAB_DOCUMENT = {
    **DOCUMENT,
    "info": {
        **DOCUMENT["info"],
        "title": "ssdbench lab",
        "description": "Reading needs a session: POST /login (a form: user, password, and csrf_token from GET "
        "/api/session) with a lab user's name and password. An appliance uploads with its token instead, "
        "as `Authorization: Bearer TOKEN`. Every answer is JSON, errors too, except a bundle and the server's "
        "own refusal of a request line or a header field over 8 KiB (414, 431).",
    },
    "components": {
        **DOCUMENT["components"],
        "securitySchemes": {
            **DOCUMENT["components"]["securitySchemes"],
            "token": {"type": "http", "scheme": "bearer"},
        },
        "schemas": {**DOCUMENT["components"]["schemas"], "Run": LAB_RUN, "RunSummary": LAB_RUN_SUMMARY, **VALUES},
    },
    "paths": {
        **{
            path: _served_by_a_lab(
                {k: v for k, v in DOCUMENT["paths"][path].items() if k in methods or k == "parameters"},
                DOCUMENT_REFUSALS if path in READS_DOCUMENTS else None,
            )
            for path, methods in LAB_OPERATIONS.items()
        },
        "/lab/bundles": _served_by_a_lab({"post": UPLOAD}),
    },
}
