"""The lab's bundles on disk, kept as they came and named by their sha256, and the folder where an upload is
written before it is kept.

    STORE/bundles/ab/<sha256>.zip     a kept bundle: whole, synced, and never changed
    STORE/incoming/<server>.lock      held (flock) by a live lab server for as long as it runs
    STORE/incoming/<server>/          that server's uploads being received: <random>.part while written, then
                                      <sha256>.<random>.zip once whole and verified, until the database
                                      says it is kept

An upload becomes a kept bundle by a hard link from the server's own folder, under an advisory lock on its
sha256 that the database row is committed under (receive). A server that dies (kill -9, a power cut) leaves its
folder behind, unlocked: the next server to start sweeps it, removing its parts and putting aside, in
STORE/quarantine/, every kept file it linked whose row never committed. So the store holds no half bundle, and no
bundle that the database does not list, and a sweep deletes no bundle.
Several servers may share one store (NFS included): each writes only in its own folder.
"""

import fcntl
import hashlib
import os
import re
import secrets
import shutil
import socket

from ..system import durable

BUNDLES = "bundles"
INCOMING = "incoming"
QUARANTINE = "quarantine"
BLOCK = 1 << 20
SHA256 = re.compile(r"[0-9a-f]{64}")


class TooLarge(Exception):
    """An upload over the size the lab takes."""


def bundle_path(store_dir, sha256):
    return os.path.join(store_dir, BUNDLES, sha256[:2], f"{sha256}.zip")


def lock_key(sha256):
    """The advisory lock (a signed 64-bit number) under which a bundle is linked into the store, indexed or swept."""
    return int.from_bytes(bytes.fromhex(sha256[:16]), "big", signed=True)


class Shelf:
    """One server's hold on the store: its own folder for incoming uploads, locked while the server lives."""

    def __init__(self, store_dir):
        self.store_dir = store_dir
        incoming = os.path.join(store_dir, INCOMING)
        os.makedirs(incoming, exist_ok=True)
        os.makedirs(os.path.join(store_dir, BUNDLES), exist_ok=True)
        name = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        # Locked before it has its name: a sweeping server never sees the lock file of a live server unlocked.
        tmp = os.path.join(incoming, f".{name}.lock")
        self._lock = open(tmp, "w")  # noqa: SIM115 - held open for the life of the server
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        os.rename(tmp, os.path.join(incoming, f"{name}.lock"))
        self.folder = os.path.join(incoming, name)
        os.mkdir(self.folder)
        durable.sync_dir(incoming)

    def receive(self, stream, length, limit):
        """The body of an upload (`length` bytes, at most `limit`) into a file of this server's folder.
        Returns (its path, its sha256). A body cut short or over the limit leaves nothing. It is synced once it
        is admitted (hold): a refused one, a 2-million-member zip say, is answered without waiting on the disk."""
        if length > limit:
            raise TooLarge(f"{length} bytes, over the {limit} a bundle may be")
        path = os.path.join(self.folder, f"{secrets.token_hex(8)}.part")
        digest = hashlib.sha256()
        try:
            with open(path, "wb") as f:
                left = length
                while left:
                    block = stream.read(min(BLOCK, left))
                    if not block:
                        raise OSError(f"the upload ended after {length - left} of its {length} bytes")
                    digest.update(block)
                    f.write(block)
                    left -= len(block)
        except BaseException:
            os.unlink(path)
            raise
        return path, digest.hexdigest()

    def hold(self, part, sha256):
        """The verified part under its sha256 in this server's folder: what a sweep looks for if we die."""
        # The part's own random name stays in it: two uploads of one bundle at once each hold their own copy.
        held = os.path.join(self.folder, f"{sha256}.{os.path.basename(part)[: -len('.part')]}.zip")
        with open(part, "rb") as f:
            os.fsync(f.fileno())
        os.replace(part, held)
        durable.sync_dir(self.folder)
        return held

    def place(self, held, sha256):
        """Link the held bundle into the store, synced; one already there (the same bytes) is kept."""
        final = bundle_path(self.store_dir, sha256)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        try:
            os.link(held, final)
        except FileExistsError:
            return
        durable.sync_dir(os.path.dirname(final))

    def release(self, held):
        os.unlink(held)


def sweep(store_dir, set_aside):
    """Clear the folders of dead servers: their parts go, and set_aside(sha256) is called for each bundle one of
    them held (it quarantines the kept file unless the database lists it). Returns the sha256 of those bundles."""
    incoming = os.path.join(store_dir, INCOMING)
    if not os.path.isdir(incoming):
        return []
    held = []
    for entry in sorted(os.listdir(incoming)):
        if entry.startswith(".") or not entry.endswith(".lock"):
            continue
        lock_path = os.path.join(incoming, entry)
        with open(lock_path) as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live server's
            folder = lock_path[: -len(".lock")]
            for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
                if SHA256.fullmatch(name.split(".")[0]) and name.endswith(".zip"):
                    set_aside(name.split(".")[0])
                    held.append(name.split(".")[0])
            shutil.rmtree(folder, ignore_errors=True)
            os.unlink(lock_path)
    durable.sync_dir(incoming)
    return held


def remove(store_dir, sha256):
    """A kept bundle's file gone, synced."""
    final = bundle_path(store_dir, sha256)
    try:
        os.unlink(final)
    except FileNotFoundError:
        return
    durable.sync_dir(os.path.dirname(final))


def quarantine(store_dir, sha256):
    """A kept bundle's file moved aside, into STORE/quarantine/, synced: out of the store, never deleted."""
    aside = os.path.join(store_dir, QUARANTINE)
    os.makedirs(aside, exist_ok=True)
    final = bundle_path(store_dir, sha256)
    try:
        os.rename(final, os.path.join(aside, os.path.basename(final)))
    except FileNotFoundError:  # never linked into the store: its server died before
        return
    durable.sync_dir(aside)
    durable.sync_dir(os.path.dirname(final))


def kept(store_dir):
    """The sha256 of every bundle file in the store, one shard folder at a time."""
    top = os.path.join(store_dir, BUNDLES)
    for shard in sorted(os.listdir(top)) if os.path.isdir(top) else ():
        for name in sorted(os.listdir(os.path.join(top, shard))):
            if name.endswith(".zip") and SHA256.fullmatch(name[: -len(".zip")]):
                yield name[: -len(".zip")]
