"""report.html for a bundle, and compare.html for several: each one file with the styles, uPlot, export.js,
report.js and the run documents inlined, so it opens offline in any browser and shows what the web UI shows
(the same summary and ranked bars from results/report_html, the same charts from report.js)."""

import html
import json
import os

from ..errors import SsdbenchError
from ..human import when
from . import card, ranking, report_html, summary, testbed

STATIC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "static")
ASSETS = {"css": ("vendor/uPlot.min.css", "style.css"), "js": ("vendor/uPlot.iife.min.js", "export.js", "report.js")}
FOLD_BUTTONS = (
    '<p class="fold-all"><button type="button" data-fold="open">Unfold every section</button> '
    '<button type="button" data-fold="close">Fold every section</button></p>'
)


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
    text = json.dumps(data, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _page(title, page, body, data, element, draw):
    css = "\n".join(_asset(name) for name in ASSETS["css"])
    js = "\n".join(_script_safe(_asset(name)) for name in ASSETS["js"])
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{css}</style>
</head><body data-page="{page}"><main>
{body}
</main>
<script type="application/json" id="{element}">{_json_in_html(data)}</script>
<script>{js}</script>
<script>
{draw}(JSON.parse(document.getElementById("{element}").textContent));
</script>
</body></html>
""".encode()


def render(doc):
    """report.html of one run document (document.run_document)."""
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
        ("Workload", f"sha256 {summary.workload(doc)}"),
        ("Testbed", testbed.summary(testbed.of(doc, []))),
        ("Times (UTC)", f"started {when(doc['started_at'])}, ended {when(doc['finished_at'])}"),
        ("Origin", doc["origin"]),
    ]
    table = "".join(f"<tr><th>{e(k)}</th><td>{e(str(v))}</td></tr>" for k, v in rows)
    body = f"""<h1>ssdbench run {doc["id"]}: {e(doc["suite"])}
<span class="badge state-{e(doc["state"])}">{e(doc["state"])}</span></h1>
{report_html.summary(summary.of(doc))}
{FOLD_BUTTONS}
<details class="fold" id="identity"><summary><h2>Drive, suite and times</h2></summary>
<table class="identity">{table}</table></details>
{f'<p class="error">{e(doc["error"])}</p>' if doc.get("error") else ""}
<div id="report"><p class="note">Drawing the report (needs JavaScript)…</p></div>
<p class="note">Every figure comes from result.json in this bundle, which names fio's field for each.</p>"""
    title = f"ssdbench run {doc['id']}: {doc['suite']} on {drive.get('model') or drive.get('path') or ''}"
    draw = '((doc) => SsdbenchReport.draw(document.getElementById("report"), doc))'
    return _page(title, "offline-report", body, doc, "run-document", draw)


def _cards(docs, sets):
    """The runs and their repeat sets (documents) as ranking.charts takes them: cards."""
    sets = sets or [None] * len(docs)
    return [card.of(d) for d in docs], [[card.of(m) for m in held] if held else None for held in sets]


def render_compare(docs, sets=None):
    """compare.html of run documents, docs[0] the current run; `sets`, beside them, each run's repeat set (the
    documents of its done runs) or None."""
    first = docs[0]["drive"]
    others = len(docs) - 1
    heading = (
        f"Compare: {first.get('model') or first.get('path')} against {others} other run{'s' if others > 1 else ''}"
    )
    cards, set_cards = _cards(docs, sets)
    grid = report_html.side_by_side(cards)
    body = f"""<h1>{html.escape(heading)}</h1>
{f'<section id="side-by-side"><h2>Side by side</h2>{grid}</section>' if grid else ""}
<section id="ranked" class="ranked">
{report_html.bar_charts(ranking.charts(cards, set_cards), summary.fineprint(docs))}
</section>
{report_html.compare_runs(cards)}
<div id="compare"><p class="note">Drawing the overlaid charts (needs JavaScript)…</p></div>
<p class="note">Every figure comes from the bundles' result.json, which names fio's field for each.</p>"""
    draw = '((docs) => SsdbenchReport.compare(document.getElementById("compare"), docs))'
    title = f"ssdbench compare: runs {', '.join(str(d['id']) for d in docs)}"
    return _page(title, "offline-compare", body, docs, "run-documents", draw)
