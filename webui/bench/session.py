"""The page benchmarks' browser: plain HTTP with a session cookie, logged in through the login form as a tester
is, each request's time taken on the client, as the browser waits for it."""

import http.cookiejar
import re
import statistics
import time
import urllib.error
import urllib.parse
import urllib.request

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


class Session:
    def __init__(self, url, **login):
        """Logged in at `url` with the login form's fields: pin (an appliance) or user and password (a lab)."""
        self.url = url
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        self.csrf = None
        self.get("/login")
        status, _ = self.post("/login", login)
        if status != 200 or self.last.endswith("/login"):
            raise SystemExit(f"the login at {url} failed ({status})")

    def get(self, path):
        """The page's text (a bundle's zip too); anything but 200 ends the benchmark."""
        status, text = self.post(path, None)
        if status != 200:
            raise SystemExit(f"{path}: {status}")
        return text

    def post(self, path, fields):
        """(status, text) of a form sent with the session's CSRF token, or of a GET where `fields` is None: a
        refusal's status too, as a form's answer is a page whatever it says."""
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
