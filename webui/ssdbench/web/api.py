"""The JSON API under /api/: what every page shows, for scripts too. Described in /api/openapi.json."""

import os
import tempfile

from flask import Blueprint, current_app, jsonify, request, send_file, url_for

from .. import bundle, document, service, store, usbexport
from ..errors import SsdbenchError
from ..suites import summary
from . import data, openapi
from .db import get_db

bp = Blueprint("api", __name__, url_prefix="/api")

MAX_COMPARE = 8


def error(message, status):
    return jsonify(error=message), status


def start_run(db, body):
    """Queue a run from a request body: (JSON document, HTTP status). Shared by the API and the Start form."""
    drive, suite, confirm = body.get("drive"), body.get("suite"), body.get("confirm")
    if not (isinstance(drive, str) and isinstance(suite, str) and isinstance(confirm, str)):
        return {"error": "give drive (a device path), suite (a suite name) and confirm (the drive's ID)"}, 400
    destroy_data = body.get("destroy_data") in (True, "1", "on", "true")
    try:
        run_id = service.enqueue(db, suite, drive, confirm, destroy_data,
                                 current_app.config["SSDBENCH_ALLOW_USB"])
    except store.RunBusy as exc:
        return {"error": f"a run is already active: {exc}"}, 409
    except SsdbenchError as exc:
        return {"error": str(exc)}, 400
    return {"id": run_id, "url": url_for("pages.run", run_id=run_id)}, 201


def json_body():
    """The request's JSON object; anything else (no body, a list, bad JSON) is an empty one, which the
    handlers then refuse field by field."""
    body = request.get_json(silent=True)
    return body if isinstance(body, dict) else {}


def export_runs(db, body):
    """Write bundles to a USB stick from a request body ({"runs": [ids], "device": path}; no runs means every
    ended run): (JSON document, HTTP status). Shared by the API and the run page's Export button."""
    runs, device = body.get("runs"), body.get("device") or None
    if runs is not None and not (isinstance(runs, list) and all(isinstance(r, int) for r in runs)):
        return {"error": "runs must be a list of run ids"}, 400
    if device is not None and not isinstance(device, str):
        return {"error": "device must be a device path"}, 400
    data_dir = current_app.config["SSDBENCH_DATA_DIR"]
    try:
        stick = usbexport.find(device)
        done = usbexport.export(db, data_dir, usbexport.ended_runs(db) if runs is None else runs, stick)
    except SsdbenchError as exc:
        return {"error": str(exc)}, 409
    return {"device": stick["device"], "unmounted": not stick["mountpoint"], "exported": done}, 200


def compare_ids(values):
    """Run ids from ?run=1&run=2 (or run=1,2): (ids, error message)."""
    try:
        ids = list(dict.fromkeys(int(v) for value in values for v in value.split(",") if v.strip()))
    except ValueError:
        return None, "run ids are whole numbers"
    if not 2 <= len(ids) <= MAX_COMPARE:
        return None, f"pick 2 to {MAX_COMPARE} runs to compare"
    return ids, None


@bp.get("/openapi.json")
def openapi_document():
    return jsonify(openapi.DOCUMENT)


@bp.get("/drives")
def drives():
    found, problems = data.drive_list(current_app.config["SSDBENCH_EXTRA_DRIVES"],
                                      current_app.config["SSDBENCH_ALLOW_USB"])
    return jsonify(drives=found, problems=problems)


@bp.get("/suites")
def suites():
    found, problems = data.suite_list()
    return jsonify(suites=[summary(s) for s in found], problems=problems)


@bp.get("/runs")
def runs():
    return jsonify(runs=store.list_runs(get_db()))


@bp.post("/runs")
def create_run():
    body, status = start_run(get_db(), json_body())
    return jsonify(body), status


@bp.get("/runs/<int:run_id>")
def run(run_id):
    doc = document.run_document(get_db(), run_id)
    return jsonify(doc) if doc else error(f"no run {run_id}", 404)


@bp.delete("/runs/<int:run_id>")
def delete_run(run_id):
    db = get_db()
    state = store.run_state(db, run_id)
    if state is None:
        return error(f"no run {run_id}", 404)
    if not store.delete_run(db, run_id):
        return error(f"run {run_id} is {state}: cancel it first", 409)
    data.delete_run_files(current_app.config["SSDBENCH_DATA_DIR"], run_id)
    return "", 204


@bp.get("/runs/<int:run_id>/bundle")
def download_bundle(run_id):
    db = get_db()
    if store.run_state(db, run_id) is None:
        return error(f"no run {run_id}", 404)
    with tempfile.TemporaryDirectory(dir=current_app.config["SSDBENCH_DATA_DIR"]) as tmp:
        try:
            path = bundle.write(db, current_app.config["SSDBENCH_DATA_DIR"], run_id, tmp)
        except SsdbenchError as exc:
            return error(str(exc), 409)
        # Opened, then removed with its folder: the download streams from the open file, and nothing stays behind.
        f = open(path, "rb")
    return send_file(f, mimetype="application/zip", as_attachment=True, download_name=os.path.basename(path))


@bp.get("/sticks")
def sticks():
    try:
        return jsonify(sticks=usbexport.sticks())
    except SsdbenchError as exc:
        return error(str(exc), 500)


@bp.post("/export")
def export():
    body, status = export_runs(get_db(), json_body())
    return jsonify(body), status


@bp.get("/runs/<int:run_id>/progress")
def progress(run_id):
    doc = store.run_progress(get_db(), run_id)
    return jsonify(doc) if doc else error(f"no run {run_id}", 404)


@bp.post("/runs/<int:run_id>/cancel")
def cancel(run_id):
    db = get_db()
    state = store.run_state(db, run_id)
    if state not in ("queued", "running"):
        return error(f"run {run_id} is {state}: there is nothing to cancel" if state else f"no run {run_id}",
                     409 if state else 404)
    store.request_cancel(db, run_id)
    return jsonify(id=run_id, cancel_requested=True), 202


@bp.get("/compare")
def compare():
    ids, problem = compare_ids(request.args.getlist("run"))
    if problem:
        return error(problem, 400)
    try:
        runs = data.load_runs(document.run_document, get_db(), ids)
    except LookupError as exc:
        return error(str(exc), 404)
    warning = data.comparability(runs)
    return jsonify(comparable=warning is None, warning=warning, runs=runs)
