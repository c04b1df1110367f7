"""Bundles sent to a lab (docs/lab.md): one at a time over HTTP(S), each kept until the lab confirms it.

On an appliance whose kernel command line names a lab (ssdbench.upload=URL, ssdbench.token=T), the runner
service writes each run's bundle, as it ends, into the upload queue on the data partition (so on the stick), and
sends it; a bundle the lab has not confirmed stays queued (one it refuses as not a bundle that verifies is kept
beside the queue, as NAME.zip.refused) and is tried again while no run is active, after a
wait that doubles from RETRY_FIRST_S to RETRY_MAX_S. The lab confirms a bundle by answering its sha256.

The token travels only in the Authorization header. It is never written to a file, a log or a message here,
and the runner passes it to no child (system/redact drops $SSDBENCH_TOKEN from fio's environment).
"""

import hashlib
import http.client
import json
import os
import time
import urllib.parse

from ..errors import SsdbenchError
from ..system import durable
from . import bundle

QUEUE_DIR = "upload-queue"
TOKEN_VAR = "SSDBENCH_TOKEN"
RETRY_FIRST_S = 10
RETRY_MAX_S = 600
TIMEOUT_S = 120
PATH = "/lab/bundles"


class UploadError(SsdbenchError):
    """A bundle the lab did not confirm. `final`: the lab refused it (no retry would help)."""

    def __init__(self, message, final=False):
        super().__init__(message)
        self.final = final


def lab_url(url):
    """The lab's base URL, checked: http or https, a host, nothing after the path."""
    parts = urllib.parse.urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise SsdbenchError(f"the lab's URL must be http(s)://HOST[:PORT][/PATH], not {url!r}")
    return parts


def token(given=None):
    found = given or os.environ.get(TOKEN_VAR)
    if not found:
        raise SsdbenchError(f"give the appliance's token: --token T, or ${TOKEN_VAR}")
    return found


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(bundle.BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def send(path, url, secret, timeout=TIMEOUT_S):
    """Send one bundle to the lab at `url`; returns the lab's answer once it confirmed this bundle's sha256:
    {"sha256", "stored" (false: it had it already), "runs": the lab's run ids}."""
    parts = lab_url(url)
    digest = _sha256(path)
    connection = (http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection)(
        parts.hostname, parts.port, timeout=timeout
    )
    try:
        with open(path, "rb") as body:
            connection.request(
                "POST",
                parts.path.rstrip("/") + PATH,
                body=body,
                headers={
                    "Authorization": f"Bearer {secret}",
                    "Content-Type": "application/zip",
                    "Content-Length": str(os.path.getsize(path)),
                },
            )
            response = connection.getresponse()
            text = response.read(1 << 20)
    except (OSError, http.client.HTTPException) as exc:
        raise UploadError(f"the lab at {parts.netloc} did not answer: {exc}") from exc
    finally:
        connection.close()
    try:
        answer = json.loads(text)
    except ValueError:
        answer = {}
    if response.status in (200, 201) and answer.get("sha256") == digest:
        return answer
    reason = answer.get("error") or f"HTTP {response.status} {response.reason}"
    # Too large, or not a bundle that verifies: no retry would change it. A wrong token may be put right.
    raise UploadError(f"the lab refused it: {reason}", final=response.status in (413, 422))


def send_retrying(path, url, secret, attempts, wait=time.sleep, log=None):
    """send(), tried up to `attempts` times while the failure may pass (a network or a lab that is down), waiting
    RETRY_FIRST_S, then twice as long each time."""
    delay = RETRY_FIRST_S
    for attempt in range(1, attempts + 1):
        try:
            return send(path, url, secret)
        except UploadError as exc:
            if exc.final or attempt == attempts:
                raise
            if log:
                log(f"{os.path.basename(path)}: {exc}; trying again in {delay} s")
            wait(delay)
            delay = min(delay * 2, RETRY_MAX_S)
    raise AssertionError("unreachable")


class Queue:
    """The runner's upload queue: bundles on the data partition until the lab confirms them."""

    def __init__(self, url, secret, clock=time.monotonic):
        lab_url(url)
        self.url, self.secret, self.clock = url, secret, clock
        self.delay, self.next_try = RETRY_FIRST_S, 0.0

    def after_run(self, db, data_dir, run_id, log):
        """The run's bundle into the queue, then send what the queue holds."""
        folder = os.path.join(data_dir, QUEUE_DIR)
        os.makedirs(folder, exist_ok=True)
        try:
            path = bundle.write(db, data_dir, run_id, folder)
        except SsdbenchError as exc:
            log(f"run {run_id}: not queued for the lab: {exc}")
            return
        log(f"run {run_id}: {os.path.basename(path)} queued for the lab")
        self.next_try = 0.0
        self.drain(data_dir, log)

    def drain(self, data_dir, log):
        """Send the queued bundles, oldest first, when the wait after the last failure is over; each the lab
        confirms leaves the queue. Called between runs, never during one."""
        folder = os.path.join(data_dir, QUEUE_DIR)
        if self.clock() < self.next_try or not os.path.isdir(folder):
            return
        queued = sorted((e for e in os.scandir(folder) if e.name.endswith(".zip")), key=lambda e: e.stat().st_mtime)
        for entry in queued:
            try:
                answer = send(entry.path, self.url, self.secret)
            except UploadError as exc:
                if exc.final:  # kept on the stick, out of the queue, for someone to look at
                    os.replace(entry.path, entry.path + ".refused")
                    log(f"{entry.name}: {exc}; kept as {entry.name}.refused")
                    continue
                self.next_try = self.clock() + self.delay
                log(f"{entry.name}: not uploaded ({exc}); kept in the queue, next try in {self.delay} s")
                self.delay = min(self.delay * 2, RETRY_MAX_S)
                return
            os.unlink(entry.path)
            durable.sync_dir(folder)
            runs = ", ".join(map(str, answer["runs"]))
            log(f"{entry.name}: {'uploaded' if answer['stored'] else 'already in the lab'} (lab runs {runs})")
        self.delay = RETRY_FIRST_S
