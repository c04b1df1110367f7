"""The pages: drives with Start and Repeat, a run (live while it runs, its report after), a repeat set (its runs
and its summary), compare, history.

Pages work with plain forms; scripts only draw the live view and the charts from the API.
"""

import io
import json
import os
import tempfile

from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    redirect,
    render_template,
    request,
    send_file,
    send_from_directory,
    url_for,
)
from markupsafe import Markup

from ..appliance import logs
from ..errors import SsdbenchError
from ..human import clock, figure, run_name, sentence, shown, shown_unit, when
from ..lab import index
from ..results import bench, repeatability, report_html, store, summary, testbed, upload
from ..run import runner
from ..run.repeat import MAX_TIMES
from ..suites import user_traces
from . import data
from .db import get_db, get_results, lab_mode

bp = Blueprint("pages", __name__)
# The suite a Start form offers first: minutes, not the hours of a longer one.
DEFAULT_SUITE = "quick"
bp.add_app_template_filter(clock)
bp.add_app_template_filter(figure)
bp.add_app_template_filter(when)
bp.add_app_template_filter(sentence)
bp.add_app_template_filter(shown_unit)


@bp.app_template_filter()
def shown_figure(value, unit):
    """A figure as every page shows a figure of its unit (human.shown), without the unit: a table's column says it."""
    return figure(shown(value, unit)[0])


@bp.app_template_filter()
def gigabytes(nbytes):
    return f"{(nbytes or 0) / 1e9:,.1f} GB"


def drives_page(message=None, status=200, chosen=None):
    """The drives, each with its Start form. `chosen`: the form that was refused, whose choices its drive's form
    keeps (the suite, the ID typed, the tick, the repeat count)."""
    # a refused Start (chosen) shows its drive as its check found it (data.remember), the others as listed
    found, problems = data.drive_list(current_app.config, refresh=request.args.get("refresh") == "1")
    suites = data.suite_list()[0]
    for d in found:
        # shortest first on this drive, so that the first suite offered is the quick one, not the longest name
        d["suites"] = sorted(suites, key=lambda s, est=d["estimates"]: (est.get(s.name) is None, est.get(s.name) or 0))
    busy, busy_repeat = store.busy_run(get_db()), store.busy_repeat(get_db())
    # the drive a run or repeat set is on: its row shows the progress, and no drive's Start can start another
    held = busy or busy_repeat
    return render_template(
        "drives.html",
        drives=[d for d in found if d["eligible"]],
        untestable=[d for d in found if not d["eligible"]],
        problems=problems,
        chosen=chosen or {},
        default_suite=DEFAULT_SUITE,
        busy=busy,
        busy_repeat=busy_repeat,
        busy_drive=json.loads(held["drive_json"]).get("path") if held else None,
        max_times=MAX_TIMES,
        message=message,
    ), status


@bp.get("/favicon.ico")
def favicon():
    # What a browser asks for where a page does not link its icon: the API's JSON, a raw file.
    return current_app.send_static_file("favicon.svg")


def error_page(exc):
    """An HTTP error as a page with the menu, in the page's words when it has some (a deleted run's)."""
    response = exc.get_response()  # keeps the headers that go with the status, such as 405's Allow
    response.set_data(render_template("error.html", title=exc.name, message=exc.description))
    response.content_type = "text/html; charset=utf-8"
    return response


@bp.get("/")
def drives():
    return drives_page()


@bp.post("/start")
def start():
    body, status = data.start_run(get_db(), request.form, current_app.config)
    if status != 201:
        return drives_page(body["error"], status, request.form)
    return redirect(body["url"])


@bp.post("/repeat")
def start_repeat():
    body, status = data.start_repeat(get_db(), request.form, current_app.config)
    if status != 201:
        return drives_page(body["error"], status, request.form)
    return redirect(body["url"])


@bp.get(f"/repeats/<{data.ID}:repeat_id>")
def repeat(repeat_id):
    summary = repeatability.summary(get_db(), repeat_id)
    if summary is None:
        abort(404)
    # What the page shows, as app.js sees it in the API, so that it is drawn again at the first change, even one
    # that comes before its first look.
    shown = json.dumps([summary["state"], [[r["id"], r["state"]] for r in summary["runs"]]], separators=(",", ":"))
    return render_template("repeat.html", rep=summary, live=summary["state"] in store.ACTIVE, shown=shown)


@bp.post(f"/repeats/<{data.ID}:repeat_id>/cancel")
def cancel_repeat(repeat_id):
    body, status = data.cancel_repeat(get_db(), repeat_id)
    if status == 404:
        abort(404)
    if status == 202:
        flash("Cancel requested: the run in progress stops cleanly, and no further run of the set starts.")
    return redirect(url_for("pages.repeat", repeat_id=repeat_id))


def traces_page(message=None, status=200):
    found, problems = data.trace_list(current_app.config)
    drives, unlisted = data.drive_list(current_app.config)
    return render_template(
        "traces.html",
        traces=found,
        problems=problems + unlisted,
        drives=[d for d in drives if d["eligible"]],
        formats=user_traces.FORMATS,
        upload_mib=data.TRACE_UPLOAD_BYTES // 2**20,
        busy=store.busy_run(get_db()),
        message=message,
    ), status


@bp.get("/traces")
def traces():
    return traces_page()


@bp.post("/traces")
def import_trace():
    upload = request.files.get("file")
    qd = request.form.get("qd") or "1"
    if upload is None or not upload.filename:
        return traces_page("Choose a trace file to import.", 400)
    if not (qd.isascii() and qd.isdigit()):
        return traces_page("The queue depth must be a whole number from 1 to 32.", 400)
    body, status = data.import_trace(
        upload.read(),
        request.form.get("format"),
        request.form.get("name") or None,
        int(qd),
        upload.filename,
        current_app.config,
    )
    if status != 201:
        return traces_page(body["error"], status)
    flash(
        f"Imported {body['name']}: {body['stats']['reads'] + body['stats']['writes']:,} IOs, sha256 {body['sha256']}."
    )
    return redirect(url_for("pages.traces"))


@bp.post("/traces/<name>/start")
def start_trace(name):
    body, status = data.start_run(get_db(), request.form, current_app.config, trace=name)
    if status != 201:
        return traces_page(body["error"], status)
    return redirect(body["url"])


@bp.get(f"/runs/<{data.ID}:run_id>")
def run(run_id):
    doc = get_results().get_run(run_id)
    if doc is None:
        abort(404, description=gone(run_id))
    if lab_mode():  # the lab keeps the bundle as it came: it is the download, and there is no stick
        files, sticks = [], []
    else:
        files = store.run_files(current_app.config["SSDBENCH_DATA_DIR"], run_id)
        sticks = _sticks()
    return render_template(
        "run.html",
        run=doc,
        summary_html=Markup(report_html.summary(summary.of(doc))),
        testbed=testbed.summary(testbed.of(doc, [])),
        files=files,
        sticks=sticks,
        live=doc["state"] in store.ACTIVE,
    )


def _sticks():
    try:
        return data.stick_list(current_app.config)
    except SsdbenchError:
        return []  # no lsblk: the page still shows the rest


@bp.post(f"/runs/<{data.ID}:run_id>/cancel")
def cancel(run_id):
    body, status = data.cancel_run(get_db(), run_id)
    if status == 404:
        abort(404)
    if status == 202:
        flash("Cancel requested: the runner stops fio cleanly and keeps the completed steps.")
    return redirect(url_for("pages.run", run_id=run_id))


@bp.post(f"/runs/<{data.ID}:run_id>/export")
def export(run_id):
    _export([run_id])
    return redirect(url_for("pages.run", run_id=run_id))


@bp.post("/history/export")
def export_all():
    # every ended run, as the CLI's `export --all`
    _export(None)
    return redirect(url_for("pages.history"))


def _export(runs):
    """Export `runs` (None: every ended run) to the stick the form picked, and say how it went."""
    body, status = data.export_runs(get_db(), {"runs": runs, "device": request.form.get("device")}, current_app.config)
    if status != 200:
        flash(f"Not exported: {body['error']}")
        return
    done = "; ".join(f"{item['file']}, {item['state']}" for item in body["exported"]) or "no run has ended"
    flash(f"Exported to {body['device']}: {done}; {body['pull']}.")


@bp.post("/diagnostics")
def diagnostics():
    """The zip of `ssdbench diagnostics`, to attach to a report: made in a folder of its own, which goes once it
    is read. A POST with the CSRF token, as every request that makes the appliance run commands."""
    with tempfile.TemporaryDirectory() as folder:
        path = logs.diagnostics(current_app.config["SSDBENCH_DATA_DIR"], folder)
        with open(path, "rb") as f:
            body = f.read()
    return send_file(
        io.BytesIO(body), mimetype="application/zip", as_attachment=True, download_name=os.path.basename(path)
    )


@bp.get(f"/runs/<{data.ID}:run_id>/delete")
def delete_question(run_id):
    """Delete asks first, on a page of its own that names the run: a click meant for another button deletes
    nothing."""
    run = store.get_run(get_db(), run_id)
    if run is None:
        abort(404, description=gone(run_id))
    return render_template("delete.html", run=run, name=run_name(run), busy=run["state"] in store.ACTIVE)


@bp.post(f"/runs/<{data.ID}:run_id>/delete")
def delete(run_id):
    # Only the question's form says which run it deletes: a form that does not is asked again.
    if request.form.get("confirm") != str(run_id):
        return redirect(url_for("pages.delete_question", run_id=run_id))
    body, status = data.delete_run(get_db(), current_app.config["SSDBENCH_DATA_DIR"], run_id)
    if status == 404:
        abort(404, description=gone(run_id))
    if status != 200:
        flash(sentence(f"{body['error']}."))
        return redirect(url_for("pages.run", run_id=run_id))
    flash(f"Run {run_id} deleted, with its files.")
    return redirect(url_for("pages.history"))


@bp.get(f"/runs/<{data.ID}:run_id>/resume")
def resume_question(run_id):
    """Resume asks first, on a page of its own: it names the run, the step it starts again from and the drive whose
    data that destroys, and takes that drive's ID typed."""
    run = store.get_run(get_db(), run_id)
    if run is None:
        abort(404, description=gone(run_id))
    return _resume_page(run)


@bp.post(f"/runs/<{data.ID}:run_id>/resume")
def resume(run_id):
    form = {"confirm": request.form.get("confirm", ""), "destroy_data": request.form.get("destroy_data")}
    body, status = data.resume_run(get_db(), run_id, form, current_app.config)
    if status == 202:
        flash(f"Run {run_id} is queued to resume from step {body['from_step']}.")
        return redirect(body["url"])
    run = store.get_run(get_db(), run_id)
    if run is None:
        abort(404, description=gone(run_id))
    return _resume_page(run, body["error"], status, form["confirm"])


def _resume_page(run, error=None, status=200, typed=""):
    resumable = run["state"] == "interrupted" and run["origin"] == "local"
    entry = runner.resume_entry(run) if resumable else None
    drive = data.drive_of(current_app.config, run) if resumable else None
    page = render_template(
        "resume.html", run=run, name=run_name(run), entry=entry, drive=drive, error=error, typed=typed
    )
    return page, status


def gone(run_id):
    return f"There is no run {run_id} here: it was deleted, or never made. History lists the runs there are."


@bp.get(f"/runs/<{data.ID}:run_id>/files/<path:name>")
def run_file(run_id, name):
    # send_from_directory refuses any path that leaves the run's folder.
    return send_from_directory(
        store.run_dir(current_app.config["SSDBENCH_DATA_DIR"], run_id),
        name,
        mimetype="text/plain" if not name.endswith(".json") else None,
    )


@bp.get("/history")
def history():
    # ?before=ID: the page of the runs older than that one (the first page holds the repeat sets too).
    before = request.args.get("before", type=int)
    before = before if before and 0 < before <= data.MAX_ID else None
    repeats = [] if lab_mode() or before else store.list_repeats(get_db())
    page = data.runs_page(get_results(), before, data.HISTORY_PAGE)
    return render_template(
        "history.html",
        page=page,
        repeats=repeats,
        older=before is not None,
        max_compare=data.MAX_COMPARE,
        sticks=[] if lab_mode() else _sticks(),
        held=[] if lab_mode() else upload.held(current_app.config["SSDBENCH_DATA_DIR"]),
    )


@bp.get("/compare")
def compare():
    # ?runs=3,1,2 (the current run first), or the history page's ?run=3&run=1 ticks
    ids, problem = data.compare_ids(request.args.getlist("runs") + request.args.getlist("run"))
    if problem:
        flash(problem)
        return redirect(url_for("pages.history"))
    try:
        if not all(0 < i <= data.MAX_ID for i in ids):
            raise LookupError  # nobody's, and asked for, a read of every row (data.MAX_ID)
        runs = get_results().cards(ids)
    except index.BeingIndexed as exc:  # after an upgrade, until `lab migrate` has made its card
        return render_template("error.html", message=str(exc)), 503, {"Retry-After": "60"}
    except LookupError:
        abort(404)
    return render_template(
        "compare.html",
        runs=runs,
        warning=data.comparability(runs),
        charts=Markup(report_html.bar_charts(data.ranked(get_results(), runs), summary.fineprint(runs))),
        runs_html=Markup(report_html.compare_runs(runs, lambda run_id: url_for("pages.run", run_id=run_id))),
        grid=Markup(report_html.side_by_side(runs)),
    )


@bp.get("/bench")
def drive_bench():
    # ?figure=ID: the review figure the bars rank the page's models by; when none is asked, the one most of them
    # have. ?model=TEXT: only the models whose name begins with it. ?page=N: the page of models (by name).
    name = request.args.get("model", "").strip()
    if len(name) > data.MAX_SEARCH or "\x00" in name:
        abort(400)  # no model's name, and text PostgreSQL cannot take
    page = min(max(request.args.get("page", 1, type=int), 1), data.MAX_BENCH_PAGE)
    table = data.drive_bench(get_results(), name, page)
    ids = [c["id"] for c in table["columns"]]
    figure_id = request.args.get("figure")
    if figure_id not in ids:
        figure_id = max(ids, key=lambda i: sum(i in r["values"] for r in table["rows"]), default=None)
    chart = bench.chart(table, figure_id) if figure_id else None
    return render_template(
        "bench.html",
        bench=table,
        figure=figure_id,
        chart=Markup(report_html.bar_chart(chart, bench.fineprint(table))) if chart else None,
        max_search=data.MAX_SEARCH,
    )
