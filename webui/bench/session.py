"""The HTTP benchmarks' two ends: one of ssdbench's servers started on a free port and waited for, and a browser
of plain HTTP with a session cookie, logged in through the login form as a tester is, each request's time taken
on the client, as the browser waits for it."""

import contextlib
import http.cookiejar
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served(args, env=None):
    """`python -m ssdbench.cli ARGS --port PORT` on a free port, once it listens: its base URL; stopped after."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "ssdbench.cli", *args, "--port", str(port)], env=env, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 300
        while not _listening(port):
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit(f"ssdbench {args[0]} did not start")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait()


def _listening(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            return True
    except OSError:
        return False


class Session:
    def __init__(self, url, **login):
        """Logged in at `url` with the login form's fields: pin (an appliance) or user and password (a lab)."""
        self.url = url
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        self.csrf = None
        self.get("/login")
        status, _ = self.send("/login", login)
        if status != 200 or self.last.endswith("/login"):
            raise SystemExit(f"the login at {url} failed ({status})")

    def get(self, path):
        """The page's text (a bundle's zip too); anything but 200 ends the benchmark."""
        status, text = self.send(path)
        if status != 200:
            raise SystemExit(f"{path}: {status}")
        return text

    def send(self, path, fields=None):
        """(status, text) of a GET, or of a form's POST of `fields` with the session's CSRF token: a refusal's
        status too, as a form's answer is a page whatever it says."""
        data = None if fields is None else urllib.parse.urlencode({**fields, "csrf_token": self.csrf or ""}).encode()
        try:
            with self.opener.open(self.url + path, data=data, timeout=120) as response:
                status, self.last, body = response.status, response.geturl(), response.read()
        except urllib.error.HTTPError as exc:
            status, self.last, body = exc.code, self.url + path, exc.read()
        text = body.decode(errors="replace")
        found = CSRF.search(text)
        self.csrf = found[1] if found else self.csrf
        return status, text


def timed(requests, call):
    """{p50_ms, p95_ms} of `call` made `requests` times, one after another."""
    took = []
    for _ in range(requests):
        began = time.perf_counter()
        call()
        took.append((time.perf_counter() - began) * 1000)
    cuts = statistics.quantiles(took, n=100, method="inclusive")
    return {"p50_ms": cuts[49], "p95_ms": cuts[94]}
