"""A tester's own trace through the command line: `ssdbench trace import` of each format makes a playable
trace, which `ssdbench run --trace` plays with real fio on a loop device as a non-standard run; a malformed
file is refused with its line, and nothing of it is kept."""

import json
import os
import subprocess

import pytest
from conftest import DATA, attach, needs_root, show, ssdbench, start_run

from ssdbench.suites import trace_file, trace_import, user_traces

TRACES = os.path.join(DATA, "traces")
CAPTURES = {
    "blktrace": "blkparse-loop.txt",
    "fio-iolog": "fio-3.33-iolog-v3.log",
    "csv": "msr-handmade.csv",
}
# One malformed file per format, and the line that is at fault.
MALFORMED = {
    "blktrace": ("  7,0    1        1     0.000000000 31129  D   R 0 + 128 [x]\n  7,0    1  2  soon\n", 2),
    "fio-iolog": ("fio version 3 iolog\n0 dut add\n5 dut read 0 4096\n9 dut write 4096\n", 4),
    "csv": ("1,hm,0,Read,0,4096,10\n2,hm,0,Read,0,4096,10\n3,hm,0,Write,x,4096,10\n", 3),
}


# A trace run idles the standard suite's 60 s before its trace, the same for every format: the module starts
# them all at once, each on its own drive and data folder, and each test reads its own.
CHANGED = "changed-after-import"


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    """Each format's capture imported and played with `ssdbench run --trace` on a 128 MiB loop device, and the
    CSV capture imported then changed (CHANGED) before its run: by case, (the import's entry, the run's
    process, its data folder), the runs played side by side."""
    top = tmp_path_factory.mktemp("traces")
    cases, devices = {}, []
    try:
        for case in [*sorted(CAPTURES), CHANGED]:
            fmt = "csv" if case == CHANGED else case
            data_dir = top / case / "data"
            path = os.path.join(TRACES, CAPTURES[fmt])
            imported = ssdbench("trace", "import", path, "--format", fmt, "--json", data_dir=data_dir)
            entry = json.loads(imported.stdout) if imported.returncode == 0 else imported.stderr
            if case == CHANGED:
                trace = data_dir / "traces" / f"{user_traces.name_from(CAPTURES[fmt])}.trace"
                trace.write_text(trace.read_text().replace(" R ", " W ", 1))
            devices.append(attach(top / case / "disk.img", "128M"))
            name = user_traces.name_from(CAPTURES[fmt])
            proc = start_run(devices[-1], data_dir, suite=("--trace", name))
            cases[case] = (entry, proc, data_dir)
        yield cases
    finally:
        for _, proc, _ in cases.values():
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        for dev in devices:
            subprocess.run(["losetup", "-d", dev], capture_output=True)


@needs_root()
@pytest.mark.parametrize("fmt", sorted(CAPTURES))
def test_an_imported_trace_plays_on_a_drive_as_a_non_standard_run(fmt, played):
    entry, proc, data_dir = played[fmt]
    assert isinstance(entry, dict), entry
    assert entry["source"] == CAPTURES[fmt] and entry["stats"]["reads"] + entry["stats"]["writes"] > 0
    listed = json.loads(ssdbench("trace", "list", "--json", data_dir=data_dir, check=True).stdout)
    assert [e["name"] for e in listed] == [entry["name"]]
    _, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err
    run = show(1, data_dir)
    assert (run["state"], run["suite"], run["standard"]) == ("done", user_traces.SUITE_NAME, 0)
    assert [s["key"] for s in run["steps"]] == [*user_traces.BEFORE, "trace"]
    step = run["steps"][-1]
    info = step["detail"]["trace"]
    assert info["synthetic"] is False and info["sha256"] == entry["sha256"] and info["name"] == entry["name"]
    assert info["stats"] == entry["stats"]
    # the MSR sample's offsets reach 3.2 GB: it is folded onto the 128 MiB drive, and says so
    assert info["mapped_to_capacity"] == (entry["stats"]["footprint_bytes"] > 128 * 2**20)
    m = {x["name"]: x["value"] for x in step["metrics"]}
    assert (m["fio.read.total_ios"], m["fio.write.total_ios"]) == (entry["stats"]["reads"], entry["stats"]["writes"])
    assert m["all.busy_s"] > 0
    # every listing of the run says what it is
    assert "[non-standard]" in ssdbench("runs", data_dir=data_dir, check=True).stdout


@pytest.mark.parametrize("fmt", sorted(MALFORMED))
def test_a_malformed_trace_is_refused_with_its_line(fmt, tmp_path):
    text, line = MALFORMED[fmt]
    path = tmp_path / f"bad-{fmt}.txt"
    path.write_text(text)
    data_dir = tmp_path / "data"
    proc = ssdbench("trace", "import", str(path), "--format", fmt, data_dir=data_dir)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"ssdbench: error: {path}, line {line}: ") and proc.stderr.count("\n") == 1
    assert not os.path.exists(data_dir / "traces") or not os.listdir(data_dir / "traces")


OUT_OF_BOUNDS = [
    ("fio-iolog", "fio version 3 iolog\n0 dut read 0 16777728\n", 2, "length 16777728 is over 16777216"),
    ("fio-iolog", f"fio version 2 iolog\ndut read {2**63} 4096\n", 2, f"offset {2**63} is over {2**63 - 1}"),
    ("csv", "1,hm,0,Read,0,4096,10\n2,hm,0,Read,0," + "9" * 5000 + ",10\n", 2, "Size 999999999999999999999999..."),
    ("blktrace", "  7,0    1        1     0.000000000 31129  D   R 0 + 40000 [x]\n", 1, "count 40000 is over 32768"),
]


@pytest.mark.parametrize("fmt, text, line, said", OUT_OF_BOUNDS)
def test_numbers_past_their_bounds_are_refused_with_their_line(fmt, text, line, said, tmp_path):
    """An IO over 16 MiB, a number over 2^63, one of 5,000 digits (which Python refuses to read): the line."""
    path = tmp_path / f"big-{fmt}.txt"
    path.write_text(text)
    proc = ssdbench("trace", "import", str(path), "--format", fmt, data_dir=tmp_path / "data")
    assert proc.returncode == 2 and proc.stderr.startswith(f"ssdbench: error: {path}, line {line}: "), proc.stderr
    assert said in proc.stderr and len(proc.stderr) < 300, proc.stderr


def test_two_writers_of_one_trace_name_never_share_a_part_file(tmp_path):
    trace = trace_import.import_msr_csv(os.path.join(TRACES, CAPTURES["csv"]))
    target = tmp_path / "t.trace"
    trace_file.write(trace, target, replace=False)
    with pytest.raises(FileExistsError):
        trace_file.write(trace, target, replace=False)  # the second import under the name: refused, kept apart
    assert sorted(os.listdir(tmp_path)) == ["t.trace"] and trace_file.read(str(target)).meta["format"]


def test_a_file_given_as_another_format_is_refused_at_its_first_line(tmp_path):
    proc = ssdbench(
        "trace", "import", os.path.join(TRACES, CAPTURES["csv"]), "--format", "fio-iolog", data_dir=tmp_path
    )
    assert proc.returncode == 2 and "line 1: not a fio iolog" in proc.stderr


def test_names_are_checked_and_taken_once(tmp_path):
    path = os.path.join(TRACES, CAPTURES["csv"])
    assert user_traces.name_from(path) == "msr-handmade"
    assert user_traces.name_from("/x/My Trace.2026.csv") == "my-trace-2026"
    ssdbench("trace", "import", path, "--format", "csv", data_dir=tmp_path, check=True)
    again = ssdbench("trace", "import", path, "--format", "csv", data_dir=tmp_path)
    assert again.returncode == 2 and "already imported; give it another name" in again.stderr
    bad = ssdbench("trace", "import", path, "--format", "csv", "--name", "../etc", data_dir=tmp_path)
    assert bad.returncode == 2 and "use lower-case letters, digits and dashes" in bad.stderr
    ssdbench("trace", "import", path, "--format", "csv", "--name", "second", data_dir=tmp_path, check=True)
    listed = json.loads(ssdbench("trace", "list", "--json", data_dir=tmp_path, check=True).stdout)
    assert [e["name"] for e in listed] == ["msr-handmade", "second"]


@needs_root()
def test_a_trace_changed_after_import_is_not_played(played):
    _, proc, data_dir = played[CHANGED]
    proc.communicate(timeout=900)
    assert proc.returncode == 1
    run = show(1, data_dir)
    assert run["state"] == "failed" and "msr-handmade is gone or changed" in run["error"]


def test_run_takes_one_suite_or_one_trace(tmp_path):
    for args in ((), ("--suite", "smoke", "--trace", "x")):
        proc = ssdbench("run", *args, "--drive", "/dev/null", "--confirm", "x", data_dir=tmp_path)
        assert proc.returncode == 2 and "one of --suite NAME, --suite-file PATH or --trace NAME" in proc.stderr
    missing = ssdbench("run", "--trace", "nope", "--drive", "/dev/null", "--confirm", "x", data_dir=tmp_path)
    assert missing.returncode == 2 and "no imported trace named 'nope'" in missing.stderr
