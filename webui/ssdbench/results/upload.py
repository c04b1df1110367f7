"""Bundles sent to a lab (docs/lab.md): one at a time over HTTP(S), each kept until the lab confirms it.

On an appliance whose kernel command line names a lab (ssdbench.upload=URL, ssdbench.token=T), the runner
service writes each run's bundle, as it ends, into the upload queue on the data partition (so on the stick), and
sends it; a bundle the lab has not confirmed stays queued and is tried again while no run is active. The lab
confirms a bundle by answering its sha256. When the lab cannot be reached, the whole queue waits, from RETRY_FIRST_S
to RETRY_MAX_S, doubling. When the lab answers one bundle with an error, that bundle waits as long, on its own,
and the queue goes on to the next: one bundle the lab cannot take never holds back the runs after it. One it
refuses as not a bundle that verifies is set aside as NAME.zip.refused; one it has answered with an error
MAX_TRIES times, as NAME.zip.stuck. A lab that answers 429 or 503 with Retry-After (busy, or the token's hourly
quota met) is waited out: the whole queue waits as long as it asks, and no try is counted. Each failure's reason
is kept beside the bundle (NAME.zip.json), and the appliance's History shows what was set aside or waits (held()).

The token travels only in the Authorization header, so only over https:// (plain http:// only to this
machine's loopback, or when told --insecure). It is never written to a file, a log or a message here, and the
runner passes it to no child (system/redact drops $SSDBENCH_TOKEN from fio's environment).

A send has a total deadline, which bounds every read and write, the answer's too: at the deadline the
connection is shut, so a lab that trickles its answer a byte at a time cannot hold it. It also gives up as soon
as `interrupted()` says so (the runner: a run was queued, or a signal came), between blocks of the body and
while it waits for the answer: a lab that hangs never keeps a queued run waiting, and no upload runs beside a
run. The answer is checked, its every field, before a bundle leaves the queue. A lab with a CA of its own is
checked against it as well as the system's (`cafile`; on the appliance, SSDBENCH/lab-ca.pem on the stick).
"""

import email.utils
import hashlib
import http.client
import ipaddress
import json
import math
import os
import select
import socket
import threading
import time
import urllib.parse

from ..errors import SsdbenchError
from ..system import durable, tls
from . import bundle

QUEUE_DIR = "upload-queue"
TOKEN_VAR = "SSDBENCH_TOKEN"
RETRY_FIRST_S = 10
RETRY_MAX_S = 600
# A bundle the lab answered with an error this many times is set aside: about an hour of tries (10 s doubling up to
# 10 min), long enough for a lab's restart or a fix to be deployed, and a lab that answers every bundle so still
# keeps each on the stick.
MAX_TRIES = 12
# A busy lab's Retry-After is waited out, never counted as a try: the lab's hourly quota asks for an hour at most.
RETRY_AFTER_MAX_S = 3600
SET_ASIDE = (".refused", ".stuck")
NOTE = ".json"
# A send's deadline: a minute and a half to connect and for the lab to verify, plus the body at 100 kB/s. Each
# block of the body, and each read of the answer, must also go through within STEP_S.
TIMEOUT_S = 90
MIN_RATE = 100_000
STEP_S = 10
SEND_BLOCK = 64 << 10
ANSWER_BYTES = 64 << 10
PATH = "/lab/bundles"


class UploadError(SsdbenchError):
    """A bundle the lab did not confirm. `final`: the lab refused it (no retry would help). `status`: the lab's
    HTTP status, None when it did not answer (the network, or a lab that is down: every bundle alike).
    `retry_after`: the seconds a lab that is busy (429, 503) asked to wait, or None."""

    def __init__(self, message, final=False, status=None, retry_after=None):
        super().__init__(message)
        self.final, self.status, self.retry_after = final, status, retry_after


def lab_url(url, insecure=False):
    """The lab's base URL, checked: https (or http to this machine, or with `insecure`), a host, nothing after
    the path."""
    parts = urllib.parse.urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise SsdbenchError(f"the lab's URL must be https://HOST[:PORT][/PATH], not {url!r}")
    if parts.scheme == "http" and not insecure and not loopback(parts.hostname):
        raise SsdbenchError(
            f"{url}: http:// would send the token in clear across the network: use the lab's https:// URL, "
            "or --insecure (ssdbench.insecure=1 on the appliance) for a lab on a network you trust"
        )
    return parts


def loopback(host):
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def token(given=None, path=None):
    """The appliance's token: given, read from a file (its first line), or from $SSDBENCH_TOKEN."""
    if path is not None:
        try:
            with open(path) as f:
                given = f.readline().strip()
        except OSError as exc:
            raise SsdbenchError(f"cannot read the token file {path}: {exc.strerror}") from exc
    found = given or os.environ.get(TOKEN_VAR)
    if not found:
        raise SsdbenchError(f"give the appliance's token: --token-file FILE, or ${TOKEN_VAR}")
    return found


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(bundle.BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def send(path, url, secret, insecure=False, interrupted=lambda: False, clock=time.monotonic, cafile=None):
    """Send one bundle to the lab at `url`; returns the lab's answer once it confirmed this bundle's sha256:
    {"sha256", "stored" (false: it had it already), "runs": the lab's run ids}."""
    parts = lab_url(url, insecure)
    digest = _sha256(path)
    size = os.path.getsize(path)
    allowed = TIMEOUT_S + size / MIN_RATE
    deadline = clock() + allowed
    if parts.scheme == "https":
        try:
            context = tls.context(cafile)
        except OSError as exc:
            raise UploadError(f"the lab's CA certificate {cafile}: {exc}") from exc
        connection = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=STEP_S, context=context)
    else:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=STEP_S)
    late = f"not done within {allowed:.0f} s (the deadline of a bundle of {size} bytes)"
    shut = threading.Event()
    watchdog = threading.Timer(allowed, _shut, (connection, shut))
    watchdog.start()

    def going_on():
        if interrupted():
            raise UploadError("set aside: a run was queued, or the service is stopping")
        if clock() > deadline or shut.is_set():
            raise UploadError(late)

    try:
        connection.putrequest("POST", parts.path.rstrip("/") + PATH)
        for name, value in (
            ("Authorization", f"Bearer {secret}"),
            ("Content-Type", "application/zip"),
            ("Content-Length", str(size)),
        ):
            connection.putheader(name, value)
        connection.endheaders()
        with open(path, "rb") as body:
            for block in iter(lambda: body.read(SEND_BLOCK), b""):
                going_on()
                connection.send(block)
        # The lab verifies the bundle before it answers: wait, a second at a time, for its first byte.
        while not select.select([connection.sock], [], [], 1)[0]:
            going_on()
        response = connection.getresponse()
        text = b""
        while len(text) < ANSWER_BYTES and (chunk := response.read1(ANSWER_BYTES - len(text))):
            going_on()
            text += chunk
        if shut.is_set():  # the answer cut short at the deadline
            raise UploadError(late)
    except (OSError, http.client.HTTPException) as exc:
        raise UploadError(late if shut.is_set() else f"the lab at {parts.netloc} did not answer: {exc}") from exc
    finally:
        watchdog.cancel()
        connection.close()
    try:
        answer = json.loads(text)
    except ValueError:
        answer = {}
    answer = answer if isinstance(answer, dict) else {}
    if response.status in (200, 201) and answer.get("sha256") == digest:
        if type(answer.get("stored")) is not bool or not _run_ids(answer.get("runs")):
            raise UploadError(f"the lab's answer is not one a lab gives: {text[:200]!r}", status=response.status)
        return answer
    reason = answer.get("error") if isinstance(answer.get("error"), str) else None
    reason = reason or f"HTTP {response.status} {response.reason}"
    # Too large, or not a bundle that verifies: no retry would change it. A wrong token may be put right.
    retry_after = _retry_after(response.getheader("Retry-After")) if response.status in (429, 503) else None
    raise UploadError(
        f"the lab refused it: {reason}",
        final=response.status in (413, 422),
        status=response.status,
        retry_after=retry_after,
    )


def _retry_after(value):
    """The seconds of a Retry-After header (delta-seconds, or an HTTP date), within 1..RETRY_AFTER_MAX_S; None
    when there is none that reads."""
    if not value:
        return None
    if value.strip().isdigit():
        seconds = int(value.strip())
    else:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, OverflowError):
            return None
    return min(max(1, math.ceil(seconds)), RETRY_AFTER_MAX_S)


def _shut(connection, shut):
    """The deadline: the connection shut under whatever read or write waits on it (the TCP socket beneath TLS,
    which another thread may shut)."""
    shut.set()
    if connection.sock is not None:
        try:
            socket.socket.shutdown(connection.sock, socket.SHUT_RDWR)
        except OSError:
            pass


def _run_ids(runs):
    return isinstance(runs, list) and bool(runs) and all(type(r) is int and r > 0 for r in runs)


def send_retrying(path, url, secret, attempts, insecure=False, wait=time.sleep, log=None, cafile=None):
    """send(), tried up to `attempts` times while the failure may pass (a network or a lab that is down), waiting
    RETRY_FIRST_S, then twice as long each time. A busy lab's Retry-After (429, 503) is waited out, as many times
    as there are attempts, without counting as one."""
    delay, attempt, busy = RETRY_FIRST_S, 1, 0
    while True:
        try:
            return send(path, url, secret, insecure, cafile=cafile)
        except UploadError as exc:
            asked = exc.retry_after is not None and busy < attempts
            if exc.final or (attempt == attempts and not asked):
                raise
            pause = exc.retry_after if asked else delay
            if log:
                log(f"{os.path.basename(path)}: {exc}; trying again in {pause} s")
            wait(pause)
            if asked:
                busy += 1
            else:
                attempt, delay = attempt + 1, min(delay * 2, RETRY_MAX_S)


class Queue:
    """The runner's upload queue: bundles on the data partition until the lab confirms them."""

    def __init__(self, url, secret, insecure=False, clock=time.monotonic, cafile=None):
        lab_url(url, insecure)
        self.url, self.secret, self.insecure, self.clock, self.cafile = url, secret, insecure, clock, cafile
        self.delay, self.next_try = RETRY_FIRST_S, 0.0
        self.waits = {}  # a bundle's name: when it may be tried again, after the lab answered it with an error

    def after_run(self, db, data_dir, run_id, log):
        """The run's bundle into the queue; the runner sends what the queue holds when it is next idle (drain)."""
        folder = os.path.join(data_dir, QUEUE_DIR)
        os.makedirs(folder, exist_ok=True)
        try:
            path = bundle.write(db, data_dir, run_id, folder)
        except SsdbenchError as exc:
            log(f"run {run_id}: not queued for the lab: {exc}")
            return
        log(f"run {run_id}: {os.path.basename(path)} queued for the lab")
        self.next_try = 0.0

    def drain(self, data_dir, log, interrupted=lambda: False):
        """Send the queued bundles, oldest first, each whose wait after its last failure is over, once the queue's
        wait after the lab was last out of reach is over; each the lab confirms leaves the queue. Called between
        runs, never during one: `interrupted()` ends a send the moment a run is queued, and the bundle stays
        queued."""
        folder = os.path.join(data_dir, QUEUE_DIR)
        if self.clock() < self.next_try or not os.path.isdir(folder):
            return
        queued = sorted((e for e in os.scandir(folder) if e.name.endswith(".zip")), key=lambda e: e.stat().st_mtime)
        for entry in queued:
            if self.clock() < self.waits.get(entry.name, 0.0):
                continue
            try:
                answer = send(entry.path, self.url, self.secret, self.insecure, interrupted, cafile=self.cafile)
            except UploadError as exc:
                if interrupted():
                    return
                if exc.status is None:  # nothing answered: the network or the lab, which every bundle waits for
                    self.next_try = self.clock() + self.delay
                    log(f"{entry.name}: not uploaded ({exc}); kept in the queue, next try in {self.delay} s")
                    self.delay = min(self.delay * 2, RETRY_MAX_S)
                    return
                if exc.retry_after is not None:  # a busy lab, or this token's quota: every bundle waits, none fails
                    self.next_try = self.clock() + exc.retry_after
                    log(f"{entry.name}: not uploaded ({exc}); the lab asks to wait {exc.retry_after} s, no try counted")
                    return
                self._failed(entry, exc, log)
                continue
            os.unlink(entry.path)
            durable.remove_file(entry.path + NOTE)
            durable.sync_dir(folder)
            self.waits.pop(entry.name, None)
            runs = ", ".join(map(str, answer["runs"]))
            log(f"{entry.name}: {'uploaded' if answer['stored'] else 'already in the lab'} (lab runs {runs})")
        self.delay = RETRY_FIRST_S

    def _failed(self, entry, exc, log):
        """A bundle the lab answered with an error: refused (final), stuck (MAX_TRIES), or waiting on its own."""
        tries = _note(entry.path + NOTE).get("tries", 0) + 1
        durable.replace_file(entry.path + NOTE, json.dumps({"tries": tries, "error": str(exc)}))
        aside = ".refused" if exc.final else ".stuck" if tries >= MAX_TRIES else None
        if aside:  # kept on the stick, out of the queue, for someone to look at
            os.replace(entry.path, entry.path + aside)
            self.waits.pop(entry.name, None)
            log(f"{entry.name}: {exc}; after {tries} tries, kept as {entry.name}{aside}")
            return
        wait = min(RETRY_FIRST_S * 2 ** (tries - 1), RETRY_MAX_S)
        self.waits[entry.name] = self.clock() + wait
        log(f"{entry.name}: not uploaded ({exc}); try {tries} of {MAX_TRIES}, next in {wait} s; the queue goes on")


def _note(path):
    """What the last failure of a queued bundle left beside it: {"tries", "error"}, or {}."""
    try:
        with open(path) as f:
            note = json.load(f)
    except (OSError, ValueError):
        return {}
    return note if isinstance(note, dict) and type(note.get("tries")) is int else {}


def held(data_dir):
    """The bundles the lab has not taken that failed at least once, oldest first: [{"name", "state" ("waiting",
    "refused" or "stuck"), "tries", "error"}] (a bundle refused before the reason was kept has tries 1, error
    None)."""
    folder = os.path.join(data_dir, QUEUE_DIR)
    if not os.path.isdir(folder):
        return []
    found = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.stat().st_mtime):
        name, _, aside = entry.name.rpartition(".zip")
        if aside not in ("", *SET_ASIDE) or not name:
            continue
        note = _note(os.path.join(folder, name + ".zip" + NOTE))
        if aside or note:
            state = aside.lstrip(".") or "waiting"
            found.append(
                {"name": f"{name}.zip", "state": state, "tries": note.get("tries", 1), "error": note.get("error")}
            )
    return found
