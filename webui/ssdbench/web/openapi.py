"""The OpenAPI 3.1 description of the JSON API, written by hand next to the routes it describes."""

from .. import __version__
from ..results import store


def _json(description, schema=None):
    return {"description": description, "content": {"application/json": {"schema": schema or {"type": "object"}}}}


def _body(properties, required=()):
    """A JSON request body: an object with these properties."""
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return {"content": {"application/json": {"schema": schema}}}


ERROR = {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]}
RUN_ID = {"name": "run_id", "in": "path", "required": True, "schema": {"type": "integer"}}
UNAUTHORIZED = _json("not logged in", ERROR)
NO_CSRF = _json("missing or wrong X-CSRF-Token", ERROR)
NOT_FOUND = _json("no such run", ERROR)

METRIC = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "examples": ["read.iops", "write.clat_p99.99", "steady.avg_iops"]},
        "value": {"type": "number", "description": "full precision, never rounded"},
        "unit": {"type": "string"},
        "source": {"type": "string", "description": "the fio JSON pointer it was read from, or how it was derived"},
    },
}
SERIES = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "step_id": {"type": ["integer", "null"], "description": "null: run-level"},
        "name": {"type": "string", "examples": ["write.iops", "temperature", "write.mb_s"]},
        "unit": {"type": "string"},
        "source": {"type": "string"},
        "x_unit": {
            "enum": ["ms", "bytes", "offset"],
            "description": "ms since the step's (or run's) start, block size in bytes, or a zone's byte offset",
        },
        "x": {"type": "array", "items": {"type": "number"}},
        "y": {"type": "array", "items": {"type": "number"}},
    },
}
STATE = {"enum": list(store.STATES)}
RUN = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "suite": {"type": "string"},
        "suite_hash": {"type": "string"},
        "standard": {"type": "integer"},
        "state": STATE,
        "error": {"type": ["string", "null"]},
        "drive": {"type": "object"},
        "environment": {"type": ["object", "null"]},
        "warnings": {"type": "array", "items": {"type": "string"}},
        "steps": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "idx": {"type": "integer"},
                    "key": {"type": "string"},
                    "kind": {"type": "string"},
                    "title": {"type": "string"},
                    "state": {"type": "string"},
                    "job_file": {"type": ["string", "null"]},
                    "metrics": {"type": "array", "items": METRIC},
                },
            },
        },
        "series": {"type": "array", "items": SERIES},
    },
}
PROGRESS = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "state": STATE,
        "step_index": {"type": ["integer", "null"]},
        "step_count": {"type": "integer"},
        "percent": {"type": "number"},
        "eta_s": {"type": ["number", "null"]},
        "cur_iops": {"type": ["number", "null"]},
        "cur_bw": {"type": ["number", "null"], "description": "bytes/s"},
        "progress_at": {"type": ["number", "null"], "description": "Unix time of the last progress update"},
        "cancel_requested": {"type": "integer"},
        "temperature": {
            "type": ["object", "null"],
            "properties": {"t_ms": {"type": "integer"}, "value": {"type": "number"}},
        },
        "steps": {"type": "array", "items": {"type": "object"}},
    },
}

DOCUMENT = {
    "openapi": "3.1.0",
    "info": {
        "title": "ssdbench",
        "version": __version__,
        "description": "Every request needs a session: GET /api/session for a CSRF token, then POST /api/login with "
        "the PIN from the appliance's console and that token in X-CSRF-Token. Every POST and DELETE "
        "carries X-CSRF-Token.",
    },
    "components": {
        "securitySchemes": {
            "session": {"type": "apiKey", "in": "cookie", "name": "session"},
            "csrf": {"type": "apiKey", "in": "header", "name": "X-CSRF-Token"},
        }
    },
    "security": [{"session": []}],
    "paths": {
        "/api/session": {
            "get": {
                "summary": "Whether this session is logged in, and its CSRF token",
                "security": [],
                "responses": {"200": _json("the session")},
            }
        },
        "/api/login": {
            "post": {
                "summary": "Log in with the PIN",
                "security": [{"csrf": []}],
                "requestBody": _body({"pin": {"type": "string"}}, ["pin"]),
                "responses": {
                    "200": _json("logged in; the new session's CSRF token"),
                    "401": _json("wrong PIN", ERROR),
                    "403": NO_CSRF,
                    "429": _json("too many wrong PINs in the last minute", ERROR),
                },
            }
        },
        "/api/logout": {
            "post": {
                "summary": "End the session",
                "security": [{"session": [], "csrf": []}],
                "responses": {"200": _json("logged out")},
            }
        },
        "/api/drives": {
            "get": {
                "summary": "Every drive: identity, link, temperature, eligibility with its reason, and each "
                "suite's estimated seconds on it",
                "responses": {
                    "200": _json(
                        "drives, and devices that could not be described",
                        {
                            "type": "object",
                            "properties": {
                                "drives": {"type": "array", "items": {"type": "object"}},
                                "problems": {"type": "array", "items": {"type": "string"}},
                            },
                        },
                    ),
                    "401": UNAUTHORIZED,
                },
            }
        },
        "/api/suites": {
            "get": {
                "summary": "The locked suites and their hashes",
                "responses": {"200": _json("suites"), "401": UNAUTHORIZED},
            }
        },
        "/api/runs": {
            "get": {"summary": "Every run with its state", "responses": {"200": _json("runs"), "401": UNAUTHORIZED}},
            "post": {
                "summary": "Queue a suite on a drive (destroys its data); the runner service executes it",
                "security": [{"session": [], "csrf": []}],
                "requestBody": _body(
                    {
                        "drive": {"type": "string", "examples": ["/dev/nvme0n1"]},
                        "suite": {"type": "string", "examples": ["standard"]},
                        "confirm": {
                            "type": "string",
                            "description": "the drive's confirm_id: its serial, or its kernel name when it has none",
                        },
                        "destroy_data": {
                            "type": "boolean",
                            "description": "needed when the drive holds partitions or file systems",
                        },
                    },
                    ["drive", "suite", "confirm"],
                ),
                "responses": {
                    "201": _json(
                        "queued",
                        {"type": "object", "properties": {"id": {"type": "integer"}, "url": {"type": "string"}}},
                    ),
                    "400": _json("refused: wrong confirmation, ineligible drive, unknown suite", ERROR),
                    "401": UNAUTHORIZED,
                    "403": NO_CSRF,
                    "409": _json("another run is queued or running", ERROR),
                },
            },
        },
        "/api/runs/{run_id}": {
            "parameters": [RUN_ID],
            "get": {
                "summary": "A run as one document: steps, metrics, environment, all series",
                "responses": {"200": _json("the run", RUN), "401": UNAUTHORIZED, "404": NOT_FOUND},
            },
            "delete": {
                "summary": "Delete a finished run and its folder",
                "security": [{"session": [], "csrf": []}],
                "responses": {
                    "204": {"description": "deleted"},
                    "401": UNAUTHORIZED,
                    "403": NO_CSRF,
                    "404": NOT_FOUND,
                    "409": _json("the run is queued or running", ERROR),
                },
            },
        },
        "/api/runs/{run_id}/bundle": {
            "parameters": [RUN_ID],
            "get": {
                "summary": "The run's result bundle: a .zip with manifest.json, result.json, CSVs, fio's raw "
                "files, the job files with rerun.sh, and an offline report.html",
                "responses": {
                    "200": {"description": "the bundle", "content": {"application/zip": {}}},
                    "401": UNAUTHORIZED,
                    "404": NOT_FOUND,
                    "409": _json("the run has not ended", ERROR),
                },
            },
        },
        "/api/sticks": {
            "get": {
                "summary": "USB sticks with a FAT32 or exFAT file system, where bundles can be exported",
                "responses": {"200": _json("sticks"), "401": UNAUTHORIZED},
            }
        },
        "/api/export": {
            "post": {
                "summary": "Write bundles to a USB stick (in ssdbench-results/), read them back, verify, unmount",
                "security": [{"session": [], "csrf": []}],
                "requestBody": _body(
                    {
                        "runs": {
                            "type": "array",
                            "items": {"type": "integer"},
                            "description": "default: every run that has ended",
                        },
                        "device": {
                            "type": "string",
                            "description": "the stick's file system (default: the one found)",
                        },
                    }
                ),
                "responses": {
                    "200": _json("what was written or already there"),
                    "401": UNAUTHORIZED,
                    "403": NO_CSRF,
                    "409": _json("no stick, several sticks, a full stick, or a failed read-back", ERROR),
                },
            }
        },
        "/api/runs/{run_id}/progress": {
            "parameters": [RUN_ID],
            "get": {
                "summary": "Live progress: step, percent, ETA, current IOPS and bytes/s, temperature",
                "responses": {"200": _json("progress", PROGRESS), "401": UNAUTHORIZED, "404": NOT_FOUND},
            },
        },
        "/api/runs/{run_id}/cancel": {
            "parameters": [RUN_ID],
            "post": {
                "summary": "Ask the runner to stop the run cleanly",
                "security": [{"session": [], "csrf": []}],
                "responses": {
                    "202": _json("cancel requested"),
                    "401": UNAUTHORIZED,
                    "403": NO_CSRF,
                    "404": NOT_FOUND,
                    "409": _json("the run is not active", ERROR),
                },
            },
        },
        "/api/compare": {
            "get": {
                "summary": "2 to 8 runs side by side",
                "parameters": [
                    {
                        "name": "run",
                        "in": "query",
                        "required": True,
                        "explode": True,
                        "schema": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 8},
                    }
                ],
                "responses": {
                    "200": _json(
                        "the runs, and whether they are comparable (one suite hash)",
                        {
                            "type": "object",
                            "properties": {
                                "comparable": {"type": "boolean"},
                                "warning": {"type": ["string", "null"]},
                                "runs": {"type": "array", "items": RUN},
                            },
                        },
                    ),
                    "400": _json("not 2 to 8 run ids", ERROR),
                    "401": UNAUTHORIZED,
                    "404": NOT_FOUND,
                },
            }
        },
        "/api/openapi.json": {
            "get": {"summary": "This document", "security": [], "responses": {"200": _json("OpenAPI 3.1")}}
        },
    },
}
