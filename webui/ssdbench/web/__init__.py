"""The web UI: Flask blueprints over the store, and a JSON API. It queues runs and never runs fio.

Configuration (create_app's dict, or Flask config):
  SSDBENCH_DATA_DIR      the results directory (required)
  SSDBENCH_EXTRA_DRIVES  device paths to list besides the discovered drives (loop devices in tests)
  SSDBENCH_EXTRA_STICKS  file systems to offer for export besides the USB sticks found (loop devices in tests)
  SSDBENCH_ALLOW_USB     treat USB-attached drives as targets
  SSDBENCH_PIN           the login PIN instead of the generated one ($SSDBENCH_PIN too)
In lab mode (docs/lab.md), instead of the data directory:
  SSDBENCH_LAB_DB        the lab's PostgreSQL URL
  SSDBENCH_LAB_STORE     the folder that keeps the uploaded bundles
The lab serves only LAB_ENDPOINTS (history, compare, the bench, a run's report and bundle, login, the upload); the
appliance's drives, traces and runner controls are not found there.
"""

import datetime
import os

import flask
from flask.sessions import SecureCookieSessionInterface
from werkzeug.exceptions import HTTPException

from ..appliance import access
from ..lab import access as lab_access
from ..lab import index, receive, schema, shelf
from ..results import store
from . import api, auth, data, lab, pages
from .db import close_db

# The largest request the app reads: every form and JSON body it takes is far smaller, but a trace upload.
MAX_BODY_BYTES = 64 * 1024
UPLOADS = ("api.import_trace", "pages.import_trace")  # these take up to data.TRACE_UPLOAD_BYTES
LAB_ENDPOINTS = {
    "auth.login",
    "auth.logout",
    "auth.api_session",
    "pages.history",
    "pages.compare",
    "pages.drive_bench",
    "pages.run",
    "api.openapi_document",
    "api.runs",
    "api.run",
    "api.compare",
    "api.download_bundle",
    "lab.upload",
    "static",
    "pages.favicon",
}
# What one peer on the lab network may cost the appliance, before it logs in, when waitress serves the app.
# Waitress buffers a body (in memory, or in /tmp, which is memory on the appliance) before the app sees it:
# one over the largest the app takes is refused with 413 as soon as its Content-Length says so, or as a
# chunked one streams past it; the app refuses one over its route's limit. A few browsers and scripts at
# once; slow or idle connections are closed.
SERVER_LIMITS = {
    "max_request_body_size": data.TRACE_UPLOAD_BYTES + 1,  # waitress refuses from this size on
    "max_request_header_size": 64 * 1024,
    "connection_limit": 32,
    "channel_timeout": 60,
    "cleanup_interval": 10,
}
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Request(flask.Request):
    """A request whose body may be MAX_BODY_BYTES, or a trace upload's TRACE_UPLOAD_BYTES; over it, 413."""

    @property
    def max_content_length(self):
        if self.endpoint == "lab.upload":
            return receive.MAX_BUNDLE_BYTES
        return data.TRACE_UPLOAD_BYTES if self.endpoint in UPLOADS else MAX_BODY_BYTES


def refuse_large_body():
    """A body over its route's limit is refused from its headers, before a byte of it is read: waitress (the
    appliance) has already refused what is over the largest any route takes, gunicorn (a lab) reads nothing
    before the app does. A body without a length (chunked) is refused too: none of the clients sends one."""
    request = flask.request
    if request.content_length is not None and request.content_length > request.max_content_length:
        flask.abort(413)
    if request.content_length is None and "chunked" in request.headers.get("Transfer-Encoding", "").lower():
        flask.abort(411)


class Sessions(SecureCookieSessionInterface):
    """The session cookie, marked Secure whenever its request came over HTTPS (a lab behind its proxy, which says
    so in X-Forwarded-Proto): a browser then never sends it in clear."""

    def get_cookie_secure(self, app):
        return bool(app.config["SESSION_COOKIE_SECURE"]) or flask.request.is_secure


def create_app(config):
    app = flask.Flask(__name__, static_folder=os.path.join(PACKAGE_DIR, "static"))
    app.request_class = Request
    app.session_interface = Sessions()
    app.config.update(
        SSDBENCH_EXTRA_DRIVES=[],
        SSDBENCH_EXTRA_STICKS=[],
        SSDBENCH_ALLOW_USB=False,
        SSDBENCH_PIN=None,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        PERMANENT_SESSION_LIFETIME=datetime.timedelta(hours=auth.SESSION_HOURS),
    )
    app.config.update(config)
    if app.config.get("SSDBENCH_LAB_DB"):
        start_lab(app)
    else:
        data_dir = app.config["SSDBENCH_DATA_DIR"]
        if not app.config.get("SECRET_KEY"):
            app.config["SECRET_KEY"] = access.secret_key(data_dir)
        access.pin(data_dir, app.config["SSDBENCH_PIN"])  # a PIN that is not one stops the server at once
        store.connect(data_dir).close()  # create or migrate the schema once, before the first request

    app.before_request(refuse_large_body)  # first: before a login is asked for or checked
    app.register_blueprint(auth.bp)
    app.register_blueprint(pages.bp)
    app.register_blueprint(api.bp)
    if app.config.get("SSDBENCH_LAB_DB"):
        app.register_blueprint(lab.bp)  # the upload route, on a lab only
        keep_only(app, LAB_ENDPOINTS)
    app.register_error_handler(HTTPException, errors)
    app.context_processor(lambda: {"lab_mode": bool(app.config.get("SSDBENCH_LAB_DB"))})
    app.after_request(security_headers)
    app.teardown_appcontext(close_db)
    app.register_error_handler(index.Busy, lambda exc: _refusal(exc, 503, {"Retry-After": "10"}))
    app.register_error_handler(index.TooLarge, lambda exc: _refusal(exc, 413, {}))
    return app


def _refusal(exc, status, headers):
    """A lab's refusal to read more run documents than its budget (lab/index.Budget), as JSON or as a page."""
    if auth.is_api():
        return flask.jsonify(error=str(exc)), status, headers
    return flask.render_template("error.html", message=str(exc)), status, headers


# lab serve --read-mib's default: some 600 MB of a server process's memory at most, 4 documents of a full suite.
READ_BYTES = 64 << 20
READ_WAIT_S = 10


def start_lab(app):
    """Lab mode: the schema must be current (`ssdbench lab migrate`), the session key is the lab's, and what dead
    servers left in the store is swept before this one takes its own folder there."""
    conn = schema.connect(app.config["SSDBENCH_LAB_DB"])
    try:
        schema.check_current(conn)
        if not app.config.get("SECRET_KEY"):
            app.config["SECRET_KEY"] = lab_access.secret_key(conn)
        receive.sweep(conn, app.config["SSDBENCH_LAB_STORE"])
    finally:
        conn.close()
    app.extensions["ssdbench.shelf"] = shelf.Shelf(app.config["SSDBENCH_LAB_STORE"])
    # The run documents a server process reads at once, in bytes of JSON (about 9 times as much in memory as they
    # are parsed), and how long a request waits for its share before it is told to come back (503): a compare of
    # 10 runs of a full suite took 1.5 GB, for any logged-in user (issue 46).
    budget = app.config.get("SSDBENCH_LAB_READ_BYTES") or READ_BYTES
    app.extensions["ssdbench.budget"] = index.Budget(budget, READ_WAIT_S)


def keep_only(app, endpoints):
    """A URL map of these endpoints' rules alone: the appliance's pages and API are not found in a lab, and a
    path's 405 and its Allow name only the methods a lab serves there."""
    kept = app.url_map_class(host_matching=app.url_map.host_matching)
    for rule in app.url_map.iter_rules():
        if rule.endpoint in endpoints:
            copy = rule.empty()
            # Flask's own mark on the rule: answer OPTIONS itself, never with the view.
            copy.provide_automatic_options = rule.provide_automatic_options
            kept.add(copy)
    app.url_map = kept


def errors(exc):
    """The API answers JSON, errors included; a page's error is a page with the menu."""
    return api.json_error(exc) if auth.is_api() else pages.error_page(exc)


def security_headers(response):
    # Scripts and styles come only from our own static files: injected markup could not run.
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    )
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    if flask.request.is_secure:  # a browser that met the lab over HTTPS keeps to it (HSTS)
        response.headers["Strict-Transport-Security"] = "max-age=31536000"
    return response
