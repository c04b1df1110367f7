"""Schemathesis's login for the API contract test (loaded through SCHEMATHESIS_HOOKS): a fresh session and
its CSRF token for every request, so that the fuzzer's own POST /api/logout cannot end the test's session.
It logs in from 127.0.0.2: the fuzzer's wrong PINs come from 127.0.0.1, and their throttle (which refuses
even the right PIN for a minute) cannot lock the test out.

On a lab (SSDBENCH_LAB_USER set) it logs in as a lab user does, through the /login form, and an appliance's
upload token goes with every request, as `Authorization: Bearer`."""

import http.client
import http.cookies
import json
import os
import urllib.parse

import schemathesis

# A bundle goes up as the bytes of a .zip: sent as they are, as for application/octet-stream.
schemathesis.serializer.alias("application/zip", "application/octet-stream")

PORT = int(os.environ["SSDBENCH_TEST_PORT"])
PIN = os.environ.get("SSDBENCH_PIN")
LAB_USER = os.environ.get("SSDBENCH_LAB_USER")
LAB_PASSWORD = os.environ.get("SSDBENCH_LAB_PASSWORD")
LAB_TOKEN = os.environ.get("SSDBENCH_LAB_TOKEN")


def _call(method, path, cookie=None, token=None, body=None, form=None):
    """(the session cookie after the call, the JSON answer or None); raises unless 200, or 302 to a form."""
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60, source_address=("127.0.0.2", 0))
    headers = {"Content-Type": "application/x-www-form-urlencoded" if form else "application/json"}
    if cookie:
        headers["Cookie"] = f"session={cookie}"
    if token:
        headers["X-CSRF-Token"] = token
    data = urllib.parse.urlencode(form) if form else json.dumps(body) if body else None
    try:
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        text = response.read()
        if response.status != (302 if form else 200):
            raise RuntimeError(f"{method} {path}: {response.status} {text[:500]!r}")
        jar = http.cookies.SimpleCookie(response.getheader("Set-Cookie") or "")
        return jar["session"].value if "session" in jar else cookie, None if form else json.loads(text)
    finally:
        conn.close()


def _login():
    cookie, answer = _call("GET", "/api/session")
    if LAB_USER:
        form = {"user": LAB_USER, "password": LAB_PASSWORD, "csrf_token": answer["csrf_token"]}
        cookie, _ = _call("POST", "/login", cookie, form=form)
        return _call("GET", "/api/session", cookie)
    return _call("POST", "/api/login", cookie, answer["csrf_token"], {"pin": PIN})


@schemathesis.auth(refresh_interval=None)
class Session:
    def get(self, case, context):
        cookie, answer = _login()
        return cookie, answer["csrf_token"]

    def set(self, case, data, context):
        cookie, token = data
        case.cookies = {**(case.cookies or {}), "session": cookie}
        case.headers = {**(case.headers or {}), "X-CSRF-Token": token}
        if LAB_TOKEN:
            case.headers["Authorization"] = f"Bearer {LAB_TOKEN}"
