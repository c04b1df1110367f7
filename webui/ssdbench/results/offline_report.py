"""report.html for a bundle: one file with the styles, uPlot, report.js and the run document inlined,
so it opens offline in any browser and draws the same charts as the web UI (report.js does both)."""

import html
import json
import os

from ..errors import SsdbenchError
from ..human import when
from . import document

STATIC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "static")
ASSETS = {"css": ("vendor/uPlot.min.css", "style.css"), "js": ("vendor/uPlot.iife.min.js", "report.js")}


def _asset(name):
    try:
        with open(os.path.join(STATIC, name), encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError as exc:
        raise SsdbenchError(f"the report needs {name}, which is missing from this install (make assets)") from exc


def _script_safe(text):
    # Inside <script>, only "</" could end the element early; "<\/" means the same to JavaScript.
    return text.replace("</", "<\\/")


def _json_in_html(data):
    """JSON for a <script> element with no <, > or & left in it (\\u003c means < to JSON): no string in it
    (a model holding "<!--<script") can end the element, open a comment or start markup."""
    text = json.dumps(data)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render(doc):
    drive, e = doc["drive"], html.escape
    rows = [
        (
            "Drive",
            f"{drive.get('model') or '–'} · serial {drive.get('serial') or '–'} · firmware "
            f"{drive.get('firmware') or '–'}"
            + (f" (from {drive['identity_source']})" if drive.get("identity_source") else ""),
        ),
        ("Device", f"{drive.get('path')} ({drive.get('transport')}, {drive.get('capacity_bytes')} bytes)"),
        ("Suite", f"{doc['suite']}, sha256 {doc['suite_hash']}" + ("" if doc["standard"] else " (non-standard)")),
        ("Workload", f"sha256 {document.recorded(doc, 'suite', 'workload_sha256') or 'not recorded'}"),
        ("Times (UTC)", f"started {when(doc['started_at'])}, ended {when(doc['finished_at'])}"),
        ("Origin", doc["origin"]),
    ]
    table = "".join(f"<tr><th>{e(k)}</th><td>{e(str(v))}</td></tr>" for k, v in rows)
    warnings = "".join(f"<li>{e(w)}</li>" for w in doc.get("warnings") or [])
    css = "\n".join(_asset(name) for name in ASSETS["css"])
    js = "\n".join(_script_safe(_asset(name)) for name in ASSETS["js"])
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ssdbench run {doc["id"]}: {e(doc["suite"])} on {e(drive.get("model") or drive.get("path") or "")}</title>
<style>{css}</style>
</head><body><main>
<h1>ssdbench run {doc["id"]}: {e(doc["suite"])}
<span class="badge state-{e(doc["state"])}">{e(doc["state"])}</span></h1>
<table class="identity">{table}</table>
{f'<p class="error">{e(doc["error"])}</p>' if doc.get("error") else ""}
{f'<ul class="warnings">{warnings}</ul>' if warnings else ""}
<div id="report"><p class="note">Drawing the report (needs JavaScript)…</p></div>
<p class="note">Every figure comes from result.json in this bundle, which names fio's field for each.</p>
</main>
<script type="application/json" id="run-document">{_json_in_html(doc)}</script>
<script>{js}</script>
<script>
SsdbenchReport.draw(document.getElementById("report"),
                    JSON.parse(document.getElementById("run-document").textContent));
</script>
</body></html>
"""
    return page.encode()
