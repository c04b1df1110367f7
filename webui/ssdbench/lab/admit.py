"""What the lab takes of an uploaded bundle before any of it is kept: its documents, bounded in size and number,
and every value the index writes, checked and converted here, so that a bundle the database could not take is
refused (422) before its file is placed in the store, never after.

The documents come from anybody with a token: a number may be NaN or 10^400, a string may hold a NUL or a lone
surrogate (neither of which PostgreSQL stores), an id may be a string, a step may have no state, and a drive's
model may be a list. Each is refused with what was wrong, where.
"""

import math
import zipfile
from typing import NamedTuple

from ..results import bundle, card, headline, store
from ..run.repeat import MAX_TIMES

# A run's document: a full suite's is a few MB. A bundle holds one run, or a repeat set of at most MAX_TIMES.
# The manifest lists a few hundred files (about 10 kB a run), and a repeat set's document is smaller than one run's:
# each JSON member is held to its size before it is parsed (a 28 MB manifest took a worker from 141 to 689 MB).
MAX_MANIFEST_BYTES = 1 << 20
MAX_REPEAT_BYTES = 1 << 20
MAX_DOCUMENT_BYTES = 16 << 20
MAX_DOCUMENTS_BYTES = 64 << 20
MAX_RUNS = MAX_TIMES
# Text the index keeps (a model, a serial, a suite's name, an error): far above any real one.
MAX_TEXT = 4096
BIGINT = 2**63 - 1


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
    each within its bounds (and, as bundle.read_json reads them, holding only finite numbers). Every member's
    size and compression ratio are held to zip_safety's before a byte is inflated, and zipfile inflates no member
    past the size it states. Raises Refused, or bundle.BundleError."""
    try:
        with zipfile.ZipFile(part) as zf:
            for name, limit in ((bundle.MANIFEST, MAX_MANIFEST_BYTES), (bundle.REPEAT, MAX_REPEAT_BYTES)):
                if name in zf.NameToInfo and zf.getinfo(name).file_size > limit:
                    raise Refused(f"{name} of {zf.getinfo(name).file_size} bytes: the lab takes {limit}")
    except (OSError, zipfile.BadZipFile) as exc:
        raise Refused(f"not a readable bundle ({exc})") from exc
    try:
        manifest = bundle.verify(part)
        with zipfile.ZipFile(part) as zf:
            sizes = [i.file_size for i in zf.infolist() if i.filename.endswith(bundle.RESULT)]
            if len(sizes) > MAX_RUNS:
                raise Refused(f"{len(sizes)} run documents: a bundle holds one run, or a repeat set of {MAX_RUNS}")
            if max(sizes, default=0) > MAX_DOCUMENT_BYTES or sum(sizes) > MAX_DOCUMENTS_BYTES:
                raise Refused(
                    f"run documents of {max(sizes)} bytes ({sum(sizes)} in all): the lab takes "
                    f"{MAX_DOCUMENT_BYTES} a run, {MAX_DOCUMENTS_BYTES} a bundle"
                )
            _, runs = bundle.read_documents(zf, part)
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
    kind = "repeat" if "repeat" in manifest else "run"
    host = _text((manifest.get(kind) or {}).get("host"), "manifest.json: host") or "unnamed"
    return host, [_run(host, doc, prefix) for _, doc, prefix in runs]


def _run(host, doc, prefix):
    where = prefix + bundle.RESULT
    env = _object(doc.get("environment"), f"{where}: environment")
    # What the run page reads of the environment and the drive, and the card they make, are text a page shows
    # whole: each string of them is bounded (an 8 MB fio version made a 16.8 MB card and a 58.7 MB compare page).
    _object(env.get("suite"), f"{where}: environment.suite")  # the run page reads it, when there is one
    _bounded(env, f"{where}: environment")
    _bounded(doc.get("drive"), f"{where}: drive")
    kernel = _text(_object(env.get("kernel"), f"{where}: environment.kernel").get("release"), f"{where}: kernel")
    cpu = _text(_object(env.get("cpu"), f"{where}: environment.cpu").get("model"), f"{where}: cpu model")
    d = _object(doc.get("drive"), f"{where}: drive")
    drive = (
        *(_text(d.get(k), f"{where}: drive {k}") or "" for k in ("model", "serial", "firmware")),
        _whole(d.get("capacity_bytes"), f"{where}: drive capacity_bytes", none=True),
        _text(d.get("transport"), f"{where}: drive transport") or "",
    )
    run_id = _whole(doc.get("id"), f"{where}: id")
    if run_id < 1:
        raise Refused(f"{where}: id {run_id} is not a run's")
    state = doc.get("state")
    if state not in store.ENDED:
        raise Refused(f"{where}: state {state!r} is not one a finished run has ({', '.join(store.ENDED)})")
    for n, step in enumerate(doc["steps"]):
        _step(step, f"{where}: step {n}")
    row = {
        "source_id": run_id,
        "path": _text(d.get("path"), f"{where}: drive path") or "",
        "suite": _text(doc.get("suite"), f"{where}: suite", required=True),
        "suite_hash": _text(doc.get("suite_hash"), f"{where}: suite_hash", required=True),
        "standard": bool(doc.get("standard")),
        "state": state,
        "error": _text(doc.get("error"), f"{where}: error"),
        "created_at": _number(doc.get("created_at"), f"{where}: created_at") or 0.0,
        "started_at": _number(doc.get("started_at"), f"{where}: started_at"),
        "finished_at": _number(doc.get("finished_at"), f"{where}: finished_at"),
    }
    testbed = (host, cpu or "unknown", kernel or "unknown")
    try:
        summarised = card.of(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        # What the compare page would have met reading the document, met now, while it can be refused.
        raise Refused(f"{where}: its figures and warnings cannot be read ({exc!r})") from exc
    _bounded(summarised, f"{where}: its card")
    return Run(prefix, testbed, drive, row, headline.figures(doc), summarised)


def _bounded(value, where):
    """Every string in `value`, keys too, within MAX_TEXT characters, and one PostgreSQL stores (the card is jsonb:
    a NUL or a lone surrogate in it was a 500 where it should be a 422)."""
    left = [value]
    while left:
        item = left.pop()
        if isinstance(item, str):
            if len(item) > MAX_TEXT:
                raise Refused(f"{where}: a text of {len(item)} characters, over the {MAX_TEXT} a page shows")
            _text(item, f"{where}: a text")
        elif isinstance(item, dict):
            left += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            left += item


def _step(step, where):
    """What headline.figures reads of a step."""
    if not isinstance(step, dict):
        raise Refused(f"{where}: not a step")
    for key in ("state", "kind", "key"):
        _text(step.get(key), f"{where}: {key}", required=True)
    _text(step.get("job_file"), f"{where}: job_file", limit=bundle.MAX_JSON_BYTES)
    metrics = step.get("metrics")
    if not isinstance(metrics, list):
        raise Refused(f"{where}: metrics is not a list")
    for m in metrics:
        if not isinstance(m, dict):
            raise Refused(f"{where}: a metric that is not an object")
        _text(m.get("name"), f"{where}: a metric's name", required=True)
        _text(m.get("unit"), f"{where}: metric {m['name']}'s unit")
        if m.get("value") is not None:
            _number(m.get("value"), f"{where}: metric {m['name']}'s value")


def _object(value, where):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Refused(f"{where} is not an object")
    return value


def _text(value, where, required=False, limit=MAX_TEXT):
    """A string PostgreSQL can store (no NUL, no lone surrogate), or None where it may be left out."""
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise Refused(f"{where} is not text")
    if "\x00" in value or len(value) > limit:
        raise Refused(f"{where}: a NUL or over {limit} characters")
    try:
        value.encode()
    except UnicodeEncodeError as exc:
        raise Refused(f"{where}: not valid Unicode ({exc.reason})") from exc
    return value


def _whole(value, where, none=False):
    if value is None and none:
        return None
    if type(value) is not int or not -BIGINT <= value <= BIGINT:
        raise Refused(f"{where} is not a whole number of 64 bits")
    return value


def _number(value, where):
    if value is None:
        return None
    if type(value) not in (int, float) or abs(value) > 1e300 or not math.isfinite(value):
        raise Refused(f"{where} is not a finite number")
    return float(value)
