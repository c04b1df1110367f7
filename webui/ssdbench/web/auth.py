"""Login with the PIN from the console (in a lab: a user's name and password), the session, and the CSRF check on
every state-changing request."""

import hmac
import re
import secrets
import threading
import time
import urllib.parse

from flask import (
    Blueprint,
    current_app,
    jsonify,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from werkzeug.exceptions import HTTPException

from ..appliance import access
from ..lab import access as lab_access
from ..lab import audit
from .db import get_lab, lab_mode

bp = Blueprint("auth", __name__)

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
CONTROL_OR_SPACE = re.compile(r"[\x00-\x20\x7f]")
PUBLIC_ENDPOINTS = {
    "auth.login",
    "auth.api_session",
    "auth.api_login",
    "api.openapi_document",
    "static",
    "pages.favicon",
}
# An appliance's upload carries its token instead of a session (web/lab): no cookie, so no CSRF to fear.
TOKEN_ENDPOINTS = {"lab.upload"}
# Six digits are a million guesses: five wrong ones a minute from one client make that months of trying.
MAX_FAILURES = 5
FAILURE_WINDOW_S = 60
# Clients tracked at once: an attacker cycling through addresses cannot grow the table without bound.
MAX_CLIENTS = 10_000
SESSION_HOURS = 12


class Throttle:
    """Wrong PINs in the last minute, per client address: one client that keeps guessing is slowed down,
    and everyone else can still log in. The appliance's one web process keeps it in memory; a lab counts in its
    database (check_user)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.failures = {}

    def _recent(self, client, now):
        kept = [t for t in self.failures.get(client, ()) if t > now - FAILURE_WINDOW_S]
        if kept:
            self.failures[client] = kept
        else:
            self.failures.pop(client, None)
        return kept

    def allowed(self, client):
        with self.lock:
            return len(self._recent(client, time.monotonic())) < MAX_FAILURES

    def failed(self, client):
        with self.lock:
            now = time.monotonic()
            if client not in self.failures and len(self.failures) >= MAX_CLIENTS:
                for other in list(self.failures):
                    self._recent(other, now)
                if len(self.failures) >= MAX_CLIENTS:
                    self.failures.pop(next(iter(self.failures)))  # the client that failed first
            self.failures.setdefault(client, []).append(now)


@bp.record_once
def add_throttle(state):
    state.app.extensions["ssdbench.throttle"] = Throttle()


@bp.app_context_processor
def template_globals():
    return {"csrf_token": csrf_token}


def csrf_token():
    if "csrf" not in session:
        session["csrf"] = secrets.token_urlsafe(32)
    return session["csrf"]


def is_api():
    """A request to the JSON API: /api/, and a lab's /lab/ (its upload)."""
    return request.path.startswith(("/api/", "/lab/"))


def _pin():
    return access.pin(current_app.config["SSDBENCH_DATA_DIR"], current_app.config["SSDBENCH_PIN"])


def _epoch():
    return access.session_epoch(current_app.config["SSDBENCH_DATA_DIR"], _pin())


def logged_in():
    """A session that logged in with the current PIN (a lab user who is still one), in the current epoch (no
    logout since), under 12 hours ago."""
    started = session.get("login_at")
    if not (
        bool(session.get("user"))
        and isinstance(started, (int, float))
        and 0 <= time.time() - started < SESSION_HOURS * 3600
    ):
        return False
    current = lab_access.epoch(get_lab(), session["user"]) if lab_mode() else _epoch()
    return current is not None and hmac.compare_digest(str(session.get("epoch", "")), current)


@bp.before_app_request
def guard():
    """Before every request: log in first (except to log in), and a state change must carry the CSRF token.
    A path that leads nowhere, or a method it does not take, gets its plain 404 or 405."""
    if request.routing_exception is not None or request.endpoint in TOKEN_ENDPOINTS:
        return None
    if request.endpoint not in PUBLIC_ENDPOINTS and not logged_in():
        if is_api():
            if lab_mode():
                return jsonify(error="log in first: POST /login with your lab user's name and password"), 401
            return jsonify(error="log in first: POST /api/login with the PIN shown on the appliance's console"), 401
        return redirect(url_for("auth.login", next=request.full_path if request.query_string else request.path))
    if request.method not in SAFE_METHODS:
        sent = request.headers.get("X-CSRF-Token") or request.form.get("csrf_token") or ""
        expected = session.get("csrf")
        if not expected or not hmac.compare_digest(sent.encode(), expected.encode()):
            message = (
                "missing or wrong CSRF token: send the session's token (GET /api/session) "
                "as the X-CSRF-Token header or the csrf_token form field"
            )
            if is_api():
                return jsonify(error=message), 403
            return render_template("error.html", message=message), 403
    return None


def check_pin(given):
    """(ok, error message, HTTP status)."""
    throttle, client = current_app.extensions["ssdbench.throttle"], request.remote_addr or "unknown"
    if not throttle.allowed(client):
        return False, f"too many wrong PINs from {client}: wait a minute (at most {MAX_FAILURES} a minute)", 429
    if hmac.compare_digest(str(given).strip().encode(), _pin().encode()):
        _start_session(True, _epoch())
        return True, None, 200
    throttle.failed(client)
    return False, "wrong PIN: the appliance's console shows it (or run ssdbench pin there)", 401


def check_user(name, password):
    """A lab user's login: (ok, error message, HTTP status). Each try is counted before its scrypt, per client
    address prefix and network (the proxy's X-Forwarded-For when the lab is told it is behind one: lab serve
    --behind-proxy ADDR) and user name, in the lab's database, which its workers and servers share
    (lab/access.take_try): an address that guesses waits, and so does each address that guessed at a user, and,
    past a bound, everybody trying that user."""
    client = request.remote_addr or "unknown"
    conn = get_lab()
    try_id, wait = lab_access.take_try(conn, lab_access.prefix(client), str(name)[:64], MAX_FAILURES, FAILURE_WINDOW_S)
    if wait == "address":
        return False, f"too many wrong passwords from {client}: wait a minute (at most {MAX_FAILURES} a minute)", 429
    if wait == "user":
        return False, "too many wrong passwords for this user from here: wait a minute", 429
    epoch = lab_access.login(conn, name, password)
    # Under the user's name only if there is such a user: a password typed into the name field is not kept.
    known = epoch is not None or lab_access.epoch(conn, name) is not None
    outcome = "ok" if epoch is not None else "wrong password"
    audit.record(conn, str(name) if known else "(no such user)", "login", outcome, None, client)
    if epoch is not None:
        lab_access.forgive_try(conn, try_id)
        _start_session(str(name), epoch)
        return True, None, 200
    return False, "wrong user or password: the lab's admin gives them (ssdbench lab user add NAME)", 401


def _start_session(user, epoch):
    # A new session on login, so that no token seen before it stays valid.
    session.clear()
    session.permanent = True
    session.update(user=user, login_at=time.time(), epoch=epoch)
    csrf_token()


def local_target(target):
    """Where to go after login: `next` only if it is a page of this app, given as a plain path. Anything
    else (another host, a scheme, a tab or a backslash that a browser would read as one) goes to the drives."""
    fallback = url_for("pages.history" if lab_mode() else "pages.drives")
    if not target or CONTROL_OR_SPACE.search(target) or "\\" in target:
        return fallback
    parts = urllib.parse.urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/") or parts.path.startswith("//"):
        return fallback
    try:
        endpoint, _ = current_app.url_map.bind("localhost").match(parts.path, method="GET")
    except HTTPException:
        return fallback
    if endpoint in PUBLIC_ENDPOINTS or endpoint.startswith("api."):
        return fallback
    return parts.path + (f"?{parts.query}" if parts.query else "")


@bp.route("/login", methods=["GET", "POST"])
def login():
    if request.method == "GET":
        return render_template("login.html", error=None)
    if lab_mode():
        ok, error, status = check_user(request.form.get("user", ""), request.form.get("password", ""))
    else:
        ok, error, status = check_pin(request.form.get("pin", ""))
    if ok:
        return redirect(local_target(request.args.get("next")))
    return render_template("login.html", error=error), status


def end_sessions():
    """Log out: every session of the appliance ends, or in a lab every session of this user."""
    if lab_mode():
        lab_access.end_sessions(get_lab(), session.get("user"))
        audit.record(get_lab(), session.get("user"), "logout", "ok", None, request.remote_addr)
    else:
        access.end_sessions(current_app.config["SSDBENCH_DATA_DIR"])
    session.clear()


@bp.post("/logout")
def logout():
    end_sessions()
    return redirect(url_for("auth.login"))


@bp.get("/api/session")
def api_session():
    return jsonify(authenticated=logged_in(), csrf_token=csrf_token())


@bp.post("/api/login")
def api_login():
    ok, error, status = check_pin(request.get_json()["pin"])  # a body checked against the document
    if not ok:
        return jsonify(error=error), status
    return jsonify(authenticated=True, csrf_token=csrf_token())


@bp.post("/api/logout")
def api_logout():
    end_sessions()
    return jsonify(authenticated=False)
