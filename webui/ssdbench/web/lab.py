"""The lab's own route: appliances upload their bundles here, with a token instead of a session.

POST /lab/bundles, the bundle's bytes as the body (Content-Length required), `Authorization: Bearer TOKEN`.
Answers 201 {"sha256", "stored": true, "runs": [the lab's run ids]} when kept now, 200 with "stored": false
when it was there already, 400 for a body cut short, 401 without a valid token, 411 without a length, 413 over
the limit, 422 for a bundle that does not verify, 429 over the token's limits (lab/receive), 503 with
Retry-After while this server's threads for uploads are all taken. The token is a header, never part of a URL,
so that no access log records it.
"""

import threading

from flask import Blueprint, current_app, jsonify, request

from ..lab import receive, schema
from .db import get_lab

bp = Blueprint("lab", __name__)

# The threads of a server process that uploads may hold at once (web/lab_server keeps PAGE_THREADS more for the
# pages): a token may keep receive.IN_FLIGHT slow uploads going, and a few tokens would take every thread.
UPLOAD_THREADS = 6
# How long an appliance told "busy" waits before it sends again (results/upload waits it out, counting no try).
BUSY_RETRY_S = 30
_UPLOADING = threading.BoundedSemaphore(UPLOAD_THREADS)


@bp.post("/lab/bundles")
def upload():
    if not _UPLOADING.acquire(blocking=False):
        busy = f"this lab server is receiving {UPLOAD_THREADS} uploads: send it again in {BUSY_RETRY_S} s"
        return jsonify(error=busy), 503, {"Retry-After": str(BUSY_RETRY_S)}
    try:
        return _upload()
    finally:
        _UPLOADING.release()


def _upload():
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if request.content_length is None:
        return jsonify(error="send the bundle with its Content-Length"), 411
    body, status, headers = receive.receive(
        get_lab(),
        current_app.extensions["ssdbench.shelf"],
        request.stream,
        request.content_length,
        token.strip() if scheme.lower() == "bearer" else "",
        lambda: schema.connect(current_app.config["SSDBENCH_LAB_DB"]),
        request.remote_addr,
    )
    return jsonify(body), status, headers
