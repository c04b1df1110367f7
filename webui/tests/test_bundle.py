"""Result bundles on a real run (real fio on a loop device): what a bundle holds, verify, import, tampering,
rerun.sh."""

import csv
import hashlib
import io
import json
import os
import shlex
import shutil
import stat
import subprocess
import zipfile

import pytest
from conftest import login, make_app, needs_root, show, ssdbench

from ssdbench.errors import SsdbenchError
from ssdbench.results import bundle, offline_report, store, zip_safety
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
    assert manifest["suite"]["workload_sha256"] == result["environment"]["suite"]["workload_sha256"]
    assert len(manifest["suite"]["workload_sha256"]) == 64
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


def forge(src, dst, change=lambda name, data: data, add=(), result=None):
    """A copy of a bundle with members changed or added, and a manifest whose hashes all match: what someone
    who rewrites the manifest too can send. `add` holds (ZipInfo or name, bytes); `result` edits result.json."""
    with zipfile.ZipFile(src) as zin:
        members = [(i, zin.read(i.filename)) for i in zin.infolist() if i.filename != bundle.MANIFEST]
        manifest = json.loads(zin.read(bundle.MANIFEST))
    if result is not None:
        members = [
            (i, json.dumps(result(json.loads(d))).encode() if i.filename == "result.json" else d) for i, d in members
        ]
    members = [(i, change(i.filename, d)) for i, d in members] + list(add)
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info, data in members:
            zout.writestr(info, data)
        name_of = lambda info: info.filename if isinstance(info, zipfile.ZipInfo) else info  # noqa: E731
        manifest["files"] = {name_of(i): hashlib.sha256(d).hexdigest() for i, d in members}
        zout.writestr(bundle.MANIFEST, json.dumps(manifest))
    return str(dst)


def test_zip_slip_is_refused_by_verify_and_import_and_writes_nothing(finished_bundle, tmp_path):
    # raw//<absolute path>: os.path.join drops everything before an absolute part, so import once wrote
    # the member there, as root.
    target = tmp_path / "escaped"
    bad = forge(finished_bundle, tmp_path / "slip.zip", add=[(f"raw/{target}", b"owned")])
    check = ssdbench("verify", bad)
    assert check.returncode == 2 and "empty path segment" in check.stderr, check.stderr
    refused = ssdbench("import", bad, data_dir=tmp_path / "data")
    assert refused.returncode == 2 and "unsafe" in refused.stderr
    assert not target.exists() and store.list_runs(store.connect(tmp_path / "data")) == []


def symlink(name, to):
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, to.encode()


@pytest.mark.parametrize(
    "member, reason",
    [
        ("/etc/cron.d/x", "an absolute path"),
        ("raw/../../x", "a path segment '..'"),
        ("raw/./x", "a path segment '.'"),
        ("raw/a//b", "an empty path segment"),
        ("raw/C:/x", "a drive letter"),
        ("C:x", "a drive letter"),
        ("raw\\..\\x", "a backslash"),
        ("raw/NUL.txt", "a device name"),
        ("raw/com1", "a device name"),
        ("raw/x\x1b[2J", "a control character"),
        ("raw/" + "d/" * 20 + "x", "folders deep"),
        ("raw/" + "x" * 300, "longer than 255"),
        (symlink("raw/link", "/etc/shadow"), "a symbolic link"),
    ],
)
def test_every_unsafe_member_name_is_refused(finished_bundle, tmp_path, member, reason):
    added = member if isinstance(member, tuple) else (member, b"x")
    bad = forge(finished_bundle, tmp_path / "bad.zip", add=[added])
    with pytest.raises(bundle.BundleError, match="unsafe") as refused:
        bundle.verify(bad)
    assert reason in str(refused.value)
    with pytest.raises(bundle.BundleError):
        bundle.import_bundle(store.connect(tmp_path / "data"), str(tmp_path / "data"), bad)
    assert store.list_runs(store.connect(tmp_path / "data")) == []


def test_hostile_names_in_the_run_document_are_refused_and_rerun_sh_quotes_every_word(
    finished_run, finished_bundle, tmp_path
):
    def hostile_suite(doc):
        doc["suite"] = "x; touch /tmp/owned #"
        return doc

    def hostile_step(doc):
        doc["steps"][0]["key"] = "$(reboot)"
        return doc

    for edit, expect in ((hostile_suite, "suite name"), (hostile_step, "step 0: key")):
        bad = forge(finished_bundle, tmp_path / "doc.zip", result=edit)
        assert bundle.verify(bad)  # the hashes match: only the names are wrong
        refused = ssdbench("import", bad, data_dir=tmp_path / "data")
        assert refused.returncode == 2 and expect in refused.stderr, refused.stderr
    assert store.list_runs(store.connect(tmp_path / "data")) == []
    # Were such names ever stored, the script would still read them as words, never as commands.
    data_dir, _ = finished_run
    doc = store.get_run(store.connect(data_dir), 1)
    doc["suite"] = "x\nreboot"
    doc["steps"][0].update(key="a'b;reboot", job_file=None, kind="purge $(reboot)")
    script = bundle.rerun_script(doc).decode()
    assert "\nreboot" not in script and f"step={shlex.quote(bundle.step_folder(doc['steps'][0]))};" in script
    assert subprocess.run(["sh", "-n"], input=script, text=True).returncode == 0


@pytest.mark.parametrize(
    "how, expect",
    [
        ("too many members", "more than the 20000 a bundle may hold"),
        ("a member listed twice", "listed twice in the zip"),
        ("too compressible", "compressed more than 200:1"),
        ("overlapping members", "overlaps"),
        ("an encrypted member", "an encrypted member"),
        ("compression method 6", "compression method 6, not stored or deflated"),
    ],
)
def test_zip_bombs_are_refused_before_anything_is_read(tmp_path, how, expect):
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        if how == "too many members":
            for i in range(zip_safety.MAX_MEMBERS + 1):
                zf.writestr(f"raw/{i}", b"")
        elif how == "a member listed twice":
            with pytest.warns(UserWarning):
                for _ in range(3):
                    zf.writestr("raw/x", b"x")
        elif how == "too compressible":
            zf.writestr("raw/zeros", bytes(64 << 20))
        else:  # two members, the second of which is then damaged
            zf.writestr("raw/a", bytes(range(256)) * 64)
            zf.writestr("raw/b", bytes(range(256)) * 64)
    if how in ("overlapping members", "an encrypted member", "compression method 6"):
        data = bytearray(path.read_bytes())
        entry = data.rindex(b"raw/b") - 46  # the central entry's fixed part comes before its name
        assert data[entry : entry + 4] == b"PK\x01\x02"
        if how == "overlapping members":
            # raw/b's entry points at raw/a's data (offset 0): one stretch of the file read twice.
            data[entry + 42 : entry + 46] = (0).to_bytes(4, "little")
        elif how == "an encrypted member":
            data[entry + 8] |= 0x1  # the general purpose flag's bit 0: zipfile asks for a password
        else:
            data[entry + 10 : entry + 12] = (6).to_bytes(2, "little")  # implode, which zipfile cannot read
        path.write_bytes(bytes(data))
    with pytest.raises(bundle.BundleError, match="refused") as refused:
        bundle.verify(str(path))
    assert expect in str(refused.value)


def test_report_json_escapes_markup(finished_run, tmp_path):
    data_dir, _ = finished_run
    doc = store.get_run(store.connect(data_dir), 1)
    doc["drive"]["model"] = "<!--<script>alert(1)</script>&amp;"
    page = offline_report.render(doc).decode()
    embedded = page.split('id="run-document">', 1)[1].split("</script>", 1)[0]
    assert not set("<>&") & set(embedded)
    assert json.loads(embedded)["drive"]["model"] == doc["drive"]["model"]


def test_a_repeat_sets_bundle_holds_every_run_and_the_summary_and_verifies_and_imports(finished_repeat, tmp_path):
    data_dir, _, summary = finished_repeat
    out = ssdbench("bundle", "--repeat", str(summary["id"]), "-o", str(tmp_path), data_dir=data_dir, check=True)
    path = out.stdout.strip()
    assert "_engine-test-repeat3_" in os.path.basename(path)
    verified = ssdbench("verify", path)
    assert verified.returncode == 0 and f"repeat set {summary['id']} (done, runs 1, 2, 3)" in verified.stdout
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        manifest = json.loads(zf.read("manifest.json"))
        held = json.loads(zf.read("repeat.json"))
        table = list(csv.DictReader(io.StringIO(zf.read("summary.csv").decode())))
        results = {p: json.loads(zf.read(f"run-{p}/result.json")) for p in (1, 2, 3)}
    assert set(manifest["files"]) == names - {"manifest.json"} and manifest["repeat"]["times"] == 3
    assert manifest["suite"]["workload_sha256"] == results[1]["environment"]["suite"]["workload_sha256"]
    # The summary as the set's own document and as a table, to the last digit, without this machine's queue.
    assert held["figures"] == summary["figures"] and held["counted"] == summary["counted"]
    assert not {"pid", "request", "cancel_requested"} & set(held)
    assert [(row["key"], float(row["mean"]), row["flagged"]) for row in table] == [
        (f["key"], f["mean"], "yes" if f["flagged"] else "no") for f in summary["figures"]
    ]
    # Every run whole, as its own bundle holds it: its document, report, job files, raw fio output.
    for position, run_id in enumerate(summary["counted"], 1):
        assert results[position]["id"] == run_id and results[position]["repeat"]["position"] == position
        assert [s["metrics"] for s in results[position]["steps"]] == [
            s["metrics"] for s in show(run_id, data_dir)["steps"]
        ]
        for member in ("report.html", "jobs/rerun.sh", "jobs/02-rand-read-4k.fio", "raw/02-rand-read-4k/fio.json"):
            assert f"run-{position}/{member}" in names, member

    # Another testbed imports the set whole, with its runs and their files; its summary is the same.
    other = tmp_path / "other"
    imported = ssdbench("import", path, data_dir=other, check=True).stdout
    assert "imported as repeat set 1 with runs 1, 2, 3 (imported: repeat set 1 on " in imported
    again = json.loads(ssdbench("repeats", "1", "--json", data_dir=other, check=True).stdout)
    figures = lambda s: [(f["key"], f["values"], f["mean"], f["stdev"], f["flagged"]) for f in s["figures"]]  # noqa: E731
    assert figures(again) == figures(summary) and again["state"] == "done" and len(again["runs"]) == 3
    assert show(2, other)["origin"].startswith("imported: run 2 on ") and show(2, other)["repeat"]["position"] == 2
    assert (other / "runs" / "3" / "02-rand-read-4k" / "fio.json").exists()
    twice = ssdbench("import", path, data_dir=other)
    assert twice.returncode == 2 and "already here, as repeat set 1" in twice.stderr
    # A run of the set, brought in from its own bundle, is the same run: already here too.
    single = ssdbench("bundle", "2", "-o", str(tmp_path), data_dir=data_dir, check=True).stdout.strip()
    alone = ssdbench("import", single, data_dir=other)
    assert alone.returncode == 2 and "already here, as run 2" in alone.stderr

    # A changed byte in any run fails verify, and a forged set document is refused by import, whole.
    bad = tmp_path / "bad.zip"
    rewrite(
        path,
        bad,
        lambda name, data: (
            data.replace(b"read.iops,", b"read.iops,9", 1) if name.startswith("run-2/metrics/") else data
        ),
    )
    check = ssdbench("verify", str(bad))
    assert check.returncode == 2 and "run-2/metrics/02-rand-read-4k.csv: sha256" in check.stderr

    def edit(change):
        def apply(name, data):
            return json.dumps(change(json.loads(data))).encode() if name == "repeat.json" else data

        return apply

    for change, expect in (
        (lambda d: {**d, "runs": d["runs"] + [{"id": 9, "position": 4, "state": "done"}]}, "run-4: no result.json"),
        (lambda d: {**d, "runs": d["runs"][:1] * 2}, "position must be a whole number"),
        (lambda d: {**d, "times": 1}, "times must be"),
        (lambda d: {**d, "thresholds": {"cov_percent": "2.5"}}, "thresholds must give"),
        (lambda d: {**d, "suite": "../x"}, "suite name"),
    ):
        forged = forge(path, tmp_path / "forged.zip", change=edit(change))
        refused = ssdbench("import", forged, data_dir=tmp_path / "third")
        assert refused.returncode == 2 and expect in refused.stderr, refused.stderr
    third = store.connect(tmp_path / "third")
    assert store.list_runs(third) == [] and store.list_repeats(third) == []
    assert not (tmp_path / "third" / "runs").exists() or os.listdir(tmp_path / "third" / "runs") == []


def test_a_bundle_that_verify_would_refuse_is_not_written(finished_repeat, tmp_path, monkeypatch):
    data_dir, _, summary = finished_repeat
    monkeypatch.setattr(zip_safety, "MAX_MEMBERS", 100)  # a set of three engine runs holds more files
    with pytest.raises(SsdbenchError, match="over the 100 files or"):
        bundle.write_repeat(store.connect(data_dir), str(data_dir), summary["id"], str(tmp_path))
    assert os.listdir(tmp_path) == []
