"""An upload becomes a kept bundle: received whole, verified as the appliance verifies it, every value the index
writes checked (admit), then kept once.

The order makes a crash at any moment safe: the file is synced before it is linked into the store, and linked
before its rows commit, both under one advisory lock on its sha256. A row is therefore never without its file.
An upload refused at any point leaves nothing: its part file is removed, and a file linked into the store whose
rows then failed to commit is removed under the same lock. A file that a crash left without its row is removed
by the next server's sweep (shelf), and `ssdbench lab sweep` finds any other in the whole store. The same bundle
sent twice, even at once by two clients, is one row (the sha256 is the bundle's key) and one file, and both
clients are told it is there.
"""

import contextlib
import errno
import os
import threading

from ..results import bundle
from . import access, admit, audit, index, shelf

# A full suite's bundle is some hundreds of MB: a limit well above, still far from filling a disk at one request.
MAX_BUNDLE_BYTES = 4 << 30
# The uploads one token may have in flight, on every server of the lab: an appliance sends one at a time, and a
# token that sends many slowly holds no more than these of the servers' threads.
IN_FLIGHT = 4
# What one token's bundles may hold of the store in all (a full suite's bundle is some hundreds of MB: a thousand of
# them), and the free space below which the lab takes no upload: the larger of a share of its disk and a size.
STORED_BYTES = 256 << 30
FREE_FLOOR_BYTES = 1 << 30
FREE_FLOOR_SHARE = 0.02
# The advisory locks (PostgreSQL's pair of 32-bit keys: this plus a slot, the appliance's id) that count them.
IN_FLIGHT_LOCK = 0x55D8E4C2
# What one token may send in an hour: an appliance ends a run every few hours at most, a queue that waited for
# the network sends a few dozen; a full suite's bundle is some hundreds of MB.
UPLOADS_AN_HOUR = 60
BYTES_AN_HOUR = 16 << 30
# One bundle admitted at a time in a server process: reading and checking one holds Python's lock almost
# throughout, so several at once only take turns, each turn evicting the others' documents from the caches. One
# at a time took 56 uploads a second where eight took 51 (make bench, alternated runs); bodies still arrive, and
# rows still commit, side by side.
_ADMITTING = threading.Lock()


def receive(conn, hold, stream, length, token, fresh, address=None):
    """Take one upload: (answer document, HTTP status, headers). 201: kept now; 200: it was there already; 400:
    its body ended short; 401: no valid token; 413: too large; 422: not a bundle that verifies (nothing of it is
    kept); 429: the token has IN_FLIGHT uploads going already, or has sent its hour's quota (with Retry-After);
    507: the token's bundles fill its STORED_BYTES, or the store's disk is at its floor, or full.
    `fresh()` is a new connection to the lab's database, for the cleaning up after `conn` itself failed. Each
    answer to a valid token is in the audit log, under its appliance's name, with the client's `address`."""
    appliance = access.appliance(conn, token)
    if appliance is None:
        return {"error": "no valid token: ask the lab for one (ssdbench lab token add NAME)"}, 401, {}
    body, status, headers = _take(conn, hold, stream, length, appliance, fresh)
    told = f"bundle {body['sha256']}, runs {', '.join(map(str, body['runs']))}" if "sha256" in body else body["error"]
    keep = audit.record_refusal if status in (429, 507) else audit.record
    keep(conn, appliance["name"], "upload", str(status), told, address)
    return body, status, headers


def _take(conn, hold, stream, length, appliance, fresh):
    with _in_flight(conn, appliance["id"]) as slot:
        if slot is None:
            return {"error": f"this token has {IN_FLIGHT} uploads in flight: send one at a time"}, 429, {}
        full = _room(conn, hold.store_dir, appliance["id"], length)
        if full:
            return {"error": full}, 507, {}
        wait = _quota(conn, appliance["id"], length)
        if wait:
            error = f"this token has sent its hour's {UPLOADS_AN_HOUR} uploads or {BYTES_AN_HOUR} bytes"
            return {"error": error}, 429, {"Retry-After": str(wait)}
        return (*_receive(conn, hold, stream, length, appliance, fresh), {})


def _room(conn, store_dir, appliance_id, length):
    """Why an upload of `length` bytes may not be kept (507), or None: the token's bundles would pass its quota,
    or the store's disk would fall below its floor, which keeps room for the pages, the database and the other
    tokens' uploads (a full disk answered everybody with 400)."""
    kept = conn.execute("SELECT stored_bytes FROM appliances WHERE id = %s", (appliance_id,)).fetchone()
    if kept["stored_bytes"] + length > STORED_BYTES:
        return f"this token's bundles would pass its quota of {STORED_BYTES >> 30} GiB: ask the lab's operator"
    disk = os.statvfs(store_dir)
    floor = max(FREE_FLOOR_BYTES, disk.f_blocks * disk.f_frsize * FREE_FLOOR_SHARE)
    if disk.f_bavail * disk.f_frsize - length < floor:
        return "the lab's disk is nearly full: it takes no upload until its operator makes room"
    return None


def _quota(conn, appliance_id, length):
    """Count an upload of `length` bytes in the token's hour, or, over its quota, the seconds until the oldest
    upload of that hour leaves it (0 when it is counted). One statement: an upload makes a dozen round trips to
    the database, and this was five of them."""
    hour = conn.execute(
        """WITH gone AS (DELETE FROM uploads WHERE appliance_id = %(id)s AND at <= now() - interval '1 hour'),
           hour AS (SELECT count(*) AS uploads, coalesce(sum(bytes), 0) AS bytes,
                           ceil(extract(epoch FROM min(at) + interval '1 hour' - now())) AS wait
                    FROM uploads WHERE appliance_id = %(id)s AND at > now() - interval '1 hour'),
           counted AS (INSERT INTO uploads (appliance_id, bytes)
                       SELECT %(id)s, %(bytes)s FROM hour
                       WHERE uploads < %(most)s AND bytes + %(bytes)s <= %(most_bytes)s RETURNING 1)
           SELECT wait, EXISTS (SELECT FROM counted) AS counted FROM hour""",
        {"id": appliance_id, "bytes": length, "most": UPLOADS_AN_HOUR, "most_bytes": BYTES_AN_HOUR},
    ).fetchone()
    return 0 if hour["counted"] else max(1, int(hour["wait"] or 1))


@contextlib.contextmanager
def _in_flight(conn, appliance_id):
    """One of the token's IN_FLIGHT slots, held (a session advisory lock, which a connection that dies lets go
    of) until the upload is answered; None when all are taken."""
    for slot in range(IN_FLIGHT):
        key = (IN_FLIGHT_LOCK + slot, appliance_id)
        if conn.execute("SELECT pg_try_advisory_lock(%s, %s) AS got", key).fetchone()["got"]:
            try:
                yield slot
            finally:
                if not conn.broken:
                    conn.execute("SELECT pg_advisory_unlock(%s, %s)", key)
            return
    yield None


def _receive(conn, hold, stream, length, appliance, fresh):
    try:
        part, sha256 = hold.receive(stream, length, MAX_BUNDLE_BYTES)
    except shelf.TooLarge as exc:
        return {"error": f"refused: {exc}"}, 413
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # the disk, not the client
            return {"error": "the lab's disk is full: nothing was kept; its operator must make room"}, 507
        # The client stopped, or fell so far behind that the server cut it (web/lab_server).
        return {"error": f"refused, nothing was kept: {exc}"}, 400
    try:
        with _ADMITTING:
            manifest, runs = admit.documents(part)
            host, rows = admit.index_rows(manifest, runs)
        manifest = admit.kept_manifest(manifest, host)
    except (bundle.BundleError, admit.Refused) as exc:
        os.unlink(part)
        return {"error": f"refused, nothing was kept: {str(exc).replace(part, 'the bundle')}"}, 422
    except BaseException:
        os.unlink(part)
        raise
    held = hold.hold(part, sha256)
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (shelf.lock_key(sha256),))
            hold.place(held, sha256)
            made = index.add_bundle(conn, sha256, length, manifest, host, rows, appliance)
    except BaseException as exc:
        # Its rows did not commit: nor may its file stay. On a connection of its own, as the upload's may be what
        # died; if the database cannot be reached at all, `lab sweep` finds the file and `lab reindex` takes it.
        with contextlib.closing(fresh()) as own:
            forget(own, hold.store_dir, sha256)
        if _unstorable(exc):
            why = f"the lab's database cannot hold a value of it (SQLSTATE {exc.sqlstate})"
            return {"error": f"refused, nothing was kept: {why}"}, 422
        raise
    finally:
        hold.release(held)
    if made is None:
        return {"sha256": sha256, "stored": False, "runs": index.bundle_runs(conn, sha256)}, 200
    return {"sha256": sha256, "stored": True, "runs": made}, 201


def _unstorable(exc):
    """Whether the database refused a value of the bundle itself (SQLSTATE class 22, a data exception, or 54, a
    limit such as an index row's size) that admission let through: the sender's fault, told as such (422), never a
    500 that its appliance would retry for an hour. Its message, which may quote the value, is not."""
    return str(getattr(exc, "sqlstate", None) or "")[:2] in ("22", "54")


def forget(conn, store_dir, sha256):
    """Remove a bundle's file from the store unless its row has committed (under the lock its row commits under,
    so that an upload of the same bundle committing now keeps its file)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (shelf.lock_key(sha256),))
        if not index.has_bundle(conn, sha256):
            shelf.remove(store_dir, sha256)


def remove(conn, store_dir, sha256):
    """A bundle gone from the lab (`ssdbench lab remove`): its rows, and each of its models' bench row picked
    again from the runs left, then its file. Under the lock its rows commit under, and the rows first, so that a
    row is never without its file. Returns the lab's ids of the runs it held."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (shelf.lock_key(sha256),))
        removed = index.remove_bundle_rows(conn, sha256)
    forget(conn, store_dir, sha256)
    return removed


def sweep(conn, store_dir):
    """What dead servers left: each bundle one of them linked into the store is put aside in quarantine unless its
    row committed, never deleted: after a restore of the store from files, a row the restored database lacks is
    `lab reindex`'s to give back (docs/lab.md)."""
    return shelf.sweep(store_dir, lambda sha256: _set_aside(conn, store_dir, sha256))


def _set_aside(conn, store_dir, sha256):
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (shelf.lock_key(sha256),))
        if not index.has_bundle(conn, sha256):
            shelf.quarantine(store_dir, sha256)


def sweep_store(conn, store_dir, move=False):
    """The store's files without a row (`ssdbench lab sweep`): listed, or with `move` put aside in quarantine,
    never deleted. After the documented restore (the database, then the store) they are the newest uploads, whose
    appliances have dropped their copies: `ssdbench lab reindex` gives them their rows back. Returns (files seen,
    the sha256 of those without a row)."""
    seen, stray = 0, []
    for sha256 in shelf.kept(store_dir):
        seen += 1
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (shelf.lock_key(sha256),))
            if index.has_bundle(conn, sha256):
                continue
            stray.append(sha256)
            if move:
                shelf.quarantine(store_dir, sha256)
    return seen, stray


def reindex(conn, store_dir, appliance_name):
    """Rows for every store file that has none, from the bundle itself, sent by `appliance_name` (made, with no
    valid token, if the lab has no such appliance): the index rebuilt from the store. Returns (the lab's ids of
    the runs indexed, [(sha256, why) of the files it cannot take]): those are left where they are."""
    appliance = access.appliance_named(conn, appliance_name)
    made, refused = [], []
    for sha256 in shelf.kept(store_dir):
        if index.has_bundle(conn, sha256):
            continue
        path = shelf.bundle_path(store_dir, sha256)
        try:
            manifest, runs = admit.documents(path)
            host, rows = admit.index_rows(manifest, runs)
        except (bundle.BundleError, admit.Refused) as exc:
            refused.append((sha256, str(exc).replace(path, "the bundle")))
            continue
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (shelf.lock_key(sha256),))
            added = index.add_bundle(
                conn, sha256, os.path.getsize(path), admit.kept_manifest(manifest, host), host, rows, appliance
            )
        made += added or []
    return made, refused
