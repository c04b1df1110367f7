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
HEAD_S after its connection opened (or its previous answer went) is closed, and so is one whose headers pass
MAX_HEAD. A request sent behind the last on a kept-alive connection (pipelined) goes through the same deadline,
not straight to a thread as gunicorn's worker hands it (issue 46: one byte every 20 s held a thread for hours).
Only a whole request gets a thread; a bundle's body, the one that may be large, is streamed by its thread, which
cuts it if it falls behind the pace an appliance's own deadline asks for (upload.py). Uploads have threads of
their own (UPLOAD_THREADS), and wait for them: the pages' are never theirs. Every read and write of a thread has
SOCKET_TIMEOUT_S. One client address holds at most PER_ADDRESS connections of a worker, but the proxy's
(`lab serve --behind-proxy ADDR`), whose connections carry everybody's requests.
"""

import collections
import contextlib
import errno
import ipaddress
import os
import re
import selectors
import socket
import struct
import threading
import time
from concurrent import futures
from functools import partial

from gunicorn.app.base import BaseApplication
from gunicorn.workers.gthread import TConn, ThreadWorker
from werkzeug.middleware.proxy_fix import ProxyFix

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

# A request's headers at most (gunicorn's own limits took 827 kB, rescanned at every read).
MAX_HEAD = 64 * 1024
# The connections one client address may hold in a worker, whole requests or not: a browser opens six, the proxy
# caps an address at 32 (lab-proxy.conf). Past it, a connection is closed as it is accepted.
PER_ADDRESS = 32
# A worker's threads for uploads, and for everything else (the pages, the API): uploads wait for threads of their
# own, so that the pages answer while four tokens each keep four slow uploads going (they took every thread).
UPLOAD_THREADS = 6
PAGE_THREADS = 4
UPLOAD = re.compile(rb"POST /lab/bundles[ ?]")
# A worker process per core (at least two), as reading and checking a bundle holds Python's lock: one worker took
# 20.6 uploads a second on two cores where two took 30 (make bench). Threads in each for the uploads of many
# appliances at once and the pages of a few people, each thread with its own database connection (web/db). A
# connection still sending its request costs a buffer in the event loop: a worker holds many. A worker that
# answers nothing for five minutes (a hung database) is restarted.
OPTIONS = {
    "workers": max(2, os.cpu_count() or 1),
    "threads": PAGE_THREADS,
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
_TOO_LARGE_PAGE = b"<h1>431 Request Header Fields Too Large</h1>"
TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/html\r\nConnection: close\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_TOO_LARGE_PAGE), _TOO_LARGE_PAGE)
)


def _head_end(head, start=0):
    """Where a request's headers end (their blank line), looked for from `start` on; -1 while not all arrived."""
    return head.find(b"\r\n\r\n", start)


def _body_size(head, end):
    """The length the headers ending at `end` announce (0 without one)."""
    length = CONTENT_LENGTH.search(head, 0, end + 2)
    return int(length[1]) if length else 0


def _whole(head, end):
    """Whether these bytes, their headers ending at `end` (-1: not yet), hold a request a thread can serve without
    waiting: its headers, and its body when it is small (a larger one is the upload's, which a thread streams; or
    a body over what any route takes, which is refused from its headers, unread)."""
    if end < 0:
        return False
    size = _body_size(head, end)
    return size > PREREAD_BYTES or len(head) >= end + 4 + size


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
        self.per_address = collections.Counter()  # a client address: its connections open (the main thread's)
        self.upload_pool = futures.ThreadPoolExecutor(UPLOAD_THREADS)
        threading.Thread(target=self._pace, daemon=True).start()
        super().init_process()

    def handle_quit(self, sig, frame):
        self.upload_pool.shutdown(wait=False)
        super().handle_quit(sig, frame)

    def enqueue_req(self, conn):
        """A whole request to a thread: an upload to one of the uploads', anything else to gunicorn's pool."""
        if not UPLOAD.match(conn.head):  # every connection has passed through _await
            return super().enqueue_req(conn)
        fs = self.upload_pool.submit(self.handle, conn)
        fs.add_done_callback(lambda done: self.method_queue.defer(self.finish_request, conn, done))

    def accept(self, listener):
        try:
            sock, client = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        address = client[0] if isinstance(client, tuple) else ""
        if self.per_address[address] >= PER_ADDRESS and not _trusted(address, self.app.proxies):
            sock.close()
            return
        self.per_address[address] += 1
        self.nr_conns += 1
        _timeouts(sock)
        self._await(_Conn(self, address, sock, client, listener.getsockname()))

    def on_client_socket_readable(self, conn, client):
        """A kept-alive connection's next request: awaited as a new one's is."""
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        self._await(conn)

    def finish_request(self, conn, fs):
        """A connection kept alive whose client has sent (some of) its next request behind the last: that request
        goes through the header deadline in the event loop too, never straight to a thread."""
        ahead = b""
        if self.alive and not fs.cancelled() and fs.exception() is None and fs.result() is True:
            ahead = conn.parser.unreader.take_buffered()
        if not ahead:
            return super().finish_request(conn, fs)
        self._await(conn, ahead)

    def _await(self, conn, ahead=b""):
        conn.sock.setblocking(False)
        conn.head, conn.timeout = bytearray(ahead), time.monotonic() + HEAD_S
        conn.end = _head_end(conn.head)
        if _whole(conn.head, conn.end):
            self._dispatch(conn)
            return
        self.arriving.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._arrived, conn))

    def _arrived(self, conn, sock):
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if conn.end < 0:  # the end of the headers looked for in what came since the last look, not all again
            conn.end = _head_end(conn.head + data, max(0, len(conn.head) - 3))
        conn.head += data
        whole = bool(data) and _whole(conn.head, conn.end)
        if data and not whole and (conn.end >= 0 or len(conn.head) <= MAX_HEAD):
            return
        self.poller.unregister(sock)
        self.arriving.remove(conn)
        if not whole:  # the client went before its request was whole, or its headers passed MAX_HEAD
            if data:
                with contextlib.suppress(OSError):
                    sock.send(TOO_LARGE)
            self.nr_conns -= 1
            conn.close()
            return
        self._dispatch(conn)

    def _dispatch(self, conn):
        """A whole request to a thread."""
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
        size = _body_size(conn.head, conn.end)
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


class _Conn(TConn):
    """A connection, counted against its client's address until it closes (whichever path of gunicorn's closes
    it, once)."""

    def __init__(self, worker, address, *args):
        super().__init__(worker.cfg, *args)
        self.worker, self.address, self.closed = worker, address, False

    def close(self, graceful=False):
        if not self.closed:
            self.closed = True
            self.worker.per_address[self.address] -= 1
            if not self.worker.per_address[self.address]:
                del self.worker.per_address[self.address]
        super().close(graceful)


def proxies(given):
    """The networks of `lab serve --behind-proxy ADDR`: an address, a network (CIDR), or a host name, resolved
    now. Raises ValueError."""
    try:
        return [ipaddress.ip_network(given, strict=False)]
    except ValueError:
        pass
    try:
        found = {info[4][0] for info in socket.getaddrinfo(given, None, proto=socket.IPPROTO_TCP)}
    except OSError as exc:
        raise ValueError(f"{given!r} is no address, network or host name this machine resolves ({exc})") from exc
    return [ipaddress.ip_network(address) for address in sorted(found)]


def _trusted(address, networks):
    """Whether a peer's `address` is in one of the proxy's `networks`."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


class _FromProxy:
    """The client's address and scheme from X-Forwarded-For and X-Forwarded-Proto (one proxy: their last entry),
    only on a connection from the proxy: anybody else could write any address there."""

    def __init__(self, app, networks):
        self.app, self.networks = app, networks
        self.fixed = ProxyFix(app, x_for=1, x_proto=1)

    def __call__(self, environ, start_response):
        trusted = _trusted(environ.get("REMOTE_ADDR", ""), self.networks)
        return (self.fixed if trusted else self.app)(environ, start_response)


class _Server(BaseApplication):
    """Gunicorn serving one app made before it starts: a lab that cannot start (its schema not current) says so
    before any worker is forked, and the workers share the app's hold on the store. `proxies`: the networks of
    the proxy it is behind."""

    def __init__(self, app, options, proxies):
        self.app, self.options, self.proxies = app, options, proxies
        super().__init__()

    def load_config(self):
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self):
        return self.app


def serve(app, host, port, access_log="-", behind=()):
    """Serve the lab's app on host:port until SIGINT or SIGTERM, a line for each request in `access_log` (a file
    gunicorn opens again on SIGUSR1, as logrotate asks; "-": the standard output). `behind`: the networks of the
    proxy it is behind (proxies()), whose X-Forwarded-For it takes and whose connections are not capped."""
    if behind:
        app.wsgi_app = _FromProxy(app.wsgi_app, behind)
    options = {**OPTIONS, "worker_class": Worker, "bind": f"{host}:{port}", "accesslog": access_log}
    _Server(app, options, behind).run()
