"""The validity guards (results/validity.py): runs planned by the real planner and written through the real
store, each guard shown flagging a step and leaving a sound one alone; and a run of the real engine."""

import json

import pytest
from conftest import needs_root

from ssdbench.results import document, store, validity
from ssdbench.run import burst, plan, playback
from ssdbench.run.fio_output import Metric
from ssdbench.suites import locked

GIB = 2**30
MB = 10**6
SATA_3G = {"kind": "sata", "port": "ata1", "speed": "3.0 Gbps", "generation": "SATA Gen2"}
PCIE_GEN3_X4 = {"kind": "pcie", "speed": "8.0 GT/s PCIe", "width": "x4", "generation": "PCIe Gen3"}


def toml(value):
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    return json.dumps(value)  # strings and numbers are written alike in TOML


def load_suite(tmp_path, *steps):
    """A suite of these steps, loaded from its file as any suite is (non-standard)."""
    lines = ["format = 1", 'name = "guards"', "version = 1", 'title = "Validity guards"', "[idle]", "seconds = 0"]
    for step in steps:
        lines += ["[[steps]]", *(f"{k} = {toml(v)}" for k, v in step.items())]
    path = tmp_path / "guards.toml"
    path.write_text("\n".join(lines) + "\n")
    return locked.load(path=path, allow_non_standard=True)


def device_step(kind, key=None):
    return {"id": key or kind, "kind": kind, "title": kind, "cooldown": False}


def fio_step(key, rw, size, **more):
    return {
        "id": key,
        "kind": "fio",
        "title": key,
        "cooldown": False,
        "rw": rw,
        "bs": "128k",
        "iodepth": 1,
        "numjobs": 1,
        "span": {"offset": "0", "size": size},
        "data": "n/a" if locked.reads_only(rw) else "incompressible",
        **more,
    }


def record(data_dir, suite, figures=(), capacity=GIB, link=None, details=()):
    """A run of `suite` on a drive of `capacity` bytes, as the runner leaves it: every step planned by the
    planner and done, with its `figures` ({step id: {metric: value}}) and `details`. Its run document."""
    db = store.connect(data_dir)
    drive = {"path": "/dev/sdx", "model": "Guarded SSD", "serial": "G1", "capacity_bytes": capacity, "link": link}
    steps = plan.compile_plan(suite, capacity)
    run_id = store.create_run(db, drive, suite, steps)
    for step in steps:
        sid = store.start_step(db, run_id, step.index, f"runs/{run_id}/{step.index:02d}-{step.id}")
        metrics = [Metric(name, float(value), "", "test") for name, value in dict(figures).get(step.id, {}).items()]
        store.finish_step(db, sid, "done", detail=dict(details).get(step.id), metrics=metrics)
    store.finish_run(db, run_id, "done")
    doc = document.run_document(db, run_id)
    db.close()
    return doc


def suspect(doc):
    return {step["key"]: step["suspect"] for step in doc["steps"]}


# Rule 1: fio's own core

CPU_REASON = "of a CPU (user + system), over 90%: the host, not the drive, set the pace"


def test_a_job_that_kept_fio_s_core_over_90_percent_busy_flags_its_step(tmp_path):
    suite = load_suite(
        tmp_path,
        fio_step("busy", "randread", "1GiB", runtime=1),
        fio_step("just-under", "randread", "1GiB", runtime=1),
        {
            **fio_step("rows", "read", "1GiB", runtime=1),
            "kind": "matrix",
            "jobs": [{"name": "q1", "iodepth": 1}, {"name": "q32", "iodepth": 32}],
        },
    )
    doc = record(
        tmp_path,
        suite,
        {
            "busy": {"usr_cpu": 61.5, "sys_cpu": 30.0},
            "just-under": {"usr_cpu": 60.0, "sys_cpu": 30.0},
            "rows": {"q1.usr_cpu": 20.0, "q1.sys_cpu": 20.0, "q32.usr_cpu": 40.0, "q32.sys_cpu": 55.3},
        },
    )
    assert suspect(doc) == {
        "busy": [f"fio used 91.5% {CPU_REASON}"],
        "just-under": [],
        "rows": [f"fio used 95.3% in q32 {CPU_REASON}"],
    }


# Rule 2: the drive's link


@pytest.mark.parametrize(
    "link, mb_s",
    [
        ({"kind": "sata", "speed": "1.5 Gbps"}, 150),
        (SATA_3G, 300),
        ({"kind": "sata", "speed": "6.0 Gb/s"}, 600),
        ({"kind": "pcie", "speed": "2.5 GT/s PCIe", "width": "x1"}, 250),
        ({"kind": "pcie", "speed": "5.0 GT/s PCIe", "width": "x4"}, 2000),
        (PCIE_GEN3_X4, 8e3 * 4 * 128 / 130 / 8),
        ({"kind": "pcie", "speed": "16.0 GT/s PCIe", "width": "x4"}, 16e3 * 4 * 128 / 130 / 8),
        (None, None),
        ({"kind": "sata", "port": "ata2", "speed": None, "generation": None}, None),
        ({"kind": "pcie", "speed": "Unknown", "width": "x4"}, None),
        ({"kind": "pcie", "speed": "8.0 GT/s PCIe", "width": "x0"}, None),
    ],
)
def test_a_link_carries_its_rate_less_its_encoding(link, mb_s):
    limit = validity.link_limit(link)
    assert limit == (pytest.approx(mb_s * MB) if mb_s else None)


def test_a_bandwidth_above_the_link_flags_its_step_and_no_link_says_nothing(tmp_path):
    suite = load_suite(
        tmp_path,
        fio_step("cached", "read", "1GiB", runtime=1),
        fio_step("at-the-link", "read", "1GiB", runtime=1),
        {
            **fio_step("rows", "read", "1GiB", runtime=1),
            "kind": "matrix",
            "jobs": [
                {"name": "seq-read", "rw": "read"},
                {"name": "seq-write", "rw": "write", "data": "incompressible"},
            ],
        },
    )
    figures = {
        "cached": {"read.bw": 512 * MB},
        "at-the-link": {"read.bw": 300 * MB},
        "rows": {"seq-read.read.bw": 280 * MB, "seq-write.write.bw": 1234 * MB},
    }
    above = "above the 300 MB/s that the drive's link (3.0 Gbps) carries, so something cached it"
    assert suspect(record(tmp_path / "sata", suite, figures, link=SATA_3G)) == {
        "cached": [f"read 512 MB/s: {above}"],
        "at-the-link": [],
        "rows": [f"seq-write write 1,234 MB/s: {above}"],
    }
    assert suspect(record(tmp_path / "nvme", suite, figures, link=PCIE_GEN3_X4)) == {
        "cached": [],
        "at-the-link": [],
        "rows": [],
    }
    # A loop device, a virtual disk: no link, no check.
    assert suspect(record(tmp_path / "loop", suite, figures)) == {"cached": [], "at-the-link": [], "rows": []}


# Rule 3: reads of LBAs that hold nothing


def never_written(read, total, since="the purge in step 1", job=""):
    return (
        f"reads LBAs never written since {since} ({read} of {total}{job}): the drive answers them without "
        "reading its flash"
    )


def test_a_read_past_what_was_written_since_the_purge_is_flagged_and_one_within_it_is_not(tmp_path):
    suite = load_suite(
        tmp_path,
        device_step("purge"),
        fio_step("fill-half", "write", "50%"),
        fio_step("read-all", "randread", "100%", runtime=1),
        fio_step("read-half", "randread", "50%", runtime=1),
        fio_step("fill", "write", "100%"),
        fio_step("read-again", "randread", "100%", runtime=1),
    )
    reads = {"read.io_bytes": GIB}
    doc = record(tmp_path, suite, {"read-all": reads, "read-half": reads, "read-again": reads})
    assert suspect(doc) == {
        "purge": [],
        "fill-half": [],
        "read-all": [never_written("536.9 MB", "1.1 GB")],
        "read-half": [],
        "fill": [],
        "read-again": [],
    }
    titles = {step["key"]: step["title"] for step in doc["steps"]}
    assert f"{titles['read-all']} is suspect: {never_written('536.9 MB', '1.1 GB')}" in doc["warnings"]
    assert not [w for w in doc["warnings"] if titles["read-half"] in w or titles["read-again"] in w]


def test_before_the_first_purge_anything_may_hold_data(tmp_path):
    suite = load_suite(
        tmp_path, fio_step("fill-half", "write", "50%"), fio_step("read-all", "randread", "100%", runtime=1)
    )
    assert suspect(record(tmp_path, suite, {"read-all": {"read.io_bytes": GIB}})) == {"fill-half": [], "read-all": []}


def test_a_trim_empties_the_drive_as_a_purge_does(tmp_path):
    suite = load_suite(
        tmp_path,
        device_step("purge"),
        fio_step("fill", "write", "100%"),
        device_step("trim"),
        fio_step("read-quarter", "randread", "25%", runtime=1),
    )
    doc = record(tmp_path, suite, {"read-quarter": {"read.io_bytes": MB}})
    assert suspect(doc)["read-quarter"] == [never_written("268.4 MB", "268.4 MB", since="the trim in step 3")]


def test_a_sequential_read_counts_only_what_it_read_from_its_offset(tmp_path):
    suite = load_suite(
        tmp_path,
        device_step("purge"),
        fio_step("fill-half", "write", "50%"),
        fio_step("short", "read", "100%", runtime=1),
        fio_step("long", "read", "100%", runtime=1),
    )
    doc = record(tmp_path, suite, {"short": {"read.io_bytes": GIB // 4}, "long": {"read.io_bytes": 3 * GIB // 4}})
    assert suspect(doc)["short"] == []
    assert suspect(doc)["long"] == [never_written("268.4 MB", "805.3 MB")]


def test_a_matrix_names_its_jobs_and_a_job_that_did_not_read_is_not_flagged(tmp_path):
    suite = load_suite(
        tmp_path,
        device_step("purge"),
        fio_step("fill-quarter", "write", "25%"),
        {
            **fio_step("pts", "randrw", "100%", runtime=1),
            "kind": "matrix",
            "axes": {"rwmixread": [100, 0]},
        },
    )
    # fio reports only the directions a job used: the write-only mix has no read figures.
    figures = {"pts": {"mix100.read.io_bytes": GIB, "mix0.write.io_bytes": GIB}}
    assert suspect(record(tmp_path, suite, figures))["pts"] == [never_written("805.3 MB", "1.1 GB", job=" in mix100")]


def burst_step():
    return {
        "id": "burst",
        "kind": "burst",
        "cooldown": False,
        "title": "burst",
        "span": {"offset": "0", "size": "256MiB"},
        "background": {"bs": "4k", "iodepth": 1, "burst": "4000000", "every_s": 0.5, "seed": 2011},
        "foreground": {"bs": "64k", "iodepth": 1, "burst": "4000000", "bursts": 3, "idle_s": 0.5},
    }


def test_mixed_burst_reads_outside_its_background_span_so_it_needs_the_fill(tmp_path):
    mixed = burst_step()
    reads = {"burst": {"foreground.read.io_bytes": 12 * MB, "background.write.io_bytes": 8 * MB}}
    bare = load_suite(tmp_path, device_step("purge"), mixed)
    assert suspect(record(tmp_path / "bare", bare, reads))["burst"] == [
        never_written("12.0 MB", "12.0 MB", job=" in foreground")
    ]
    filled = load_suite(tmp_path, device_step("purge"), fio_step("fill", "write", "100%"), mixed)
    assert suspect(record(tmp_path / "filled", filled, reads))["burst"] == []
    # The background replays timed writes, which its job file does not bound: the step's detail records the
    # span they fall in, and a later read of it is a read of written LBAs.
    after = load_suite(tmp_path, device_step("purge"), mixed, fio_step("read-back", "randread", "256MiB", runtime=1))
    figures = {**reads, "read-back": {"read.io_bytes": MB}}
    span = {"burst": {"background": {"span": {"offset": 0, "size": 256 * 2**20}}}}
    assert suspect(record(tmp_path / "after", after, figures, details=span))["read-back"] == []
    assert suspect(record(tmp_path / "unknown", after, figures))["read-back"] == [never_written("268.4 MB", "268.4 MB")]


def sweep_step(key, **more):
    return {
        "id": key,
        "kind": "sweep",
        "title": key,
        "cooldown": False,
        "zones": 4,
        "zone_size": "4MiB",
        "bs": "128k",
        **more,
    }


def test_a_sweep_reads_what_it_wrote_and_a_trace_is_never_flagged(tmp_path):
    suite = load_suite(
        tmp_path,
        device_step("purge"),
        sweep_step("sweep"),
        {
            "id": "trace",
            "kind": "trace",
            "title": "trace",
            "cooldown": True,
            "profile": "smoke",
            "seed": 1,
        },
        fio_step("read-footprint", "randread", "32MiB", runtime=1),
        fio_step("read-beyond", "randread", "64MiB", runtime=1),
    )
    reads = {"read.io_bytes": MB}
    figures = {"sweep": {"write.avg_mb_s": 300, "read.avg_mb_s": 500}, "read-footprint": reads, "read-beyond": reads}
    # The trace may have written anywhere in its footprint (the end of its highest IO), and nowhere else.
    detail = {"trace": {"stats": {"footprint_bytes": 32 * 2**20}, "mapped_to_capacity": False}}
    assert suspect(record(tmp_path, suite, figures, details={"trace": detail})) == {
        "purge": [],
        "sweep": [],
        "trace": [],
        "read-footprint": [],
        "read-beyond": [never_written("33.6 MB", "67.1 MB")],
    }


def test_a_sweep_s_read_pass_counts_before_or_after_its_write_pass_as_its_passes_say(tmp_path):
    # Methodology 6: a read pass first reads what the steps before it left; a write pass first, what it wrote.
    figures = {key: {"write.avg_mb_s": 300, "read.avg_mb_s": 500} for key in ("read-first", "write-first")}
    suite = load_suite(
        tmp_path,
        device_step("purge"),
        sweep_step("read-first", passes=["read", "write"]),
        device_step("trim"),
        sweep_step("write-first", passes=["write", "read"]),
    )
    zone = 4 * 2**20
    reason = never_written(f"{4 * zone / MB:.1f} MB", f"{4 * zone / MB:.1f} MB", job=" in its read pass (4 of 4 zones)")
    assert suspect(record(tmp_path / "purged", suite, figures)) == {
        "purge": [],
        "read-first": [reason],
        "trim": [],
        "write-first": [],
    }
    # After a fill of half the drive, the read pass reads written LBAs in the zones in that half only.
    filled = load_suite(
        tmp_path,
        device_step("purge"),
        fio_step("fill", "write", "50%"),
        sweep_step("read-first", passes=["read", "write"]),
    )
    half = never_written(f"{2 * zone / MB:.1f} MB", f"{4 * zone / MB:.1f} MB", job=" in its read pass (2 of 4 zones)")
    assert suspect(record(tmp_path / "half", filled, figures))["read-first"] == [half]
    # A sweep without its read figures did not read every zone whole: what it read is not known, so no flag.
    unfinished = {"read-first": {"write.avg_mb_s": 300}}
    assert suspect(record(tmp_path / "unfinished", suite, unfinished))["read-first"] == []


def per_zone_job_file(passes, offsets, zone):
    """A sweep's job file as runs recorded before a pass was one job have it: a job for each zone of each pass."""
    lines = ["[global]", "filename=${SSDBENCH_DUT}"]
    for rw in passes:
        for k, offset in enumerate(offsets):
            lines += [f"[zone{k:03d}-{rw}]", f"rw={rw}", "bs=128k", f"offset={offset}", f"size={zone}", "stonewall=1"]
    return "\n".join(lines) + "\n"


def test_a_sweep_recorded_with_a_job_for_each_zone_is_judged_as_before(tmp_path):
    """Rule 3 reads a stored run's job file: a sweep run before a pass was one fio job has a job for each zone
    (at the offsets of then, spread evenly to the drive's very end), and is judged zone by zone as it was."""
    suite = load_suite(
        tmp_path,
        device_step("purge"),
        fio_step("fill", "write", "50%"),
        sweep_step("read-first", passes=["read", "write"]),
    )
    zone, mib = 4 * 2**20, 2**20
    offsets = [round(k * (GIB - zone) / 3) // mib * mib for k in range(4)]
    figures = {"read-first": {"write.avg_mb_s": 300, "read.avg_mb_s": 500}}
    record(tmp_path, suite, figures)
    db = store.connect(tmp_path)
    try:
        sid = db.execute("SELECT id FROM steps WHERE key = 'read-first'").fetchone()[0]
        store.set_job_file(db, sid, per_zone_job_file(["read", "write"], offsets, zone))
        doc = document.run_document(db, 1)
    finally:
        db.close()
    assert "[zone003-write]" in next(s["job_file"] for s in doc["steps"] if s["key"] == "read-first")
    half = never_written(f"{2 * zone / MB:.1f} MB", f"{4 * zone / MB:.1f} MB", job=" in its read pass (2 of 4 zones)")
    assert suspect(doc)["read-first"] == [half]


# Rule 7: a sweep's pass is one continuous pass


def paused(direction, wall, took, share):
    return (
        f"its {direction} pass took {wall:.3f} s and its IOs {took:.3f} s: for {share} of the pass, over 5%, no IO "
        "was outstanding, so it was not one continuous pass and the drive had time to recover in it"
    )


def test_a_sweep_pass_idle_for_more_than_5_percent_of_its_wall_time_flags_its_step(tmp_path):
    keys = ("paused", "just-under", "short", "older")
    suite = load_suite(tmp_path, *(sweep_step(key) for key in keys))

    def timed(direction, wall, took):
        return {
            f"{direction}.pass_s": wall,
            f"{direction}.io_s": took,
            f"{direction}.idle_percent": 100 * (wall - took) / wall,
        }

    figures = {
        "paused": timed("write", 10.0, 9.0) | timed("read", 4.0, 3.98),
        "just-under": timed("write", 10.0, 9.51) | timed("read", 10.0, 9.6),
        # fio's log clocks a pass in whole milliseconds: 9 ms of a 100 ms pass is within that, not a pause
        "short": timed("write", 0.1, 0.091),
        "older": {"write.avg_mb_s": 300, "read.avg_mb_s": 500},  # recorded before a pass was one job
    }
    assert suspect(record(tmp_path, suite, figures)) == {
        "paused": [paused("write", 10.0, 9.0, "10.0%")],
        "just-under": [],
        "short": [],
        "older": [],
    }


# Rule 4: a trace's busy time against the kernel's


# Rule 6: Mixed Burst's background kept its clock


def test_a_mixed_burst_whose_background_overran_a_period_flags_its_step(tmp_path):
    suite = load_suite(tmp_path, fio_step("fill", "write", "100%"), burst_step())
    kept = {"burst": {"background_periods": 12, "overrun_periods": 0}}
    assert suspect(record(tmp_path / "kept", suite, kept))["burst"] == []
    late = {"burst": {"background_periods": 12, "overrun_periods": 3}}
    doc = record(tmp_path / "late", suite, late)
    reason = (
        "3 of its 12 background periods overran (their writes were not done when the next was due): the drive fell "
        "behind the background it was asked for, so the reads' figures are of another load"
    )
    title = next(step["title"] for step in doc["steps"] if step["key"] == "burst")
    assert suspect(doc)["burst"] == [reason] and f"{title} is suspect: {reason}" in doc["warnings"]


def busy_off(rebuilt, kernel, off):
    return (
        f"the disk busy time rebuilt from fio's logs, {rebuilt:.3f} s, is {off} off the {kernel:.3f} s that the "
        "kernel counted (io_ticks), over 5%: the busy time and the MB/s from it may not be the drive's"
    )


def test_a_trace_s_busy_time_more_than_5_percent_off_the_kernel_s_flags_its_step(tmp_path):
    keys = ("above", "below", "just-above", "just-below", "uncounted", "unknown")
    trace = {"kind": "trace", "cooldown": False, "profile": "smoke", "seed": 1}
    suite = load_suite(tmp_path, *({"id": key, "title": key, **trace} for key in keys))
    figures = {
        "above": {"all.busy_s": 10.51, "kernel.busy_s": 10.0},
        "below": {"all.busy_s": 9.49, "kernel.busy_s": 10.0},
        "just-above": {"all.busy_s": 10.49, "kernel.busy_s": 10.0},
        "just-below": {"all.busy_s": 9.51, "kernel.busy_s": 10.0},
        # The kernel counted nothing (a queue whose iostats is off), or its stat could not be read: no check.
        "uncounted": {"all.busy_s": 10.0, "kernel.busy_s": 0.0},
        "unknown": {"all.busy_s": 10.0},
    }
    assert suspect(record(tmp_path, suite, figures)) == {
        "above": [busy_off(10.51, 10.0, "5.1%")],
        "below": [busy_off(9.49, 10.0, "5.1%")],
        "just-above": [],
        "just-below": [],
        "uncounted": [],
        "unknown": [],
    }


def reads_everywhere(steps):
    """Every job that can read, read as far as fio could: a write-only job has no read figures."""
    figures = {}
    for step in steps:
        if step.kind == "sweep":
            # a sweep keeps no count for each zone: its read figure says that it read every zone whole
            figures[step.id] = {"read.avg_mb_s": 1}
            continue
        for job, options in step.jobs:
            if "read_iolog" not in options and options["rw"] not in ("write", "randwrite"):
                prefix = f"{job}." if len(step.jobs) > 1 else ""
                figures.setdefault(step.id, {})[f"{prefix}read.io_bytes"] = 2**50
    return figures


@pytest.mark.parametrize("name", ["quick", "standard", "full"])
def test_the_shipped_suites_read_only_what_they_wrote(tmp_path, name):
    suite = locked.load(name)
    doc = record(tmp_path, suite, reads_everywhere(plan.compile_plan(suite, 2**40)), capacity=2**40)
    assert [key for key, reasons in suspect(doc).items() if reasons] == []


def test_smoke_reads_the_trimmed_drive_in_its_burst_and_pts_rows(tmp_path):
    # Smoke only checks that every step works, so it never fills the drive after its TRIM: the burst's
    # foreground and the PTS rows then read far beyond what its sweep, trace and burst background wrote.
    suite, capacity = locked.load("smoke"), 4 * GIB
    steps = plan.compile_plan(suite, capacity)
    trace = next(step for step in steps if step.kind == "trace")
    _, _, played = playback.prepare(trace, tmp_path / "trace", capacity, suite, tmp_path)
    background = burst.prepare(next(step for step in steps if step.kind == "burst"), tmp_path / "burst")
    details = {"trace": {"trace": played}, "burst": {"background": background}}
    doc = record(tmp_path, suite, reads_everywhere(steps), capacity, details=details)
    flagged = {key: reasons for key, reasons in suspect(doc).items() if reasons}
    assert sorted(flagged) == ["burst", "pts"]
    assert all(
        reason.startswith("reads LBAs never written since the trim in step 13 (") for [reason] in flagged.values()
    )


# A run of the real engine on a loop device: no link, so only fio's CPU and the plan can flag a step. Whether
# fio's core was the bottleneck depends on the host (a busy 2-core CI machine can push a loop device's fio past
# 90%), so each step must carry exactly the CPU verdict that its own recorded usr_cpu and sys_cpu imply; and on a
# busy host fio waits for a CPU (rule 9), so each carries exactly the host verdict its own figures imply.


@needs_root()
def test_the_engine_run_flags_its_read_beyond_the_fill_and_nothing_else(finished_run):
    data_dir, _ = finished_run
    db = store.connect(data_dir)
    doc = document.run_document(db, 1)
    steps = {step["key"]: step for step in doc["steps"]}
    metrics = {key: {m["name"]: m["value"] for m in step["metrics"]} for key, step in steps.items()}
    # The engine suite fills the first 256 MiB of a 512 MiB drive, then reads all of it sequentially.
    seen = min(512 * 2**20, metrics["seq-read-128k"]["read.io_bytes"])
    reason = never_written(f"{(seen - 256 * 2**20) / MB:.1f} MB", f"{seen / MB:.1f} MB")
    read = metrics["seq-read-128k"]
    assert steps["seq-read-128k"]["suspect"] == [*validity.cpu_bound(read), reason, *validity.host_bound(read)]
    said = f"{steps['seq-read-128k']['title']} is suspect: "
    assert any(w.startswith(said) and reason in w for w in doc["warnings"])
    for key in ("purge", "seq-fill", "rand-read-4k", "rand-write-4k", "seq-write-128k"):
        assert steps[key]["suspect"] == validity.cpu_bound(metrics[key]) + validity.host_bound(metrics[key]), key
