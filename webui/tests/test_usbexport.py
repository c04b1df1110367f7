"""Export to a USB stick, on a real run's bundle: a real exFAT (or vfat) file system on a loop device as the stick."""

import os
import shutil
import subprocess
import tempfile
import zipfile
from contextlib import contextmanager

import pytest
from conftest import attach, db_files, login, make_app, needs_root, ssdbench

from ssdbench.results import store, usbexport

pytestmark = needs_root()


VFAT_IN_KERNEL = "\tvfat\n" in open("/proc/filesystems").read()
STICK_FILE_SYSTEMS = [
    pytest.param(
        "vfat",
        marks=pytest.mark.skipif(
            not VFAT_IN_KERNEL, reason=("this kernel has no vfat driver; make test-vm exports to vfat sticks in QEMU")
        ),
    ),
    "exfat",  # through exfat-fuse when the kernel has no exFAT driver, as here
]


@contextmanager
def opened(img, fstype, ro=False):
    """The image's file system, mounted the way usbexport would (exfat-fuse when the kernel lacks exFAT)."""
    point = tempfile.mkdtemp()
    kind = fstype if fstype == "vfat" or "\texfat\n" in open("/proc/filesystems").read() else "exfat-fuse"
    subprocess.run(["mount", "-t", kind, "-o", "loop,ro" if ro else "loop", str(img), point], check=True)
    try:
        yield point
    finally:
        subprocess.run(["umount", point], check=True)
        os.rmdir(point)


@pytest.fixture
def stick(tmp_path):
    """A FAT32 or exFAT file system on a loop device, as a stick; with `free`, a filler file leaves only
    that much room."""
    finished_bundle = []

    def make(fstype, size_mib=64, free=None, label="RESULTS"):
        img = tmp_path / f"stick{len(finished_bundle)}.img"
        subprocess.run(["truncate", "-s", f"{size_mib}M", str(img)], check=True)
        mkfs = ["mkfs.vfat", "-n"] if fstype == "vfat" else ["mkfs.exfat", "-L"]
        subprocess.run([*mkfs, label, str(img)], check=True, capture_output=True)
        if free is not None:
            with opened(img, fstype) as point:
                room = shutil.disk_usage(point).free - free
                with open(os.path.join(point, "filler"), "wb") as f:
                    f.truncate(room)  # neither FAT nor exFAT keeps holes: the clusters are taken
        dev = attach(img)
        finished_bundle.append(dev)
        return dev, img

    yield make
    for dev in finished_bundle:
        subprocess.run(["umount", dev], capture_output=True)
        subprocess.run(["losetup", "-d", dev], capture_output=True)


def results_on(img, fstype):
    with opened(img, fstype, ro=True) as point:
        folder = os.path.join(point, "ssdbench-results")
        return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def mounted(dev):
    with open("/proc/mounts") as f:
        return any(line.split()[0] == dev for line in f)


@pytest.mark.parametrize("fstype", STICK_FILE_SYSTEMS)
def test_export_writes_verifies_and_unmounts_and_reads_back(finished_run, finished_bundle, stick, tmp_path, fstype):
    data_dir, _ = finished_run
    dev, img = stick(fstype)
    listed = ssdbench("export", "--list", "--to", dev, data_dir=data_dir, check=True).stdout
    assert dev in listed and fstype in listed and "RESULTS" in listed
    out = ssdbench("export", "1", "--to", dev, data_dir=data_dir, check=True).stdout
    assert "written and verified" in out and f"{dev} unmounted: it can be pulled out" in out
    assert not mounted(dev)
    name = os.path.basename(finished_bundle)
    subprocess.run(["losetup", "-d", dev], check=True)  # read the image as a laptop would read the stick
    [first] = set(results_on(img, fstype)) - {name}
    assert first.startswith("ssdbench-diagnostics-") and first.endswith(".zip")
    with opened(img, fstype, ro=True) as point:
        assert ssdbench("verify", os.path.join(point, "ssdbench-results", name)).returncode == 0
    dev = attach(img)
    try:
        again = ssdbench("export", "--all", "--to", dev, data_dir=data_dir, check=True).stdout
        assert "already on the stick" in again
    finally:
        subprocess.run(["losetup", "-d", dev], check=True)
    # The second export's diagnostics zip took the place of the first's: one a PC, the newest.
    [newest] = set(results_on(img, fstype)) - {name}
    assert name in results_on(img, fstype) and newest.startswith("ssdbench-diagnostics-") and newest >= first
    pin = ssdbench("pin", data_dir=data_dir, check=True).stdout.strip()
    with opened(img, fstype, ro=True) as point, zipfile.ZipFile(os.path.join(point, "ssdbench-results", newest)) as zf:
        assert {"lsblk.txt", "cmdline.txt", "testbed.json", "drives.json"} <= set(zf.namelist())
        assert all(pin not in zf.read(member).decode(errors="replace") for member in zf.namelist())


@pytest.mark.parametrize("fstype", STICK_FILE_SYSTEMS)
def test_a_full_stick_fails_clearly_leaves_no_file_and_no_change(finished_run, finished_bundle, stick, fstype):
    data_dir, _ = finished_run
    dev, img = stick(fstype, free=os.path.getsize(finished_bundle) // 2)  # room for half the bundle: ENOSPC partway
    before = db_files(data_dir)
    failed = ssdbench("export", "1", "--to", dev, data_dir=data_dir)
    assert failed.returncode == 2
    assert "No space left on device" in failed.stderr and "nothing was left under that name" in failed.stderr
    assert not mounted(dev)
    subprocess.run(["losetup", "-d", dev], check=True)
    assert results_on(img, fstype) == []  # neither the bundle nor its .part
    assert db_files(data_dir) == before


def test_the_appliance_s_own_stick_is_not_said_to_be_ready_to_pull(finished_run, stick):
    """Its file system is unmounted after the export, as any stick's, but its SSDB-DATA partition holds the
    results as long as the system runs."""
    data_dir, _ = finished_run
    dev, _ = stick("exfat", label="SSDBENCH")
    out = ssdbench("export", "1", "--to", dev, data_dir=data_dir, check=True).stdout
    assert "written and verified" in out and not mounted(dev)
    assert (
        f"{dev} is on the ssdbench stick, which holds the results: leave it in until the system has powered off" in out
    )
    assert "pulled out" not in out


def test_an_export_mounts_the_stick_again_that_the_holder_before_it_unmounted(finished_run, finished_bundle, stick):
    """The log keeper's mirror may hold the stick mounted when an export finds it, and unmount it before the export
    takes the lock (the unattended VM lost its bundles so): the export reads where the stick is mounted under the
    lock, and mounts it again, never writing under the old mount point."""
    data_dir, _ = finished_run
    dev, img = stick("exfat")
    [found] = usbexport.sticks(named=[dev])
    with usbexport.mounted(found) as point:  # the holder before: the log keeper's mirror
        [held] = usbexport.sticks(named=[dev])
    assert held["mountpoint"] == point and not mounted(dev) and not os.path.exists(point)
    db = store.connect(data_dir)
    try:
        done = list(usbexport.export(db, data_dir, [1], held))
    finally:
        db.close()
    assert [item["state"] for item in done] == ["written and verified"] and not mounted(dev)
    assert not os.path.exists(point)
    subprocess.run(["losetup", "-d", dev], check=True)
    assert os.path.basename(finished_bundle) in results_on(img, "exfat")


def test_a_device_without_fat_is_never_a_target(finished_run, loopdev):
    data_dir, dev = finished_run
    refused = ssdbench("export", "1", "--to", dev, data_dir=data_dir)
    assert refused.returncode == 2 and "a USB stick with a FAT32 or exFAT file system" in refused.stderr


def files_under(*folders):
    return {os.path.join(top, name) for folder in folders for top, _, names in os.walk(folder) for name in names}


def test_web_download_and_export(finished_run, stick, tmp_path, monkeypatch):
    data_dir, _ = finished_run
    dev, img = stick("exfat")
    # The stick is offered only once it is listed (a loop device is never found on its own).
    unlisted = make_app(data_dir).test_client()
    headers = {"X-CSRF-Token": login(unlisted)}
    refused = unlisted.post("/api/export", json={"runs": [1], "device": dev}, headers=headers)
    assert refused.status_code == 404 and "is not one of the sticks found" in refused.get_json()["error"]
    client = make_app(data_dir, SSDBENCH_EXTRA_STICKS=[dev]).test_client()
    token = login(client)
    # A download is made outside the data folder and leaves no file behind, there or in the temporary folder:
    # a private one, since other programs come and go in /tmp.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    os.mkdir(tempfile.tempdir)
    before = files_under(data_dir, tempfile.tempdir)
    got = client.get("/api/runs/1/bundle")
    assert got.status_code == 200 and got.mimetype == "application/zip"
    assert "attachment" in got.headers["Content-Disposition"]
    (tmp_path / "dl.zip").write_bytes(got.data)
    got.close()
    assert files_under(data_dir, tempfile.tempdir) == before
    assert ssdbench("verify", str(tmp_path / "dl.zip")).returncode == 0
    assert client.get("/api/runs/9/bundle").status_code == 404
    assert client.post("/api/export", json={"runs": [1], "device": dev}).status_code == 403
    done = client.post("/api/export", json={"runs": [1], "device": dev}, headers={"X-CSRF-Token": token})
    assert done.status_code == 200, done.get_json()
    assert done.get_json()["exported"][0]["state"] == "written and verified" and done.get_json()["unmounted"]
    assert done.get_json()["pull"] == f"{dev} unmounted: it can be pulled out"
    for device in (str(tmp_path), "/dev/zram0", "/dev/sda1"):
        bad = client.post("/api/export", json={"runs": [1], "device": device}, headers={"X-CSRF-Token": token})
        assert bad.status_code == 404 and "is not one of the sticks found" in bad.get_json()["error"]
    page = client.get("/runs/1").get_data(as_text=True)
    assert "Download the bundle" in page and "Export to USB" in page
    # history exports every ended run, as `export --all` does (issue 37, item 8)
    assert "Export all to USB" in client.get("/history").get_data(as_text=True)
    client.post("/history/export", data={"device": dev, "csrf_token": token})
    flashed = client.get("/history").get_data(as_text=True)
    assert f"Exported to {dev}: " in flashed and ".zip, already on the stick" in flashed, flashed
