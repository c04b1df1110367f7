"""Result bundles on a real run (real fio on a loop device): what a bundle holds, verify, import, tampering,
rerun.sh."""

import json
import os
import shutil
import subprocess
import zipfile

import pytest
from conftest import login, make_app, needs_root, show, ssdbench

from ssdbench.results import bundle, store
from ssdbench.run import fio_output

pytestmark = needs_root()


def test_bundle_holds_what_the_issue_lists(finished_run, finished_bundle):
    data_dir, _ = finished_run
    name = os.path.basename(finished_bundle)
    assert name.startswith("unknown_loop") and "_engine-test_" in name and name.endswith("Z.zip")
    with zipfile.ZipFile(finished_bundle) as zf:
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


def test_round_trip_import_keeps_every_metric_and_series_and_its_origin(finished_run, finished_bundle, tmp_path):
    data_dir, _ = finished_run
    assert ssdbench("verify", finished_bundle).returncode == 0
    other = tmp_path / "second-testbed"
    out = ssdbench("import", finished_bundle, data_dir=other, check=True).stdout
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
    again = ssdbench("import", finished_bundle, data_dir=other)
    assert again.returncode != 0 and "already here, as run 1" in again.stderr

    # Set beside the local run in the web's compare: same suite hash, so comparable.
    shutil.copytree(data_dir, tmp_path / "both")
    ssdbench("import", finished_bundle, data_dir=tmp_path / "both", check=True)
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
def test_tampered_bundle_fails_verify_and_is_refused_by_import(finished_bundle, tmp_path, how, expect):
    bad = tmp_path / "bad.zip"
    if how == "one byte changed":
        rewrite(finished_bundle, bad, flip_byte)
    elif how == "a file removed":
        rewrite(finished_bundle, bad, drop_file)
    elif how == "a file added":
        shutil.copy(finished_bundle, bad)
        with zipfile.ZipFile(bad, "a") as zf:
            zf.writestr("extra.txt", b"not from ssdbench")
    else:
        data = bytearray(open(finished_bundle, "rb").read())
        with zipfile.ZipFile(finished_bundle) as zf:
            info = zf.getinfo("result.json")
        data[info.header_offset + 30 + len(info.filename) + 10] ^= 0x01  # inside result.json's compressed bytes
        bad.write_bytes(bytes(data))
    check = ssdbench("verify", str(bad))
    assert check.returncode == 2 and expect in check.stderr, check.stderr
    data_dir = tmp_path / "data"
    refused = ssdbench("import", str(bad), data_dir=data_dir)
    assert refused.returncode != 0 and "problem" in refused.stderr
    assert store.list_runs(store.connect(data_dir)) == [] and not (data_dir / "runs").exists()


def test_rerun_script_runs_the_job_files_with_plain_fio(finished_run, finished_bundle, tmp_path):
    _, dev = finished_run
    with zipfile.ZipFile(finished_bundle) as zf:
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
