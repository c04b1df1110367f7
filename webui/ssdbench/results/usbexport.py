"""Export bundles to USB sticks: find FAT32/exFAT file systems on USB disks, mount, write each bundle
atomically (bundle.write), read it back from the stick and verify it, unmount.

Results go to ssdbench-results/ on the stick's file system. On the appliance's own stick that is its
FAT partition, labelled SSDBENCH. The caller may leave more there once the bundles are verified (`beside`: on the
appliance, the PC's diagnostics zip, appliance/logs.beside_bundles), so that a report can be sent with the results.
Export only adds files: it never formats, and never writes to a drive under test. It does not touch the
database either, so a failed export changes nothing there.
"""

import fcntl
import os
import shutil
import stat
import subprocess
from contextlib import contextmanager

from ..drives import discovery, tool_output
from ..errors import SsdbenchError
from ..human import size
from ..system import durable, mounts, tools
from . import bundle, store

RESULTS_DIR = "ssdbench-results"
MOUNT_ROOT = "/run/ssdbench/export"
STICK_LOCK = "/run/ssdbench/stick.lock"
FILE_SYSTEMS = ("vfat", "exfat")
# Used when the running kernel has no driver for the stick's file system (a host with a trimmed kernel).
FUSE_DRIVERS = {"exfat": "exfat-fuse"}
COLUMNS = "NAME,PATH,TYPE,TRAN,SIZE,MOUNTPOINTS,MODEL,SERIAL,PKNAME"


def sticks(named=()):
    """FAT32/exFAT file systems on USB disks, and on the `named` devices whatever their transport
    (a loop device in the tests). Each: device, disk, fstype, label, size, model, serial, mountpoint, boot."""
    for path in named:
        if not (os.path.exists(path) and stat.S_ISBLK(os.stat(path).st_mode)):
            raise SsdbenchError(f"{path} is not a block device: name the stick's partition, e.g. /dev/sdb1")
    boot = discovery.boot_stick()
    found = {}
    for paths, only_usb in (((), True), (tuple(named), False)):
        if not paths and not only_usb:
            continue
        for disk in tool_output.lsblk(tools.run(["lsblk", "-J", "-b", "-o", COLUMNS, *paths])):
            if only_usb and disk.get("tran") != "usb":
                continue
            name = disk.get("pkname") or disk["name"]  # a partition named on its own knows its disk
            nodes = [(node, file_system(node["path"])) for node in [disk] + disk.get("children", [])]
            on_boot_stick = discovery.is_boot_stick(name, [(p.get("LABEL"), p.get("UUID")) for _, p in nodes], boot)
            for node, probe in nodes:
                if probe.get("TYPE") in FILE_SYSTEMS:
                    found[node["path"]] = {
                        "device": node["path"],
                        "disk": name,
                        "fstype": probe["TYPE"],
                        "label": probe.get("LABEL"),
                        "size": node.get("size"),
                        "model": disk.get("model"),
                        "serial": disk.get("serial"),
                        "mountpoint": next((m for m in node.get("mountpoints") or [] if m), None),
                        "boot": on_boot_stick,
                    }
    return list(found.values())


def file_system(path):
    """The file system on a device, probed from the device itself: lsblk's FSTYPE needs udev, which the
    appliance does not run."""
    return tool_output.blkid(tools.run(["blkid", "-p", "-o", "export", path], ok=(0, 2)))


class NotAStick(SsdbenchError):
    """The device asked for is not one of the sticks found."""


def choose(found, device=None):
    """The stick to write to: the one asked for; else the only stick that is not the appliance's own;
    else the appliance's own stick."""
    if device:
        real = os.path.realpath(device)
        for stick in found:
            if os.path.realpath(stick["device"]) == real:
                return stick
        raise NotAStick(
            f"{device} is not one of the sticks found: a USB stick with a FAT32 or exFAT file system "
            "(ssdbench never formats a stick)"
        )
    others = [s for s in found if not s["boot"]]
    if len(others) > 1:
        raise SsdbenchError("several USB sticks: choose one (--to DEVICE): " + ", ".join(s["device"] for s in others))
    if others or found:
        return (others or found)[0]
    raise SsdbenchError("no USB stick with a FAT32 or exFAT file system was found")


def find(device=None):
    """The stick to write to (see choose), from the sticks found and the device asked for."""
    return choose(sticks(named=[device] if device else ()), device)


def when_to_pull(stick):
    """After an export: whether the stick can be pulled out now. The appliance's own stick cannot, whatever
    became of its FAT partition: its SSDB-DATA partition holds the results as long as the system runs."""
    if stick["boot"]:
        return (
            f"{stick['device']} is on the ssdbench stick, which holds the results: "
            "leave it in until the system has powered off"
        )
    if stick["mountpoint"]:
        return f"{stick['device']} stays mounted on {stick['mountpoint']}"
    return f"{stick['device']} unmounted: it can be pulled out"


def _check_not_under_test(db, stick):
    busy = store.busy_run(db)
    if busy is None:
        return
    run = store.get_run(db, busy["id"])
    if os.path.basename(run["drive"]["path"]) == stick["disk"]:
        raise SsdbenchError(f"{stick['device']} is on the drive under test in run {busy['id']}: not an export target")


class Busy(SsdbenchError):
    """Another export, the log keeper's mirror or S30stick has the appliance's sticks in hand."""


@contextmanager
def held(wait=True):
    """STICK_LOCK, which S30stick takes too while it writes the stick's IDs on its FAT partition: one writer to a
    stick's file system at a time, so that none unmounts it under another. Without /run/ssdbench (not an
    appliance) there is nothing else to wait for."""
    try:
        fd = os.open(STICK_LOCK, os.O_WRONLY | os.O_CREAT, 0o600)
    except FileNotFoundError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise Busy("the stick is in use: an export is writing to it") from None
        yield
    finally:
        os.close(fd)


@contextmanager
def mounted(stick, wait=True):
    """The stick's mount point: its own if it is mounted once STICK_LOCK is held (left mounted after), else a fresh
    one; with STICK_LOCK held throughout (`wait`: for it, else Busy at once). Where it is mounted is read again
    under the lock: the holder before (the log keeper's mirror) may have unmounted it since `stick` was found, and
    its old mount point is then a folder of the appliance's own memory, not the stick."""
    with held(wait):
        yield from _mounted({**stick, "mountpoint": mount_point(stick["device"])})


def mount_point(device):
    """Where `device` is mounted now (the first of its mounts), or None."""
    real = os.path.realpath(device)
    return next(
        (point for source, point, _ in mounts.table() if source.startswith("/") and os.path.realpath(source) == real),
        None,
    )


def _mounted(stick):
    if stick["mountpoint"]:
        yield stick["mountpoint"]
        return
    point = os.path.join(MOUNT_ROOT, os.path.basename(stick["device"]))
    os.makedirs(point, exist_ok=True)
    try:
        _mount(stick, point)
    except SsdbenchError:
        os.rmdir(point)
        raise
    try:
        yield point
    finally:
        proc = subprocess.run(["umount", point], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SsdbenchError(f"could not unmount {stick['device']} ({proc.stderr.strip()}): do not pull it out yet")
        os.rmdir(point)


def _mount(stick, point):
    try:
        tools.run(["mount", "-t", stick["fstype"], "-o", "noatime", stick["device"], point])
    except SsdbenchError:
        fuse = FUSE_DRIVERS.get(stick["fstype"])
        if not (fuse and tools.which(f"mount.{fuse}")):
            raise
        tools.run(["mount", "-t", fuse, "-o", "noatime", stick["device"], point])


def _read_back(path):
    """Verify the bundle as the stick holds it: drop its cached pages first, so the hashes are read from the stick."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return bundle.verify(path)


def _already_there(path):
    if not os.path.exists(path):
        return False
    try:
        bundle.verify(path)
        return True
    except bundle.BundleError:
        return False  # a damaged copy is written again


def ended_runs(db):
    return [r["id"] for r in store.list_runs(db) if r["state"] in store.ENDED]


def export(db, data_dir, run_ids, stick, on_progress=None, beside=None):
    """Write the runs' bundles to the stick, then `beside(data_dir, folder)` when given (it raises SsdbenchError,
    saying the bundles are there). Returns one entry per run: run, file, bytes, written/kept."""
    _check_not_under_test(db, stick)
    out = []
    with mounted(stick) as point:
        folder = os.path.join(point, RESULTS_DIR)
        os.makedirs(folder, exist_ok=True)
        for name in os.listdir(folder):
            if name.endswith(".part"):  # left by an export cut off earlier: never a result
                os.unlink(os.path.join(folder, name))
        for run_id in run_ids:
            run = store.get_run(db, run_id)
            if run is None:
                raise SsdbenchError(f"no run {run_id}")
            final = os.path.join(folder, bundle.bundle_name(run))
            if _already_there(final):
                out.append(
                    {
                        "run": run_id,
                        "file": f"{RESULTS_DIR}/{os.path.basename(final)}",
                        "bytes": os.path.getsize(final),
                        "state": "already on the stick",
                    }
                )
                continue
            if on_progress:
                on_progress(run_id, final)
            try:
                path = bundle.write(db, data_dir, run_id, folder)
            except SsdbenchError as exc:
                raise SsdbenchError(
                    f"export to {stick['device']} failed: {exc} ({size(shutil.disk_usage(folder).free)} free there)"
                ) from exc
            try:
                _read_back(path)
            except bundle.BundleError as exc:
                os.unlink(path)
                raise SsdbenchError(
                    f"{stick['device']}: the bundle read back differs, so it was removed: {exc}"
                ) from exc
            out.append(
                {
                    "run": run_id,
                    "file": f"{RESULTS_DIR}/{os.path.basename(path)}",
                    "bytes": os.path.getsize(path),
                    "state": "written and verified",
                }
            )
        if beside is not None:
            beside(data_dir, folder)
        durable.sync_dir(folder)
    return out


def export_ended_run(db, data_dir, run_id, log, beside=None):
    """Best effort, for the runner service: no stick, or a full one, is logged, and the service goes on."""
    try:
        stick = find()
        for item in export(db, data_dir, [run_id], stick, beside=beside):
            log(f"run {run_id}: {item['file']} on {stick['device']}, {item['state']}")
    except SsdbenchError as exc:
        log(f"run {run_id}: not exported: {exc}")
