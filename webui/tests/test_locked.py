"""Suites are data: hashed over a canonical form, checked against the shipped manifest."""

import hashlib
import json
import math
import os
import subprocess
import tomllib
from importlib import resources

import pytest

from ssdbench import __version__
from ssdbench.errors import SsdbenchError
from ssdbench.run import burst, plan, workload
from ssdbench.suites import locked, trace_profiles

SMOKE = resources.files("ssdbench") / "suites" / "smoke.toml"


def test_every_shipped_suite_matches_the_manifest():
    assert workload.manifest() == locked.manifest()
    for name in locked.names():
        assert workload.verified(locked.load(name)).locked


@pytest.mark.parametrize(
    "change",
    [
        # One number of a trace profile, in the code: the suite file is the same.
        lambda mp: mp.setitem(trace_profiles.PROFILES["smoke"], "footprint", 33 * 1024 * 1024),
        # The compressible-data definition.
        lambda mp: mp.setitem(plan.DATA_OPTIONS["compressible"], "buffer_compress_percentage", 80),
        # A fio option that every replayed trace segment gets.
        lambda mp: mp.setattr(plan, "PER_IO_LOGS", {**plan.PER_IO_LOGS, "log_offset": 0}),
        # How many periods Mixed Burst's background replays: the bytes of its timed writes.
        lambda mp: mp.setattr(burst, "HOLD", burst.HOLD + 1),
    ],
    ids=["trace-profile", "data-pattern", "job-option", "burst-replay"],
)
def test_a_changed_workload_refuses_to_run_as_standard(monkeypatch, change):
    monkeypatch.setattr(workload, "_computed", {})
    change(monkeypatch)
    s = locked.load("smoke")
    assert s.locked  # the suite file itself is unchanged
    with pytest.raises(SsdbenchError, match="workload hash .* differs from the locked .*--non-standard"):
        workload.verified(s)
    marked = workload.verified(s, allow_non_standard=True)
    assert not marked.locked and marked.workload_sha256 != locked.manifest()["smoke"]["workload_sha256"]


def test_the_workload_hash_leaves_out_the_release_and_covers_each_job_file():
    s = locked.load("smoke")
    covered = dict(workload.parts(s, workload.trace_digests(s)))
    assert set(covered) >= {
        "suite.json",
        "trace/trace.txt",
        "trace/trace.fio",
        "burst/burst.fio",
        "burst/background1.replay",
    }
    step = next(p for p in plan.compile_plan(s, workload.REFERENCE_CAPACITY) if p.id == "seq-fill")
    assert __version__ in step.job_file and s.sha256 in step.job_file  # in the comment lines only
    assert (
        covered["seq-fill/seq-fill.fio"]
        == hashlib.sha256(
            "".join(line + "\n" for line in step.job_file.splitlines() if not line.startswith(";")).encode()
        ).hexdigest()
    )


def test_layout_and_comments_do_not_change_the_hash(tmp_path):
    f = tmp_path / "smoke.toml"
    f.write_text("# a comment\n\n" + SMOKE.read_text().replace(" = ", "="))
    assert locked.load(path=f).locked


def test_tampered_suite_is_refused_unless_non_standard(tmp_path):
    f = tmp_path / "smoke.toml"
    f.write_text(SMOKE.read_text().replace("runtime = 2", "runtime = 1", 1))
    with pytest.raises(SsdbenchError, match="differs from the locked hash.*--non-standard"):
        locked.load(path=f)
    s = locked.load(path=f, allow_non_standard=True)
    assert not s.locked and s.sha256 != locked.manifest()["smoke"]["suite_sha256"]


def test_unknown_suite_name_lists_the_suites():
    with pytest.raises(SsdbenchError, match="no suite named 'nope'; the suites are: .*smoke"):
        locked.load("nope")


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d["steps"][1].update(rw="sideways"), "rw must be one of"),
        (lambda d: d["steps"][1].update(iodepth=0), "iodepth must be"),
        (lambda d: d["steps"][5].update(data="incompressible"), "data must be 'n/a' exactly"),
        (lambda d: d["steps"][7].update(axes={"colour": ["red"]}), "axes must be non-empty lists"),
        (lambda d: d["steps"][7].update(curve="iodepth2"), "curve must be bs, one of the axes"),
        (lambda d: d["steps"][7].update(curve="iodepth"), "curve must be bs"),  # no unit to draw a curve by
        (lambda d: d["steps"][9].update(zones=1), "zones must be a whole number >= 2"),
        (lambda d: d["steps"][9].update(passes=["read"]), "passes must be one of"),
        (lambda d: d["steps"][9].update(passes=["write", "write"]), "passes must be one of"),
        (lambda d: d["steps"][13].update(baseline="sweep-recovered"), "baseline must name an earlier sweep"),
        (lambda d: d["steps"][14].update(profile="heavy-2099"), "profile must be one of"),
        (lambda d: d["steps"][15]["foreground"].pop("idle_s"), "foreground must have exactly the keys"),
        (lambda d: d["steps"][15]["background"].pop("seed"), "background must have exactly the keys"),
        (lambda d: d["steps"][15]["background"].update(every_s=0), "background.every_s must be seconds > 0"),
        (lambda d: d["steps"][15]["background"].update(every_s=0.0005), "in whole milliseconds"),
        (lambda d: d["steps"][15]["background"].update(every_s=float("nan")), "in whole milliseconds"),
        (lambda d: d["steps"][15]["background"].update(iodepth=33), "background.iodepth must be at most 32"),
        (lambda d: d["steps"][8].update(steady={"from_s": 6, "round_s": 2}), "steady must be"),
        (lambda d: d["steps"][1].update(loops=0), "loops must be a whole number >= 1"),
        (lambda d: d["steps"][8].update(loops=2), "loops is for a size-based step"),
        (lambda d: d["steps"][1].update(bogus=1), "unknown keys"),
        (lambda d: d["steps"][1].pop("cooldown"), "cooldown must be true or false"),
        (lambda d: d["steps"][1].update(cooldown="yes"), "cooldown must be true or false"),
        (lambda d: d.update(format=9), "format must be 1"),
        (lambda d: d["repeat"].update(cov_percent=0), "repeat.cov_percent must be a percentage above 0"),
        (lambda d: d["repeat"].update(qd1_latency_cov_percent="3"), "repeat.qd1_latency_cov_percent must be"),
        (lambda d: d["repeat"].update(cov_percent=True), "repeat.cov_percent must be"),
        (lambda d: d["repeat"].update(p99_cov_percent=5), "repeat takes only"),
        (lambda d: d.update(repeat=2.5), "repeat takes only"),
    ],
)
def test_invalid_suites_are_refused(change, message):
    data = tomllib.loads(SMOKE.read_text())
    change(data)
    with pytest.raises(SsdbenchError, match=message):
        locked.validate(data)


def test_sizes():
    assert locked.parse_size("4k") == 4096
    assert locked.parse_size("8GiB") == 8 * 1024**3
    with pytest.raises(SsdbenchError, match="not a size"):
        locked.parse_size("12 parsecs")


def test_plan_caps_spans_at_capacity_and_writes_runnable_job_files():
    s = locked.load("smoke")
    small = plan.compile_plan(s, 100 * 1024**2)
    corner = next(st for st in small if st.id == "rand-read-4k")
    assert (corner.offset, corner.size) == (0, 64 * 1024**2)
    tiny = plan.compile_plan(s, 40 * 1024**2 + 4096)
    assert next(st for st in tiny if st.id == "rand-read-4k").size == 40 * 1024**2  # capped, 1 MiB aligned
    big = plan.compile_plan(s, 10 * 1024**3)
    seq_read = next(st for st in big if st.id == "seq-read-128k")
    assert seq_read.size == 10 * 1024**3  # "100%"
    job = next(st for st in big if st.id == "rand-write-4k-qd3").job_file
    for line in (
        "filename=${SSDBENCH_DUT}",
        "rw=randwrite",
        "bs=4k",
        "iodepth=3",
        "runtime=2",
        "time_based=1",
        "refill_buffers=0",
        "scramble_buffers=hash",
        "log_avg_msec=1000",
        "write_iops_log=rand-write-4k-qd3",
        s.sha256,
    ):
        assert line in job


def test_a_4kn_drive_runs_the_block_sizes_it_cannot_take_rounded_up_and_the_plan_says_which():
    s = locked.load("standard")
    native, fitted = plan.compile_plan(s, 2**40), plan.compile_plan(s, 2**40, 4096)
    assert not [step.id for step in native if step.adapted]
    rows = [f"{rw}.qd{qd}.bs{bs}" for rw in ("read", "write") for qd in (1, 32) for bs in ("512", "1k", "2k")]
    assert {step.id: step.adapted for step in fitted if step.adapted} == {
        "xfer": {row: (row.rpartition(".bs")[2], 4096) for row in rows}
    }
    xfer = next(step for step in fitted if step.id == "xfer")
    assert dict(xfer.jobs)["read.qd1.bs512"]["bs"] == 4096 and dict(xfer.jobs)["read.qd1.bs4k"]["bs"] == "4k"
    assert "[read.qd1.bs512]\nrw=read\nbs=4096\n" in xfer.job_file
    assert xfer.to_dict()["adapted"][0] == "bs 512 runs as 4096 B in " + ", ".join(r for r in rows if "bs512" in r)
    assert f"; adapted to the drive: {xfer.to_dict()['adapted'][0]}\n" in xfer.job_file
    # Every other step runs as on a drive of 512 B blocks.
    assert [a.job_file for a in native if a.id != "xfer"] == [b.job_file for b in fitted if b.id != "xfer"]


def test_a_burst_on_larger_blocks_still_writes_its_megabytes_per_period(tmp_path):
    burst_step = next(step for step in plan.compile_plan(locked.load("smoke"), 2**30, 8192) if step.id == "burst")
    assert burst_step.adapted == {"background": ("4k", 8192)} and dict(burst_step.jobs)["foreground"]["bs"] == "64k"
    detail = burst.prepare(burst_step, tmp_path)
    assert detail["writes_per_period"] == -(-4_000_000 // 8192)
    writes = [w for _, name in burst.writers(burst_step) for w in burst.planned_writes(tmp_path / name)]
    assert {length for _, _, length in writes} == {8192} and all(offset % 8192 == 0 for _, offset, _ in writes)


def test_estimate_grows_with_capacity_for_size_based_steps():
    s = locked.load("smoke")
    assert plan.estimate_seconds(plan.compile_plan(s, 64 * 1024**2)) < plan.estimate_seconds(
        plan.compile_plan(s, 64 * 1024**3)
    )


@pytest.mark.parametrize("suite", ["standard", "full"])
def test_consistency_and_torture_run_longer_on_a_larger_drive_as_their_spare_area_takes_longer(suite):
    # 2000 s (20 min, 30 min) for every 256 GB of span, never less; rounds of 60 s, as many as the runtime holds.
    def steps(capacity):
        return {p.id: p for p in plan.compile_plan(locked.load(suite), capacity)}

    small, large = steps(128 * 10**9), steps(4 * 10**12)
    for key, seconds in (("consistency", 2000), ("torture-write", 1200)):
        assert small[key].runtime == seconds and f"runtime={seconds}\n" in small[key].job_file
        factor = large[key].size / 256e9
        assert large[key].runtime == math.ceil(seconds * factor) > 10 * seconds
        assert f"runtime={large[key].runtime}\n" in large[key].job_file
        # its runtime, the runner's work around the step and fio's start of its one job
        assert large[key].estimate_s == pytest.approx(large[key].runtime + plan.STEP_START_S + plan.JOB_START_S)
    assert small["consistency"].spec["steady"] == large["consistency"].spec["steady"] == {"round_s": 60}
    c = large["consistency-spare"]
    assert c.runtime == math.ceil(2000 * c.size / 256e9) and c.size < large["consistency"].size
    # the preconditioning writes the span twice: its estimate is two passes
    fill = large["fill-consistency"]
    passes = 2 * fill.size / plan.Rates(locked.load(suite)).write
    assert "loops=2\n" in fill.job_file and fill.estimate_s == pytest.approx(
        passes + plan.STEP_START_S + plan.JOB_START_S
    )


def test_suites_show_json_lists_fio_parameters():
    from conftest import ssdbench

    shown = json.loads(ssdbench("suites", "show", "smoke", "--json", check=True).stdout)
    assert shown["sha256"] == locked.manifest()["smoke"]["suite_sha256"]
    assert shown["workload_sha256"] == locked.manifest()["smoke"]["workload_sha256"]
    job = next(st for st in shown["steps"] if st["id"] == "rand-read-4k")["jobs"][0]
    assert (job["rw"], job["bs"], job["iodepth"], job["numjobs"], job["runtime"], job["data"]) == (
        "randread",
        "4k",
        3,
        1,
        2,
        "n/a",
    )
    assert job["span"] == {"offset": "0", "size": "64MiB"}
    assert shown["repeat"] == {"cov_percent": 2.5, "qd1_latency_cov_percent": 3.0}


def test_every_suite_states_its_repeatability_thresholds_and_a_suite_without_gets_the_defaults():
    for name in locked.names():
        assert locked.load(name).data["repeat"] == {"cov_percent": 2.5, "qd1_latency_cov_percent": 3.0}, name
    data = tomllib.loads(SMOKE.read_text())
    data["repeat"] = {"cov_percent": 4}
    locked.validate(data)
    assert locked.repeat_thresholds(data) == {"cov_percent": 4, "qd1_latency_cov_percent": 3.0}
    del data["repeat"]
    assert (
        locked.repeat_thresholds(data) == locked.REPEAT_DEFAULTS == {"cov_percent": 2.5, "qd1_latency_cov_percent": 3.0}
    )


def steps_by_id(name):
    return {s["id"]: s for s in locked.load(name).steps}


def test_standard_suite_has_the_methodologys_numbers():
    st = steps_by_id("standard")
    # 2: sequential fill, 128 KiB QD32, incompressible, whole span
    fill = st["seq-fill"]
    assert (fill["rw"], fill["bs"], fill["iodepth"], fill["span"]["size"], fill["data"]) == (
        "write",
        "128k",
        32,
        "100%",
        "incompressible",
    )
    # 3: the four corners table
    corners = {
        "rand-write-4k-qd3-comp": ("randwrite", "4k", "8GiB", 3, 180, "compressible"),
        "rand-write-4k-qd3": ("randwrite", "4k", "8GiB", 3, 180, "incompressible"),
        "rand-write-4k-qd32-comp": ("randwrite", "4k", "8GiB", 32, 180, "compressible"),
        "rand-write-4k-qd32": ("randwrite", "4k", "8GiB", 32, 180, "incompressible"),
        "rand-read-4k-qd3": ("randread", "4k", "8GiB", 3, 180, "n/a"),
        "seq-read-128k": ("read", "128k", "100%", 1, 60, "n/a"),
        "seq-write-128k": ("write", "128k", "100%", 1, 60, "incompressible"),
    }
    for key, row in corners.items():
        s = st[key]
        assert (s["rw"], s["bs"], s["span"]["size"], s["iodepth"], s["runtime"], s["data"]) == row, key
    # 4: 512 B to 8 MiB, every power of two, QD1 and QD32, 8 GiB, 10 s
    x = st["xfer"]
    assert [locked.parse_size(b) for b in x["axes"]["bs"]] == [512 * 2**i for i in range(15)]
    assert x["axes"]["iodepth"] == [1, 32] and x["span"]["size"] == "8GiB" and x["runtime"] == 10
    # 5: the span twice in 128 KiB sequential writes (PTS's preconditioning), then 2000 s at QD32 4K, judged on
    # 60 s rounds; 25% spare area is a 75% span for preconditioning and test
    for key, span in (("consistency", "100%"), ("consistency-spare", "75%")):
        c = st[key]
        assert (c["rw"], c["bs"], c["iodepth"], c["runtime"], c["span"]["size"]) == ("randwrite", "4k", 32, 2000, span)
        assert c["steady"] == {"round_s": 60}
    for key, span in (("fill-consistency", "100%"), ("fill-spare", "75%")):
        f = st[key]
        assert (f["rw"], f["bs"], f["iodepth"], f["loops"], f["data"], f["span"]["size"]) == (
            "write",
            "128k",
            32,
            2,
            "incompressible",
            span,
        )
    ids = list(st)
    assert ids.index("purge-spare") < ids.index("fill-spare") < ids.index("consistency-spare")
    # 6: three sweeps of 200 zones of 64 MiB at 128 KiB; 20 minutes of 4K QD32 random writes; timed TRIM
    # each a write pass and a read pass over all of its zones; the degraded one reads what the torture left first
    for key, passes in (
        ("sweep-clean", ["write", "read"]),
        ("sweep-dirty", ["read", "write"]),
        ("sweep-recovered", ["write", "read"]),
    ):
        assert (st[key]["zones"], st[key]["zone_size"], st[key]["bs"], st[key]["passes"]) == (
            200,
            "64MiB",
            "128k",
            passes,
        )
    t = st["torture-write"]
    assert (t["rw"], t["bs"], t["iodepth"], t["runtime"], t["span"]["size"]) == ("randwrite", "4k", 32, 1200, "100%")
    order = [
        ids.index(k)
        for k in (
            "purge-torture",
            "sweep-clean",
            "fill-torture",
            "torture-write",
            "sweep-dirty",
            "trim",
            "sweep-recovered",
        )
    ]
    assert order == sorted(order) and st["trim"]["kind"] == "trim"
    # 8: Mixed Burst
    b = st["burst"]
    assert b["span"]["size"] == "8GiB"
    # the workload's QD 2 of 004's revision: one write and one read outstanding
    assert b["background"] == {"bs": "4k", "iodepth": 1, "burst": "40000000", "every_s": 2, "seed": 2011}
    assert {k: b["foreground"][k] for k in ("bs", "iodepth", "burst", "bursts")} == {
        "bs": "64k",
        "iodepth": 1,
        "burst": "400000000",
        "bursts": 10,
    }
    pre = st["precondition-burst"]
    assert (pre["rw"], pre["bs"], pre["iodepth"], pre["span"]["size"], "runtime" in pre, pre["randommap"]) == (
        "randwrite",
        "4k",
        32,
        "8GiB",
        False,
        True,
    )
    # from a purged drive: purge, fill, precondition, burst
    assert ids[ids.index("burst") - 3 : ids.index("burst")] == ["purge-burst", "fill-burst", "precondition-burst"]
    assert st["purge-burst"]["kind"] == "purge"
    # 7: both synthetic profiles, played whole (no step can shorten a trace)
    assert st["trace-heavy"]["profile"] == "heavy-2011" and st["trace-light"]["profile"] == "light-2011"
    assert set(st["trace-heavy"]) <= locked.COMMON_KEYS | {"profile", "seed"}


@pytest.mark.parametrize("name", ["standard", "full"])
def test_the_storage_bench_plays_on_a_purged_then_filled_drive(name):
    """Issue 33, item 4: the traces start as the articles' tests do, from a secure erase, then the sequential fill
    that a user's drive holds data as; not from the state the torture's TRIM and the recovered sweep left."""
    st = steps_by_id(name)
    ids = list(st)
    first = min(i for i, key in enumerate(ids) if st[key]["kind"] == "trace")
    assert ids[first - 2 : first] == ["purge-trace", "fill-trace"]
    assert st["purge-trace"]["kind"] == "purge" and st["fill-trace"]["span"] == {"offset": "0", "size": "100%"}
    assert all(st[key]["kind"] == "trace" for key in ids[first : first + 2])


@pytest.mark.parametrize("name", ["smoke", "quick", "standard", "full"])
def test_the_sequential_read_reads_the_sequential_fill_before_any_random_write(name):
    ids = list(steps_by_id(name))
    assert ids.index("seq-fill") + 1 == ids.index("seq-read-128k")
    assert ids.index("seq-read-128k") < min(i for i, key in enumerate(ids) if key.startswith("rand-write"))


def test_mixed_burst_preconditioning_writes_every_block_of_its_span(tmp_path):
    # The standard plan's job file, run by fio on a 16 MiB file in place of the 8 GiB span: every 4 KiB block
    # written once. Without the random map (the suites' norandommap) about 63% of them are.
    pre = next(p for p in plan.compile_plan(locked.load("standard"), 2 * 10**12) if p.id == "precondition-burst")
    assert "norandommap=0\n" in pre.job_file.split("[precondition-burst]")[1]
    ratios = {}
    for name, text in (("map", pre.job_file), ("nomap", pre.job_file.replace("norandommap=0\n", ""))):
        target = tmp_path / f"{name}.bin"
        subprocess.run(["truncate", "-s", "16M", str(target)], check=True)
        job = tmp_path / f"{name}.fio"
        job.write_text(text.replace("direct=1", "direct=0").replace("size=8589934592", "size=16777216"))
        subprocess.run(
            ["fio", "--output=/dev/null", str(job)],
            check=True,
            cwd=tmp_path,
            env=dict(os.environ, SSDBENCH_DUT=str(target)),
        )
        data = target.read_bytes()
        blocks = [data[i : i + 4096] for i in range(0, len(data), 4096)]
        ratios[name] = sum(1 for b in blocks if b.strip(b"\0")) / len(blocks)
    assert ratios["map"] == 1.0 and ratios["nomap"] < 0.7, ratios


def test_the_standard_plan_plays_the_heavy_trace_at_its_published_length():
    from conftest import ssdbench

    shown = json.loads(ssdbench("plan", "--suite", "standard", "--capacity", "2TiB", "--json", check=True).stdout)
    heavy = next(st for st in shown["steps"] if st["id"] == "trace-heavy")
    trace = heavy["trace"]
    assert (trace["profile"], trace["reads"], trace["writes"]) == ("heavy-2011", 2_168_893, 1_783_447)
    assert abs(trace["bytes_written"] - 106.32e9) <= 2**20  # 106.32 GB, as seed 000 publishes
    assert trace["segments"] == 900
    # the estimate: the bytes at the suite's assumed rates, each segment's job taking over, and the fixed idle
    standard = locked.load("standard").data
    rates = standard["estimate"]
    moved = trace["bytes_read"] / (rates["read_mb_s"] * 1e6) + trace["bytes_written"] / (rates["write_mb_s"] * 1e6)
    assert heavy["estimate_s"] == pytest.approx(moved + 900 * plan.HANDOFF_S + standard["idle"]["seconds"])
    assert "full length" in heavy["title"]


def test_full_suite_adds_section_9():
    full = steps_by_id("full")
    assert set(steps_by_id("standard")) < set(full)
    names = [j["name"] for j in full["cdm"]["jobs"]]
    assert names == [
        f"{row}-{d}" for row in ("SEQ1M-Q8T1", "SEQ1M-Q1T1", "RND4K-Q32T1", "RND4K-Q1T1") for d in ("read", "write")
    ]
    pts = full["pts"]
    assert pts["axes"]["rwmixread"] == [100, 65, 0]
    assert [locked.parse_size(b) for b in pts["axes"]["bs"]] == [4096 * 2**i for i in range(6)] + [1024**2]
    assert "99.99" in locked.load("full").data["fio"]["percentile_list"].split(":")
    assert full["qd1-latency"]["iodepth"] == 1
    oltp = full["oltp"]
    assert (oltp["rw"], oltp["bs"], oltp["rwmixread"]) == ("randrw", "8k", 70)


def test_quick_suite_is_the_cdm_rows_and_a_short_four_corners():
    quick = locked.load("quick")
    est = plan.estimate_seconds(plan.compile_plan(quick, 4 * 1024**4))
    assert 5 * 60 < est < 15 * 60
    assert "cdm" in steps_by_id("quick")


def test_idle_only_where_the_methodology_idles():
    """A step that measures the state the step before it left (after a fill, a precondition, a torture
    write or a TRIM) starts at once; the tests of a settled drive idle first. suites show says which."""
    from conftest import ssdbench

    for name in locked.names():
        shown = json.loads(ssdbench("suites", "show", name, "--json", check=True).stdout)
        cooldown = {s["id"]: s["cooldown"] for s in shown["steps"]}
        assert set(cooldown) == {s["id"] for s in locked.load(name).steps}
        for after_state in ("consistency", "consistency-spare", "sweep-dirty", "sweep-recovered", "burst", "pts"):
            assert cooldown.get(after_state) in (False, None), (name, after_state)
        for prep in ("purge", "seq-fill", "fill-torture", "torture-write", "trim", "precondition-burst"):
            assert cooldown.get(prep) in (False, None), (name, prep)
        for test in ("rand-write-4k-qd3", "rand-read-4k-qd3", "seq-read-128k", "cdm", "trace-heavy", "oltp"):
            assert cooldown.get(test) in (True, None), (name, test)
    shown = ssdbench("suites", "show", "standard", check=True).stdout
    assert "idles first" in shown and "a step that idles first idles 60 s, whatever the drive's temperature" in shown


def test_suites_show_lists_every_fio_job_with_its_parameters():
    from conftest import ssdbench

    out = json.loads(ssdbench("suites", "show", "standard", "--json", check=True).stdout)
    assert out["locked"] and out["sha256"] == locked.manifest()["standard"]["suite_sha256"]
    for s in out["steps"]:
        if s["kind"] in ("purge", "trim"):
            continue
        assert s["jobs"], s["id"]
        for job in s["jobs"]:
            assert set(plan.PARAMS) <= set(job), (s["id"], job)
            assert {"offset", "size"} == set(job["span"])


def test_plan_estimate_grows_with_capacity_where_fills_and_sweeps_do():
    from conftest import ssdbench

    for name in ("quick", "standard", "full"):
        small, big = (
            json.loads(ssdbench("plan", "--suite", name, "--capacity", str(c), "--json", check=True).stdout)[
                "estimate_s"
            ]
            for c in (256 * 1024**3, 2 * 1024**4)
        )
        # quick fills only its 8 GiB span, so it takes the same time on any drive
        assert big == small if name == "quick" else big > small, name


def test_plan_for_a_4kn_drive_lists_what_it_adapts_and_refuses_a_block_that_is_no_block():
    from conftest import ssdbench

    argv = ("plan", "--suite", "standard", "--capacity", "1TiB", "--json", "--logical-block")
    out = json.loads(ssdbench(*argv, "4k", check=True).stdout)
    assert out["logical_block_bytes"] == 4096
    assert {s["id"]: len(s["adapted"]) for s in out["steps"] if s["adapted"]} == {"xfer": 3}
    assert not [s for s in json.loads(ssdbench(*argv, "512", check=True).stdout)["steps"] if s["adapted"]]
    for bad in ("3000", "0", "2MiB", "4 parsecs"):
        proc = ssdbench(*argv, bad)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, bad
        assert proc.stderr.splitlines()[-1].startswith("ssdbench plan: error: argument --logical-block: "), bad
