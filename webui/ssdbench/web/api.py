"""The JSON API under /api/: what every page shows, for scripts too. Described in /api/openapi.json (in a lab,
with the upload of web/lab)."""

import os
import tempfile

from flask import Blueprint, current_app, g, jsonify, request, send_file

from ..errors import SsdbenchError
from ..results import bundle, repeatability, store
from ..suites.locked import summary
from . import data, openapi, validate
from .auth import is_api
from .db import get_db, get_results, lab_mode

bp = Blueprint("api", __name__, url_prefix="/api")
DOWNLOAD_PREFIX = "ssdbench-download-"


def error(message, status):
    return jsonify(error=message), status


def run_or_404(doc, run_id):
    return jsonify(doc) if doc else error(f"no run {run_id}", 404)


def answer(result):
    """A web/data action's (document, status) as a JSON response."""
    body, status = result
    return jsonify(body), status


def json_body():
    """The request's JSON object, already checked against the document; {} when none was sent."""
    return request.get_json(silent=True) or {}


@bp.before_app_request
def check_request():
    """Every API request against its operation in the document, after the login and CSRF checks."""
    if not is_api() or request.url_rule is None:
        return None
    try:
        g.query = validate.check(document())
    except validate.Refused as exc:
        return error(str(exc), exc.status)
    return None


def json_error(exc):
    """An API error as JSON (an unknown path, a method a path does not take, a body over the limit)."""
    response = exc.get_response()  # keeps the headers that go with the status, such as 405's Allow
    response.set_data(jsonify(error=f"{exc.name}: {exc.description}").get_data())
    response.content_type = "application/json"
    return response


def document():
    """The API this server keeps: an appliance's, or a lab's."""
    return openapi.LAB_DOCUMENT if lab_mode() else openapi.DOCUMENT


@bp.get("/openapi.json")
def openapi_document():
    return jsonify(document())


@bp.get("/drives")
def drives():
    found, problems = data.drive_list(current_app.config, refresh=True)  # a script asks afresh each time
    return jsonify(drives=found, problems=problems)


@bp.get("/suites")
def suites():
    found, problems = data.suite_list()
    return jsonify(suites=[summary(s) for s in found], problems=problems)


@bp.get("/runs")
def runs():
    return jsonify(data.runs_page(get_results(), g.query.get("before"), g.query.get("limit", data.HISTORY_PAGE)))


@bp.post("/runs")
def create_run():
    return answer(data.start_run(get_db(), json_body(), current_app.config))


@bp.get("/runs/<int:run_id>")
def run(run_id):
    return run_or_404(get_results().run_document(run_id), run_id)


@bp.delete("/runs/<int:run_id>")
def delete_run(run_id):
    body, status = data.delete_run(get_db(), current_app.config["SSDBENCH_DATA_DIR"], run_id)
    return ("", 204) if status == 200 else (jsonify(body), status)


@bp.get("/runs/<int:run_id>/bundle")
def download_bundle(run_id):
    if lab_mode():  # the bundle as it came from its appliance, named from the index, never opened
        found = get_results().bundle_file(run_id)
        if found is None:
            return error(f"no run {run_id}", 404)
        path, name = found
        return send_file(path, mimetype="application/zip", as_attachment=True, download_name=name)
    if store.run_state(get_db(), run_id) is None:
        return error(f"no run {run_id}", 404)
    return send_bundle(bundle.write, run_id)


def send_bundle(write, what):
    """A bundle written by write(db, data_dir, what, folder), as a download. In the system's temporary folder
    (memory, on the appliance), never on the data partition that holds the results. Opened, then removed with
    its folder: the download streams from the open file, and nothing stays behind, even if it is cut off."""
    with tempfile.TemporaryDirectory(prefix=DOWNLOAD_PREFIX) as tmp:
        try:
            path = write(get_db(), current_app.config["SSDBENCH_DATA_DIR"], what, tmp)
        except SsdbenchError as exc:
            return error(str(exc), 409)
        f = open(path, "rb")
    return send_file(f, mimetype="application/zip", as_attachment=True, download_name=os.path.basename(path))


@bp.get("/repeats")
def repeats():
    return jsonify(repeats=store.list_repeats(get_db()))


@bp.post("/repeats")
def create_repeat():
    return answer(data.start_repeat(get_db(), json_body(), current_app.config))


@bp.get("/repeats/<int:repeat_id>")
def repeat(repeat_id):
    found = repeatability.summary(get_db(), repeat_id)
    return jsonify(found) if found else error(f"no repeat set {repeat_id}", 404)


@bp.post("/repeats/<int:repeat_id>/cancel")
def cancel_repeat(repeat_id):
    return answer(data.cancel_repeat(get_db(), repeat_id))


@bp.get("/repeats/<int:repeat_id>/bundle")
def download_repeat_bundle(repeat_id):
    if store.repeat_state(get_db(), repeat_id) is None:
        return error(f"no repeat set {repeat_id}", 404)
    return send_bundle(bundle.write_repeat, repeat_id)


@bp.get("/traces")
def traces():
    found, problems = data.trace_list(current_app.config)
    return jsonify(traces=found, problems=problems)


@bp.post("/traces")
def import_trace():
    body = json_body()
    content = body["text"].encode()
    return answer(
        data.import_trace(content, body["format"], body.get("name"), body.get("qd", 1), None, current_app.config)
    )


@bp.post("/traces/<name>/runs")
def start_trace(name):
    return answer(data.start_run(get_db(), json_body(), current_app.config, trace=name))


@bp.get("/sticks")
def sticks():
    try:
        return jsonify(sticks=data.stick_list(current_app.config), problems=[])
    except SsdbenchError as exc:  # e.g. lsblk failed: no stick can be offered, and the page says why
        return jsonify(sticks=[], problems=[str(exc)])


@bp.post("/export")
def export():
    return answer(data.export_runs(get_db(), json_body(), current_app.config))


@bp.get("/runs/<int:run_id>/progress")
def progress(run_id):
    return run_or_404(store.run_progress(get_db(), run_id), run_id)


@bp.get("/runs/<int:run_id>/live")
def live_history(run_id):
    return run_or_404(store.progress_history(get_db(), run_id), run_id)


@bp.post("/runs/<int:run_id>/cancel")
def cancel(run_id):
    return answer(data.cancel_run(get_db(), run_id))


@bp.post("/runs/<int:run_id>/resume")
def resume(run_id):
    return answer(data.resume_run(get_db(), run_id, json_body(), current_app.config))


@bp.get("/compare")
def compare():
    ids = [int(i) for i in g.query["run"]]  # whole numbers (checked), maybe written as 2.0
    try:
        runs = data.load_runs(get_results().run_document, ids)
    except LookupError as exc:
        return error(str(exc), 404)
    warning = data.comparability(runs)
    return jsonify(comparable=warning is None, warning=warning, runs=runs, testbeds=data.testbeds(runs))
