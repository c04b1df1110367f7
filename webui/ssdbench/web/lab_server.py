"""A lab's HTTP server: gunicorn, where the appliance has waitress.

Waitress reads each request's whole body (into memory, or a file in /tmp) before the application sees the
request. On a lab open to a network, anybody could make it hold gigabytes through any route, before a token or
a login was checked. Gunicorn's threaded workers give the application the body unread: the upload checks the
appliance's token, then the length it announces, before it reads a byte of the body (lab/receive); every other
route refuses a body over its limit from its headers (web.refuse_large_body); and a request answered with its
body unread ends its connection, so nothing more of it is read. Gunicorn is the first WSGI server in Flask's
deployment docs, maintained since 2010, and made to run behind a reverse proxy, as docs/lab.md puts the lab.
The appliance keeps waitress: one PIN-holder's small bodies, on a machine that runs one process per service.

Gunicorn's own threaded worker gives a connection a thread as soon as its first byte arrives, and the thread
then waits for the rest of the request: 48 connections that sent one byte each held every thread of a lab, and
its pages answered nobody (issue 35). So a lab's worker (Worker) reads each request's headers, and a small body
whole, in its event loop, where a waiting connection costs a buffer, not a thread; a request that is not whole
HEAD_S after its connection opened (or its previous answer went) is closed. Only a whole request gets a thread;
a bundle's body, the one that may be large, is streamed by its thread, which cuts it if it falls behind the
pace an appliance's own deadline asks for (upload.py). Every read and write of a thread has SOCKET_TIMEOUT_S.
"""

import collections
import contextlib
import errno
import os
import re
import selectors
import socket
import struct
import threading
import time
from functools import partial

from gunicorn.app.base import BaseApplication
from gunicorn.workers.gthread import TConn, ThreadWorker

# A request's headers, and a body that is not a bundle, must be whole this long after they may begin.
HEAD_S = 10
# Bodies up to this are read with their headers, in the event loop; every route but the upload refuses larger.
PREREAD_BYTES = 64 * 1024
# A thread's every read or write on its connection: a client that stops is let go of.
SOCKET_TIMEOUT_S = 30
# A bundle's body: the appliance gives up after 90 s plus its size at 100 kB/s (results/upload.py); the lab cuts
# one that falls further behind than that.
BODY_GRACE_S = 90
BODY_RATE = 100_000
CONTENT_LENGTH = re.compile(rb"^content-length:[ \t]*(\d{1,19})[ \t]*\r?$", re.I | re.M)

# A worker process per core (at least two), as reading and checking a bundle holds Python's lock: one worker took
# 20.6 uploads a second on two cores where two took 30 (make bench). Threads in each for the uploads of many
# appliances at once and the pages of a few people, each thread with its own database connection (web/db). A
# connection still sending its request costs a buffer in the event loop: a worker holds many. A worker that
# answers nothing for five minutes (a hung database) is restarted.
OPTIONS = {
    "workers": max(2, os.cpu_count() or 1),
    "threads": 8,
    "worker_connections": 1000,
    "timeout": 300,
    "graceful_timeout": 30,
    "keepalive": 5,
    "limit_request_line": 8190,
    "limit_request_fields": 100,
    "limit_request_field_size": 8190,
    # No control socket: by default every gunicorn of a user shares one ($HOME/.gunicorn/gunicorn.ctl), so two
    # lab servers on a host would answer each other's gunicornc; a lab is stopped and started by its signals.
    "control_socket_disable": True,
}
MAX_HEAD = OPTIONS["limit_request_line"] + OPTIONS["limit_request_fields"] * OPTIONS["limit_request_field_size"]


def _body_size(head):
    """The length a request's headers announce (0 without one), or None while they have not all arrived."""
    end = head.find(b"\r\n\r\n")
    if end < 0:
        return None
    length = CONTENT_LENGTH.search(head, 0, end + 2)
    return int(length[1]) if length else 0


def _whole(head):
    """Whether these bytes hold a request a thread can serve without waiting: its headers, and its body when it
    is small (a larger one is the upload's, which a thread streams; or a body over what any route takes, which
    is refused from its headers, unread). Over the largest head gunicorn takes counts as whole: it refuses it."""
    size = _body_size(head)
    if size is None:
        return len(head) > MAX_HEAD
    return size > PREREAD_BYTES or len(head) >= head.find(b"\r\n\r\n") + 4 + size


def _timeouts(sock):
    """A kernel timeout on every read and write: gunicorn's threads use their sockets blocking, without one."""
    limit = struct.pack("ll", SOCKET_TIMEOUT_S, 0)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)


class _Paced:
    """A bundle's body as its thread reads it, counted, for the pace Worker checks."""

    def __init__(self, body, sock, length):
        self.body, self.sock, self.length = body, sock, length
        self.started, self.got = time.monotonic(), 0

    @property
    def failed(self):
        return self.body.failed

    def read(self, size=None):
        data = self.body.read(size)
        self.got += len(data)
        return data

    def readline(self, size=None):
        data = self.body.readline(size)
        self.got += len(data)
        return data

    def __iter__(self):
        return iter(self.readline, b"")

    def behind(self, now):
        """Still arriving, and slower than an appliance sends: its answer is due once the body is whole."""
        return self.got < self.length and self.got < (now - self.started - BODY_GRACE_S) * BODY_RATE


class Worker(ThreadWorker):
    """Gunicorn's threaded worker, which gives a connection a thread only once its request is whole."""

    def init_process(self):
        self.arriving = collections.deque()  # connections whose request is not whole yet, oldest first
        self.paced, self.paced_lock = set(), threading.Lock()
        threading.Thread(target=self._pace, daemon=True).start()
        super().init_process()

    def accept(self, listener):
        try:
            sock, client = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        _timeouts(sock)
        self._await(TConn(self.cfg, sock, client, listener.getsockname()))

    def on_client_socket_readable(self, conn, client):
        """A kept-alive connection's next request: awaited as a new one's is."""
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        self._await(conn)

    def _await(self, conn):
        conn.sock.setblocking(False)
        conn.head, conn.timeout = bytearray(), time.monotonic() + HEAD_S
        self.arriving.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._arrived, conn))

    def _arrived(self, conn, sock):
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        conn.head += data
        if data and not _whole(conn.head):
            return
        self.poller.unregister(sock)
        self.arriving.remove(conn)
        if not data:  # the client went before its request was whole
            self.nr_conns -= 1
            conn.close()
            return
        conn.init()
        conn.parser.unreader.unread(bytes(conn.head))
        conn.data_ready = True
        self.enqueue_req(conn)

    def murder_pending(self):
        """Close, besides gunicorn's own, each connection whose request is not whole by its deadline."""
        super().murder_pending()
        now = time.monotonic()
        while self.arriving and self.arriving[0].timeout <= now:
            conn = self.arriving.popleft()
            self.poller.unregister(conn.sock)
            self.nr_conns -= 1
            conn.close()

    def handle_request(self, req, conn):
        """A body larger than the event loop reads (a bundle) is streamed at a pace, or cut."""
        size = _body_size(conn.head) or 0
        if size > PREREAD_BYTES:
            # Also gunicorn's own parser's: its drain of an unread body reads through it.
            body = req.body = _Paced(req.body, conn.sock, size)
            with self.paced_lock:
                self.paced.add(body)
            try:
                return super().handle_request(req, conn)
            finally:
                with self.paced_lock:
                    self.paced.discard(body)
        return super().handle_request(req, conn)

    def _pace(self):
        """Once a second: cut (shut down) each bundle body that has fallen behind; its thread's read then ends."""
        while True:
            time.sleep(1)
            now = time.monotonic()
            with self.paced_lock:
                late = [body for body in self.paced if body.behind(now)]
            for body in late:
                with contextlib.suppress(OSError):
                    body.sock.shutdown(socket.SHUT_RDWR)


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


def serve(app, host, port, access_log="-"):
    """Serve the lab's app on host:port until SIGINT or SIGTERM, a line for each request in `access_log` (a file
    gunicorn opens again on SIGUSR1, as logrotate asks; "-": the standard output)."""
    _Server(app, {**OPTIONS, "worker_class": Worker, "bind": f"{host}:{port}", "accesslog": access_log}).run()
