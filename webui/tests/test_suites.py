"""Suites are data: hashed over a canonical form, checked against the shipped manifest."""

import json
import tomllib
from importlib import resources

import pytest

from ssdbench import plan, suites
from ssdbench.errors import SsdbenchError

SMOKE = resources.files("ssdbench") / "suites" / "smoke.toml"


def test_every_shipped_suite_matches_the_manifest():
    for name, digest in suites.manifest().items():
        s = suites.load(name)
        assert s.locked and s.sha256 == digest


def test_layout_and_comments_do_not_change_the_hash(tmp_path):
    f = tmp_path / "smoke.toml"
    f.write_text("# a comment\n\n" + SMOKE.read_text().replace(" = ", "="))
    assert suites.load(path=f).locked


def test_tampered_suite_is_refused_unless_non_standard(tmp_path):
    f = tmp_path / "smoke.toml"
    f.write_text(SMOKE.read_text().replace("runtime = 3", "runtime = 2", 1))
    with pytest.raises(SsdbenchError, match="differs from the locked hash.*--non-standard"):
        suites.load(path=f)
    s = suites.load(path=f, allow_non_standard=True)
    assert not s.locked and s.sha256 != suites.manifest()["smoke"]


def test_unknown_suite_name_lists_the_suites():
    with pytest.raises(SsdbenchError, match="no suite named 'nope'; the suites are: .*smoke"):
        suites.load("nope")


@pytest.mark.parametrize("change, message", [
    (lambda d: d["steps"][1].update(rw="sideways"), "rw must be one of"),
    (lambda d: d["steps"][1].update(iodepth=0), "iodepth must be"),
    (lambda d: d["steps"][2].update(data="incompressible"), "data must be 'n/a' exactly"),
    (lambda d: d["steps"][1].update(bogus=1), "unknown keys"),
    (lambda d: d.update(format=9), "format must be 1"),
])
def test_invalid_suites_are_refused(change, message):
    data = tomllib.loads(SMOKE.read_text())
    change(data)
    with pytest.raises(SsdbenchError, match=message):
        suites.validate(data)


def test_sizes():
    assert suites.parse_size("4k") == 4096
    assert suites.parse_size("8GiB") == 8 * 1024**3
    with pytest.raises(SsdbenchError, match="not a size"):
        suites.parse_size("12 parsecs")


def test_plan_caps_spans_at_capacity_and_writes_runnable_job_files():
    s = suites.load("smoke")
    small = plan.compile_plan(s, 100 * 1024**2)
    fill = next(st for st in small if st.id == "seq-fill")
    assert (fill.offset, fill.size) == (0, 100 * 1024**2)
    big = plan.compile_plan(s, 10 * 1024**3)
    assert next(st for st in big if st.id == "seq-fill").size == 256 * 1024**2
    seq_read = next(st for st in big if st.id == "seq-read-128k")
    assert seq_read.size == 10 * 1024**3  # "100%"
    job = next(st for st in big if st.id == "rand-write-4k").job_file
    for line in ("filename=${SSDBENCH_DUT}", "rw=randwrite", "bs=4k", "iodepth=3", "runtime=3", "time_based=1",
                 "refill_buffers=1", "buffer_compress_percentage=0", "log_avg_msec=1000",
                 "write_iops_log=rand-write-4k", s.sha256):
        assert line in job


def test_estimate_grows_with_capacity_for_size_based_steps():
    s = suites.load("smoke")
    assert plan.estimate_seconds(plan.compile_plan(s, 64 * 1024**2)) < \
        plan.estimate_seconds(plan.compile_plan(s, 64 * 1024**3))


def test_suites_show_json_lists_fio_parameters():
    from conftest import ssdbench
    shown = json.loads(ssdbench("suites", "show", "smoke", "--json", check=True).stdout)
    assert shown["sha256"] == suites.manifest()["smoke"]
    step = next(st for st in shown["steps"] if st["id"] == "rand-read-4k")
    assert (step["rw"], step["bs"], step["iodepth"], step["numjobs"], step["runtime"], step["data"]) == \
        ("randread", "4k", 3, 1, 3, "n/a")
    assert step["span"] == {"offset": "0", "size": "256MiB"}
