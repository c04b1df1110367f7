"""The appliance's wall clock: never before the image was built, then set from NTP, else from the lab.

A PC whose CMOS battery is flat starts in 2000 or so, and one that dual-boots Windows keeps its RTC in local
time: TLS would refuse a lab's certificate as not yet valid, and every run would carry wrong times. At boot
(S20dhcp: `ssdbench clock floor`) a clock behind the image's build date (/etc/ssdbench-release's BUILD_ID) is
moved up to it. Each DHCP lease (udhcpc.script: `ssdbench clock sync`) then asks the NTP servers the lease
named (option 42), else pool.ntp.org, and the first that answers sets the clock. If none does and the appliance
uploads to an https:// lab, the lab's Date header sets it, read only once the lab's certificate has checked
out against the clock as it is, which is the build date at least. No source may set a time before the build
date. The RTC is never written: on a PC that dual-boots Windows it holds local time.

What set the clock goes to STATE_FILE, and each run's environment records it (`recorded`).
"""

import datetime
import email.utils
import fcntl
import http.client
import json
import os
import socket
import struct
import time
import urllib.parse

from .. import RELEASE_FILE
from . import durable, tls
from . import settings as settings_file

STATE_FILE = "/run/ssdbench/clock.json"
# udhcpc.script makes it as it starts a sync, which removes it as it ends: unattended mode waits for the
# clock before its first run, at most SYNC_WAIT_S.
SYNCING = "/run/ssdbench/clock.syncing"
SYNC_WAIT_S = 120
# S50ssdbench writes the settings (the lab's URL among them) a little after the first lease, at most.
SETTINGS_WAIT_S = 60
POOL = "pool.ntp.org"
NTP_PORT = 123
NTP_EPOCH = 2208988800  # 1900-01-01 to 1970-01-01
TRY_S = 2
TRIES = 3
LAB_TIMEOUT_S = 20


class ClockError(Exception):
    pass


def _settime(when):
    time.clock_settime(time.CLOCK_REALTIME, when)


def iso(when):
    return datetime.datetime.fromtimestamp(when, datetime.UTC).isoformat(timespec="seconds")


def build_time(release=RELEASE_FILE):
    """The image's build date (BUILD_ID=20260801T101500Z), as seconds since 1970; None without one."""
    try:
        with open(release) as f:
            for line in f:
                if line.startswith("BUILD_ID="):
                    stamp = datetime.datetime.strptime(line.split("=", 1)[1].strip(), "%Y%m%dT%H%M%SZ")
                    return stamp.replace(tzinfo=datetime.UTC).timestamp()
    except (OSError, ValueError):
        pass
    return None


def recorded(state=STATE_FILE):
    """What set the clock, as the last floor or sync wrote it."""
    try:
        with open(state) as f:
            return json.load(f)
    except (OSError, ValueError):
        return "unavailable: not set by ssdbench (not the appliance)"


def _write(record, state):
    os.makedirs(os.path.dirname(state), exist_ok=True)
    durable.replace_file(state, json.dumps(record, indent=1) + "\n")
    return record


def floor(settime=_settime, release=RELEASE_FILE, state=STATE_FILE):
    """At boot: a clock behind the build date goes to the build date. A sync may come first (udev starts DHCP
    on the boot's interfaces as it starts, before S20dhcp): then it has done this already, and what it set the
    clock from stays recorded."""
    if os.path.exists(state):
        return recorded(state)
    built, now = build_time(release), time.time()
    if built is not None and now < built:
        settime(built)
        return _write({"source": "build date", "set_to": iso(built), "rtc_read": iso(now)}, state)
    return _write({"source": "rtc", "rtc_read": iso(now)}, state)


def ntp_offset(server, port=NTP_PORT, timeout=TRY_S):
    """How far our clock is behind one NTP server (SNTP, RFC 4330), in seconds."""
    family, _, _, _, address = socket.getaddrinfo(server, port, type=socket.SOCK_DGRAM)[0]
    nonce = os.urandom(8)  # our transmit timestamp: the server sends it back as its answer's origin
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        sent, started = time.time(), time.monotonic()
        sock.sendto(bytes([0x23]) + bytes(39) + nonce, address)  # leap 0, version 4, mode 3 (client)
        while (answer := sock.recv(512))[24:32] != nonce:  # a late answer to an earlier try
            pass
        received = sent + time.monotonic() - started
    if len(answer) < 48 or answer[0] & 7 != 4 or answer[0] >> 6 == 3 or not 1 <= answer[1] <= 15:
        raise ClockError("its answer is not a synchronised server's")
    words = struct.unpack("!32xIIII", answer[:48])  # its receive and transmit timestamps: seconds, fraction
    server_in, server_out = (s - NTP_EPOCH + f / 2**32 for s, f in (words[:2], words[2:]))
    return ((server_in - sent) + (server_out - received)) / 2


def lab_date(url, cafile=None, timeout=LAB_TIMEOUT_S):
    """The time in the Date header of an https:// lab's answer, once its certificate has checked out."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "https":
        raise ClockError("not an https:// lab: nothing vouches for its Date")
    connection = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=timeout, context=tls.context(cafile))
    try:
        connection.request("HEAD", parts.path or "/")
        date = connection.getresponse().getheader("Date")
    finally:
        connection.close()
    try:
        return email.utils.parsedate_to_datetime(date).timestamp()
    except (TypeError, ValueError) as exc:
        raise ClockError(f"its Date header is not a date: {date!r}") from exc


def lab_from_settings(settings=settings_file.ENV_FILE, wait_s=SETTINGS_WAIT_S):
    """The lab's URL from the boot's settings, which S50ssdbench may write a little after the first lease."""
    deadline = time.monotonic() + wait_s
    while not os.path.exists(settings) and time.monotonic() < deadline:
        time.sleep(1)
    try:
        return settings_file.services(settings).get("SSDBENCH_UPLOAD") or None
    except OSError:
        return None


def wait_for_sync(syncing=SYNCING, wait_s=SYNC_WAIT_S):
    """Until the sync that a lease started has ended, at most wait_s: a run started before it would carry the
    times of a clock about to be set."""
    deadline = time.monotonic() + wait_s
    while os.path.exists(syncing) and time.monotonic() < deadline:
        time.sleep(0.5)


def sync(servers, lab=None, cafile=None, settime=_settime, release=RELEASE_FILE, state=STATE_FILE, port=NTP_PORT):
    """Set the clock from the first NTP server of `servers`, then POOL, that answers with a time after the build
    date; else from the https:// `lab`'s Date (a callable: asked only then), trusting `cafile` too if that file is
    there by then (S50ssdbench copies the lab's CA from the stick with the settings). One sync at a time."""
    try:
        return _sync(servers, lab, cafile, settime, release, state, port)
    finally:
        if state == STATE_FILE and os.path.exists(SYNCING):
            os.unlink(SYNCING)


def _sync(servers, lab, cafile, settime, release, state, port):
    floor(settime, release, state)  # a lease that came before S20dhcp's floor: the floor first
    built = build_time(release) or 0
    os.makedirs(os.path.dirname(state), exist_ok=True)
    with open(state + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        tried = []
        for server in [*servers, POOL]:
            for _ in range(TRIES):
                try:
                    offset = ntp_offset(server, port)
                    break
                except (OSError, ClockError) as exc:
                    error = exc
            else:
                tried.append(f"NTP {server}: {error}")
                continue
            if (when := time.time() + offset) < built:
                tried.append(f"NTP {server}: its time, {iso(when)}, is before the image was built")
                continue
            settime(time.time() + offset)
            return _write({"source": "ntp", "server": server, "offset_s": round(offset, 3), "tried": tried}, state)
        url = lab() if lab else None
        if url:
            try:
                when = lab_date(url, cafile if cafile and os.path.exists(cafile) else None)
                if when < built:
                    raise ClockError(f"its Date, {iso(when)}, is before the image was built")
                offset = when - time.time()
                settime(when)
                record = {"source": "lab", "server": url, "offset_s": round(offset, 3), "tried": tried}
                return _write(record, state)
            except (OSError, http.client.HTTPException, ClockError) as exc:
                tried.append(f"the lab's Date ({url}): {exc}")
        return _write({**_previous(state), "not_synced": tried}, state)


def said(record):
    """One line for the console and the log: what set the clock."""
    source = record.get("source")
    if record.get("not_synced"):
        return f"not synced ({'; '.join(record['not_synced'])}); kept from the {source}"
    if source in ("ntp", "lab"):
        what = "NTP server" if source == "ntp" else "lab's Date,"
        return f"set from the {what} {record['server']}: {record['offset_s']:+.1f} s"
    if source == "build date":
        return f"the RTC read {record['rtc_read']}, before the image was built: set to {record['set_to']}"
    return f"from the RTC, {record['rtc_read']}"


def _previous(state):
    found = recorded(state)
    return {k: v for k, v in found.items() if k != "not_synced"} if isinstance(found, dict) else {"source": "rtc"}
