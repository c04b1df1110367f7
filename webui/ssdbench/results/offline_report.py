"""report.html for a bundle, and compare.html for several: each one file with the styles, uPlot, report.js and
the run documents inlined, so it opens offline in any browser and shows what the web UI shows (the same
summary and ranked bars from the same templates, the same charts from report.js)."""

import json
import os

import jinja2

from .. import human
from ..errors import SsdbenchError
from . import ranking, summary

HERE = os.path.dirname(os.path.abspath(__file__))
STATIC = os.path.join(os.path.dirname(HERE), "static")
TEMPLATES = os.path.join(HERE, "templates")
ASSETS = {"css": ("vendor/uPlot.min.css", "style.css"), "js": ("vendor/uPlot.iife.min.js", "export.js", "report.js")}
ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True)
ENV.filters.update(figure=human.figure, when=human.when, size=human.size)


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


def _page(template, **context):
    css = "\n".join(_asset(name) for name in ASSETS["css"])
    js = "\n".join(_script_safe(_asset(name)) for name in ASSETS["js"])
    return ENV.get_template(template).render(css=css, js=js, **context).encode()


def render(doc):
    """report.html of one run document (document.run_document)."""
    return _page("offline_report.html", run=doc, s=summary.of(doc), data=_json_in_html(doc))


def render_compare(docs, sets=None):
    """compare.html of run documents, docs[0] the current run; `sets` as ranking.charts takes it."""
    return _page(
        "offline_compare.html",
        runs=docs,
        charts=ranking.charts(docs, sets),
        fineprint=summary.fineprint(docs),
        data=_json_in_html(docs),
    )
