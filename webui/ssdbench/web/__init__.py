"""The web UI: Flask blueprints over the store, and a JSON API. It queues runs and never runs fio.

Configuration (create_app's dict, or Flask config):
  SSDBENCH_DATA_DIR      the results directory (required)
  SSDBENCH_EXTRA_DRIVES  device paths to list besides the discovered drives (loop devices in tests)
  SSDBENCH_ALLOW_USB     treat USB-attached drives as targets
  SSDBENCH_PIN           the login PIN instead of the generated one ($SSDBENCH_PIN too)
"""

import os

from flask import Flask

from ..appliance import access
from ..results import store
from . import api, auth, pages
from .db import close_db

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def create_app(config):
    app = Flask(__name__, static_folder=os.path.join(PACKAGE_DIR, "static"))
    app.config.update(
        SSDBENCH_EXTRA_DRIVES=[],
        SSDBENCH_ALLOW_USB=False,
        SSDBENCH_PIN=None,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        MAX_CONTENT_LENGTH=64 * 1024,
    )
    app.config.update(config)
    data_dir = app.config["SSDBENCH_DATA_DIR"]
    if not app.config.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = access.secret_key(data_dir)
    store.connect(data_dir).close()  # create or migrate the schema once, before the first request

    app.register_blueprint(auth.bp)
    app.register_blueprint(pages.bp)
    app.register_blueprint(api.bp)
    app.after_request(security_headers)
    app.teardown_appcontext(close_db)
    return app


def security_headers(response):
    # Scripts and styles come only from our own static files: injected markup could not run.
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    )
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response
