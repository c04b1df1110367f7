"""Result bundles and USB export, on a real run: real fio on a loop device, real zip files, a real vfat
file system on a loop device for the stick, read back with mtools."""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import zipfile
from contextlib import contextmanager

import pytest
from conftest import needs_root, show, ssdbench
from webutil import login, make_app

from ssdbench.results import bundle, store
from ssdbench.run import fio_output

ENGINE_SUITE = ("--suite-file", os.path.join(os.path.dirname(__file__), "data", "engine-suite.toml"), "--non-standard")

pytestmark = needs_root()


def attach(img):
    return subprocess.run(
        ["losetup", "-f", "--show", str(img)], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """One finished engine-suite run (about 15 s), shared: (data dir, loop device, image path)."""
    top = tmp_path_factory.mktemp("ran")
    img = top / "drive.img"
    subprocess.run(["truncate", "-s", "512M", str(img)], check=True)
    dev = attach(img)
    data_dir = top / "data"
    try:
        ssdbench(
            "run", *ENGINE_SUITE, "--drive", dev, "--confirm", os.path.basename(dev), data_dir=data_dir, check=True
        )
        yield data_dir, dev
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


@pytest.fixture(scope="module")
def made(ran, tmp_path_factory):
    """The run's bundle, written by the CLI."""
    data_dir, _ = ran
    out = tmp_path_factory.mktemp("bundle")
    path = ssdbench("bundle", "1", "-o", str(out), data_dir=data_dir, check=True).stdout.strip()
    return path


def db_files(data_dir):
    return {
        name: hashlib.sha256(open(os.path.join(data_dir, name), "rb").read()).hexdigest()
        for name in os.listdir(data_dir)
        if name.startswith(store.DB_NAME) and not name.endswith("-shm")
    }


def test_bundle_holds_what_the_issue_lists(ran, made):
    data_dir, _ = ran
    name = os.path.basename(made)
    assert name.startswith("unknown_loop") and "_engine-test_" in name and name.endswith("Z.zip")
    with zipfile.ZipFile(made) as zf:
        names = set(zf.namelist())
        manifest = json.loads(zf.read("manifest.json"))
        result = json.loads(zf.read("result.json"))
        metrics_csv = zf.read("metrics/02-rand-read-4k.csv").decode()
        raw_json = fio_output.fio_result(zf.read("raw/02-rand-read-4k/fio.json").decode())
    assert {
        "result.json",
        "report.html",
        "environment.json",
        "drive/identity.json",
        "drive/health-before.json",
        "drive/health-after.json",
        "jobs/rerun.sh",
        "jobs/02-rand-read-4k.fio",
        "raw/02-rand-read-4k/fio.json",
        "raw/02-rand-read-4k/rand-read-4k_iops.1.log",
    } <= names
    assert set(manifest["files"]) == names - {"manifest.json"}
    assert manifest["suite"]["sha256"] == result["suite_hash"] and manifest["format_version"] == bundle.FORMAT_VERSION
    # Every figure in the CSV is the stored value, to the last digit, and names fio's field.
    iops = next(
        m
        for s in show(1, data_dir)["steps"]
        if s["key"] == "rand-read-4k"
        for m in s["metrics"]
        if m["name"] == "read.iops"
    )
    assert f"read.iops,{iops['value']!r},IOPS,{iops['source']}" in metrics_csv
    assert raw_json["jobs"][0]["read"]["iops"] == iops["value"]


def test_round_trip_import_keeps_every_metric_and_series_and_its_origin(ran, made, tmp_path):
    data_dir, _ = ran
    assert ssdbench("verify", made).returncode == 0
    other = tmp_path / "second-testbed"
    out = ssdbench("import", made, data_dir=other, check=True).stdout
    assert "imported as run 1" in out
    original, imported = show(1, data_dir), show(1, other)
    assert imported["origin"].startswith("imported: run 1 on ") and original["origin"] == "local"
    assert [s["metrics"] for s in imported["steps"]] == [s["metrics"] for s in original["steps"]]
    for key in ("suite", "suite_hash", "state", "environment", "drive"):
        assert imported[key] == original[key], key
    db_a, db_b = store.connect(data_dir), store.connect(other)
    a = [(s["name"], store.series_points(db_a, s["id"])) for s in store.get_run(db_a, 1)["series"]]
    b = [(s["name"], store.series_points(db_b, s["id"])) for s in store.get_run(db_b, 1)["series"]]
    assert a == b and len(a) > 10
    assert os.path.exists(other / "runs" / "1" / "02-rand-read-4k" / "fio.json")
    again = ssdbench("import", made, data_dir=other)
    assert again.returncode != 0 and "already here, as run 1" in again.stderr

    # Set beside the local run in the web's compare: same suite hash, so comparable.
    shutil.copytree(data_dir, tmp_path / "both")
    ssdbench("import", made, data_dir=tmp_path / "both", check=True)
    client = make_app(tmp_path / "both").test_client()
    login(client)
    both = client.get("/api/compare?run=1&run=2").get_json()
    assert both["comparable"] is True
    assert both["runs"][0]["steps"][2]["metrics"] == both["runs"][1]["steps"][2]["metrics"]


def rewrite(src, dst, change):
    """A copy of a zip with `change(name, data)` applied: returns new bytes, or None to drop the member."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            data = change(item.filename, zin.read(item.filename))
            if data is not None:
                zout.writestr(item, data)


def flip_byte(name, data):
    return data.replace(b"read.iops,", b"read.iops,9", 1) if name == "metrics/02-rand-read-4k.csv" else data


def drop_file(name, data):
    return None if name == "raw/02-rand-read-4k/fio.json" else data


@pytest.mark.parametrize(
    "how, expect",
    [
        ("one byte changed", "metrics/02-rand-read-4k.csv: sha256"),
        ("a file removed", "raw/02-rand-read-4k/fio.json: listed in the manifest but missing"),
        ("a file added", "extra.txt: not listed in the manifest (added)"),
        ("a byte of the zip changed", "problem"),
    ],
)
def test_tampered_bundle_fails_verify_and_is_refused_by_import(made, tmp_path, how, expect):
    bad = tmp_path / "bad.zip"
    if how == "one byte changed":
        rewrite(made, bad, flip_byte)
    elif how == "a file removed":
        rewrite(made, bad, drop_file)
    elif how == "a file added":
        shutil.copy(made, bad)
        with zipfile.ZipFile(bad, "a") as zf:
            zf.writestr("extra.txt", b"not from ssdbench")
    else:
        data = bytearray(open(made, "rb").read())
        with zipfile.ZipFile(made) as zf:
            info = zf.getinfo("result.json")
        data[info.header_offset + 30 + len(info.filename) + 10] ^= 0x01  # inside result.json's compressed bytes
        bad.write_bytes(bytes(data))
    check = ssdbench("verify", str(bad))
    assert check.returncode == 2 and expect in check.stderr, check.stderr
    data_dir = tmp_path / "data"
    refused = ssdbench("import", str(bad), data_dir=data_dir)
    assert refused.returncode != 0 and "problem" in refused.stderr
    assert store.list_runs(store.connect(data_dir)) == [] and not (data_dir / "runs").exists()


def test_rerun_script_runs_the_job_files_with_plain_fio(ran, made, tmp_path):
    _, dev = ran
    with zipfile.ZipFile(made) as zf:
        zf.extractall(tmp_path / "b")
    script = tmp_path / "b" / "jobs" / "rerun.sh"
    refused = subprocess.run(["sh", str(script), dev, "02-rand-read-4k"], input="no\n", capture_output=True, text=True)
    assert refused.returncode == 1 and "not confirmed" in refused.stderr
    assert not any(p.name.startswith("rerun-") for p in (tmp_path / "b").iterdir())
    done = subprocess.run(
        ["sh", str(script), dev, "02-rand-read-4k", "03-rand-write-4k"],
        capture_output=True,
        text=True,
        env=dict(os.environ, SSDBENCH_CONFIRM=dev),
    )
    assert done.returncode == 0, done.stderr
    out = next(p for p in (tmp_path / "b").iterdir() if p.name.startswith("rerun-"))
    assert sorted(os.listdir(out)) == ["02-rand-read-4k", "03-rand-write-4k"]
    fio = fio_output.fio_result((out / "02-rand-read-4k" / "fio.json").read_text())
    assert fio["jobs"][0]["read"]["total_ios"] > 0 and fio["global options"]["filename"] == dev


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
    made = []

    def make(fstype, size_mib=64, free=None):
        img = tmp_path / f"stick{len(made)}.img"
        subprocess.run(["truncate", "-s", f"{size_mib}M", str(img)], check=True)
        mkfs = ["mkfs.vfat", "-n"] if fstype == "vfat" else ["mkfs.exfat", "-L"]
        subprocess.run([*mkfs, "RESULTS", str(img)], check=True, capture_output=True)
        if free is not None:
            with opened(img, fstype) as point:
                room = shutil.disk_usage(point).free - free
                with open(os.path.join(point, "filler"), "wb") as f:
                    f.truncate(room)  # neither FAT nor exFAT keeps holes: the clusters are taken
        dev = attach(img)
        made.append(dev)
        return dev, img

    yield make
    for dev in made:
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
def test_export_writes_verifies_and_unmounts_and_reads_back(ran, made, stick, tmp_path, fstype):
    data_dir, _ = ran
    dev, img = stick(fstype)
    listed = ssdbench("export", "--list", "--to", dev, data_dir=data_dir, check=True).stdout
    assert dev in listed and fstype in listed and "RESULTS" in listed
    out = ssdbench("export", "1", "--to", dev, data_dir=data_dir, check=True).stdout
    assert "written and verified" in out and "unmounted" in out
    assert not mounted(dev)
    name = os.path.basename(made)
    subprocess.run(["losetup", "-d", dev], check=True)  # read the image as a laptop would read the stick
    assert results_on(img, fstype) == [name]
    with opened(img, fstype, ro=True) as point:
        assert ssdbench("verify", os.path.join(point, "ssdbench-results", name)).returncode == 0
    dev = attach(img)
    try:
        again = ssdbench("export", "--all", "--to", dev, data_dir=data_dir, check=True).stdout
        assert "already on the stick" in again
    finally:
        subprocess.run(["losetup", "-d", dev], check=True)


@pytest.mark.parametrize("fstype", STICK_FILE_SYSTEMS)
def test_a_full_stick_fails_clearly_leaves_no_file_and_no_change(ran, made, stick, fstype):
    data_dir, _ = ran
    dev, img = stick(fstype, free=os.path.getsize(made) // 2)  # room for half the bundle: ENOSPC partway
    before = db_files(data_dir)
    failed = ssdbench("export", "1", "--to", dev, data_dir=data_dir)
    assert failed.returncode == 2
    assert "No space left on device" in failed.stderr and "nothing was left under that name" in failed.stderr
    assert not mounted(dev)
    subprocess.run(["losetup", "-d", dev], check=True)
    assert results_on(img, fstype) == []  # neither the bundle nor its .part
    assert db_files(data_dir) == before


def test_a_device_without_fat_is_never_a_target(ran, loopdev):
    data_dir, dev = ran
    refused = ssdbench("export", "1", "--to", dev, data_dir=data_dir)
    assert refused.returncode == 2 and "holds no FAT32 or exFAT file system" in refused.stderr


def test_web_download_and_export(ran, stick, tmp_path):
    data_dir, _ = ran
    dev, img = stick("exfat")
    client = make_app(data_dir).test_client()
    token = login(client)
    got = client.get("/api/runs/1/bundle")
    assert got.status_code == 200 and got.mimetype == "application/zip"
    assert "attachment" in got.headers["Content-Disposition"]
    (tmp_path / "dl.zip").write_bytes(got.data)
    assert ssdbench("verify", str(tmp_path / "dl.zip")).returncode == 0
    assert client.get("/api/runs/9/bundle").status_code == 404
    assert client.post("/api/export", json={"runs": [1], "device": dev}).status_code == 403
    done = client.post("/api/export", json={"runs": [1], "device": dev}, headers={"X-CSRF-Token": token})
    assert done.status_code == 200, done.get_json()
    assert done.get_json()["exported"][0]["state"] == "written and verified" and done.get_json()["unmounted"]
    bad = client.post("/api/export", json={"runs": [1], "device": str(tmp_path)}, headers={"X-CSRF-Token": token})
    assert bad.status_code == 409 and "not a block device" in bad.get_json()["error"]
    page = client.get("/runs/1").get_data(as_text=True)
    assert "Download the bundle" in page and "Export to USB" in page
