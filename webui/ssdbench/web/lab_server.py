"""A lab's HTTP server: gunicorn, where the appliance has waitress.

Waitress reads each request's whole body (into memory, or a file in /tmp) before the application sees the
request. On a lab open to a network, anybody could make it hold gigabytes through any route, before a token or
a login was checked. Gunicorn's threaded workers give the application the body unread: the upload checks the
appliance's token, then the length it announces, before it reads a byte of the body (lab/receive); every other
route refuses a body over its limit from its headers (web.refuse_large_body); and a request answered with its
body unread ends its connection, so nothing more of it is read. Gunicorn is the first WSGI server in Flask's
deployment docs, maintained since 2010, and made to run behind a reverse proxy, as docs/lab.md puts the lab.
The appliance keeps waitress: one PIN-holder's small bodies, on a machine that runs one process per service.
"""

import os

from gunicorn.app.base import BaseApplication

# A worker process per core (at least two), as reading and checking a bundle holds Python's lock: one worker took
# 20.6 uploads a second on two cores where two took 30 (make bench). Threads in each for the uploads of many
# appliances at once and the pages of a few people, each thread with its own database connection (web/db). A
# worker that answers nothing for five minutes (a hung database) is restarted.
OPTIONS = {
    "worker_class": "gthread",
    "workers": max(2, os.cpu_count() or 1),
    "threads": 8,
    "worker_connections": 256,
    "timeout": 300,
    "graceful_timeout": 30,
    "keepalive": 5,
    "limit_request_line": 8190,
    "limit_request_fields": 100,
    "limit_request_field_size": 8190,
}


class _Server(BaseApplication):
    """Gunicorn serving one app made before it starts: a lab that cannot start (its schema not current) says so
    before any worker is forked, and the workers share the app's hold on the store."""

    def __init__(self, app, options):
        self.app = app
        self.options = options
        super().__init__()

    def load_config(self):
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self):
        return self.app


def serve(app, host, port):
    """Serve the lab's app on host:port until SIGINT or SIGTERM."""
    _Server(app, {**OPTIONS, "bind": f"{host}:{port}"}).run()
