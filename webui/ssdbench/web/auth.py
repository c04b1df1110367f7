"""Login with the PIN from the console, the session, and the CSRF check on every state-changing request."""

import hmac
import secrets
import threading
import time

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

from ..appliance import access

bp = Blueprint("auth", __name__)

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
PUBLIC_ENDPOINTS = {"auth.login", "auth.api_session", "auth.api_login", "api.openapi_document", "static"}
# Six digits are a million guesses: five wrong ones a minute make that months of trying.
MAX_FAILURES = 5
FAILURE_WINDOW_S = 60


class Throttle:
    """Wrong PINs in the last minute, for the whole server: no client can guess faster by changing address."""

    def __init__(self):
        self.lock = threading.Lock()
        self.failures = []

    def allowed(self):
        with self.lock:
            cutoff = time.monotonic() - FAILURE_WINDOW_S
            self.failures = [t for t in self.failures if t > cutoff]
            return len(self.failures) < MAX_FAILURES

    def failed(self):
        with self.lock:
            self.failures.append(time.monotonic())


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
    return request.path.startswith("/api/")


@bp.before_app_request
def guard():
    """Before every request: log in first (except to log in), and a state change must carry the CSRF token."""
    if request.endpoint not in PUBLIC_ENDPOINTS and not session.get("user"):
        if is_api():
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
    throttle = current_app.extensions["ssdbench.throttle"]
    if not throttle.allowed():
        return False, f"too many wrong PINs: wait a minute (at most {MAX_FAILURES} a minute)", 429
    expected = access.pin(current_app.config["SSDBENCH_DATA_DIR"], current_app.config["SSDBENCH_PIN"])
    if hmac.compare_digest(str(given).strip().encode(), expected.encode()):
        # A new session on login, so that no token seen before it stays valid.
        session.clear()
        session["user"] = True
        csrf_token()
        return True, None, 200
    throttle.failed()
    return False, "wrong PIN: the appliance's console shows it (or run `ssdbench pin`)", 401


def local_target(target):
    """Only a path on this server: `next` must not send the browser elsewhere after login."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return url_for("pages.drives")


@bp.route("/login", methods=["GET", "POST"])
def login():
    if request.method == "GET":
        return render_template("login.html", error=None)
    ok, error, status = check_pin(request.form.get("pin", ""))
    if ok:
        return redirect(local_target(request.args.get("next")))
    return render_template("login.html", error=error), status


@bp.post("/logout")
def logout():
    session.clear()
    return redirect(url_for("auth.login"))


@bp.get("/api/session")
def api_session():
    return jsonify(authenticated=bool(session.get("user")), csrf_token=csrf_token())


@bp.post("/api/login")
def api_login():
    body = request.get_json(silent=True)
    ok, error, status = check_pin(body.get("pin", "") if isinstance(body, dict) else "")
    if not ok:
        return jsonify(error=error), status
    return jsonify(authenticated=True, csrf_token=csrf_token())


@bp.post("/api/logout")
def api_logout():
    session.clear()
    return jsonify(authenticated=False)
