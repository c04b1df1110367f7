"""The lab's own route: appliances upload their bundles here, with a token instead of a session.

POST /lab/bundles, the bundle's bytes as the body (Content-Length required), `Authorization: Bearer TOKEN`.
Answers 201 {"sha256", "stored": true, "runs": [the lab's run ids]} when kept now, 200 with "stored": false
when it was there already, 400 for a body cut short, 401 without a valid token, 411 without a length, 413 over
the limit, 422 for a bundle that does not verify, 429 over the token's limits (lab/receive), 507 when it cannot
be stored. The token is a header, never part of a URL, so that no access log records it.
"""

from flask import Blueprint, current_app, jsonify, request

from ..lab import receive, schema
from .db import get_lab

bp = Blueprint("lab", __name__)


@bp.post("/lab/bundles")
def upload():
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
