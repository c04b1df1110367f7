"""Schemathesis's login for the API contract test (loaded through SCHEMATHESIS_HOOKS): a fresh session and
its CSRF token for every request, so that the fuzzer's own POST /api/logout cannot end the test's session.
It logs in from 127.0.0.2: the fuzzer's wrong PINs come from 127.0.0.1, and their throttle (which refuses
even the right PIN for a minute) cannot lock the test out."""

import http.client
import http.cookies
import json
import os

import schemathesis

PORT = int(os.environ["SSDBENCH_TEST_PORT"])
PIN = os.environ["SSDBENCH_PIN"]


def _call(method, path, cookie=None, token=None, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60, source_address=("127.0.0.2", 0))
    headers = {"Content-Type": "application/json"}
    if cookie:
        headers["Cookie"] = f"session={cookie}"
    if token:
        headers["X-CSRF-Token"] = token
    try:
        conn.request(method, path, body=json.dumps(body) if body else None, headers=headers)
        response = conn.getresponse()
        answer = json.loads(response.read())
        if response.status != 200:
            raise RuntimeError(f"{method} {path}: {response.status} {answer}")
        jar = http.cookies.SimpleCookie(response.getheader("Set-Cookie") or "")
        return jar["session"].value if "session" in jar else cookie, answer
    finally:
        conn.close()


@schemathesis.auth(refresh_interval=None)
class Session:
    def get(self, case, context):
        cookie, answer = _call("GET", "/api/session")
        cookie, answer = _call("POST", "/api/login", cookie, answer["csrf_token"], {"pin": PIN})
        return cookie, answer["csrf_token"]

    def set(self, case, data, context):
        cookie, token = data
        case.cookies = {**(case.cookies or {}), "session": cookie}
        case.headers = {**(case.headers or {}), "X-CSRF-Token": token}
