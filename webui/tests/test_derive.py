"""Every step type of the methodology, run for real in its smoke size on a loop device.

One smoke run (`smoke_run`, shared by the session) serves the whole module; each test re-derives its
figures from the raw files fio wrote, the way the methodology says, and compares them with what was stored.
"""

import glob
import gzip
import os
import statistics
import subprocess
import zlib

import pytest
from conftest import data, needs_root

from ssdbench.results import document, store, validity
from ssdbench.run import derive, fio_output, handoff, plan, steady
from ssdbench.suites import locked, trace_file, trace_generator

pytestmark = needs_root()


def step(run, key):
    return next(s for s in run["steps"] if s["key"] == key)


def metrics(s):
    return {m["name"]: m for m in s["metrics"]}


def folder(data_dir, s):
    return os.path.join(data_dir, s["out_dir"])


def fio_doc(data_dir, s):
    with open(os.path.join(folder(data_dir, s), "fio.json")) as f:
        return fio_output.fio_result(f.read())


def series(run, data_dir, s, name):
    """A stored series with its points, read through the CLI's JSON."""
    found = [x for x in run["series"] if x["step_id"] == s["id"] and x["name"] == name]
    assert len(found) == 1, (name, [x["name"] for x in run["series"] if x["step_id"] == s["id"]])
    return found[0]


def points(data_dir, series_id):
    db = store.connect(data_dir)
    try:
        return store.series_points(db, series_id)
    finally:
        db.close()


def test_every_step_kind_ran_and_finished(smoke_run):
    run, _ = smoke_run
    assert run["state"] == "done", run["error"]
    assert {s["kind"] for s in run["steps"]} == set(locked.STEP_KINDS)
    assert all(s["state"] == "done" for s in run["steps"])


def test_purge_records_the_method_and_why_stronger_ones_were_not_used(smoke_run):
    run, _ = smoke_run
    detail = step(run, "purge")["detail"]
    assert detail["method"] == "discard (whole device)" and detail["command"][0] == "blkdiscard"
    assert detail["attempts"] == [{"method": "discard (whole device)", "outcome": "used"}]


def test_four_corners_report_fios_average_and_max_latency(smoke_run):
    run, data_dir = smoke_run
    for key in ("rand-write-4k-qd3-comp", "rand-write-4k-qd3", "rand-read-4k", "seq-read-128k", "seq-write-128k"):
        s = step(run, key)
        doc, m = fio_doc(data_dir, s), metrics(s)
        d = "read" if "read" in key else "write"
        assert m[f"{d}.lat_max"]["value"] == doc["jobs"][0][d]["lat_ns"]["max"]
        assert m[f"{d}.lat_mean"]["value"] == doc["jobs"][0][d]["lat_ns"]["mean"]
        assert m[f"{d}.mb_s"]["value"] == doc["jobs"][0][d]["bw_bytes"] / 1e6
        assert m[f"{d}.lat_p99.99"]["source"].endswith("/lat_ns/percentile/99.990000")


def written_blocks_ratio(path, bs=4096):
    """zlib's compression ratio over the blocks a job wrote (a fresh file is zero where nothing was), each block
    compressed on its own, as a drive's compressor sees one write at a time (docs/methodology.md, "incompressible
    data"); and whether every block written differs from every other."""
    with open(path, "rb") as f:
        data = f.read()
    blocks = [data[i : i + bs] for i in range(0, len(data), bs)]
    written = [b for b in blocks if b.count(0) != bs]
    assert len(written) * bs > 1024 * 1024
    return len(written) * bs / sum(len(zlib.compress(b, 6)) for b in written), len(set(written)) == len(written)


def test_compressible_and_incompressible_runs_write_different_data(smoke_run, tmp_path):
    run, _ = smoke_run
    ratios = {}
    for key in ("rand-write-4k-qd3-comp", "rand-write-4k-qd3"):
        target = tmp_path / f"{key}.bin"
        subprocess.run(["truncate", "-s", "64M", str(target)], check=True)
        job = tmp_path / f"{key}.fio"
        # The saved job file, as it ran; a regular file keeps the data for us to inspect.
        job.write_text(step(run, key)["job_file"].replace("direct=1", "direct=0"))
        subprocess.run(
            ["fio", "--output-format=json", "--output=/dev/null", str(job)],
            cwd=tmp_path,
            check=True,
            env=dict(os.environ, SSDBENCH_DUT=str(target)),
        )
        ratios[key] = written_blocks_ratio(target)
    assert ratios["rand-write-4k-qd3"][0] < 1.05 and ratios["rand-write-4k-qd3"][1], ratios
    assert ratios["rand-write-4k-qd3-comp"][0] > 3, ratios


def test_sequential_fill_keeps_its_bandwidth_curve(smoke_run):
    run, data_dir = smoke_run
    s = step(run, "seq-fill")
    curve = series(run, data_dir, s, "write.bw")
    assert curve["unit"] == "KiB/s" and points(data_dir, curve["id"])


def test_consistency_figures_come_from_fios_iops_log(smoke_run):
    run, data_dir = smoke_run
    s = step(run, "consistency")
    log = glob.glob(os.path.join(folder(data_dir, s), "consistency_iops.*.log"))[0]
    with open(log) as f:
        samples = [x for x in fio_output.fio_log(f.read()) if x.direction == 1]
    m = metrics(s)
    # smoke states 6 s for every 128 MiB of a 256 MiB span on 2 s rounds: scaled to 12 s, at most 6 rounds (fio
    # can log a second less than the step's time, its last partial sample dropped: then 5)
    values = [x.value for x in samples]
    rounds = len(values) // 2
    assert "runtime=12" in s["job_file"] and m["steady.rounds"]["value"] == rounds and rounds in (5, 6)
    # The rule judges windows from the step's start; its figures are those of the final window of 5 rounds.
    lo, hi = 2 * (rounds - 5), 2 * rounds
    assert (m["steady.window_from_s"]["value"], m["steady.window_to_s"]["value"]) == (lo, hi)
    window = values[lo:hi]
    assert m["steady.avg_iops"]["value"] == pytest.approx(statistics.fmean(window), rel=1e-12)
    assert m["steady.min_iops"]["value"] == min(window)
    assert m["steady.stddev_iops"]["value"] == pytest.approx(statistics.pstdev(window), rel=1e-9)
    found = steady.detect(values, 2)
    assert m["steady.reached"]["value"] == float(found.reached)
    assert f"rounds {rounds - 4} to {rounds} (t = {lo} to {hi} s)" in m["steady.reached"]["source"]
    assert ("steady.reached_s" in m) == found.reached
    if found.reached:
        assert m["steady.reached_s"]["value"] == found.t_s >= steady.WINDOW * 2
    assert points(data_dir, series(run, data_dir, s, "write.iops")["id"]) == [(x.t_ms, x.value) for x in samples]


def test_steady_state_figures_are_those_of_the_final_window_and_too_few_rounds_say_why():
    # 13 s of a once-a-second IOPS log, rounds of 2 s: 6 whole rounds, the final window rounds 2 to 6.
    points = [(1000 * (t + 1), 700.0 if t < 2 else 1000.0 + (t % 2)) for t in range(13)]
    m = {x.name: x for x in derive.steady_state(points, 2, 13, "write.iops")}
    assert m["steady.rounds"].value == 6 and (m["steady.window_from_s"].value, m["steady.window_to_s"].value) == (2, 12)
    assert m["steady.avg_iops"].value == 1000.5 and m["steady.min_iops"].value == 1000.0
    assert m["steady.stddev_iops"].value == 0.5 and m["steady.reached"].value == 1.0
    assert m["steady.reached_s"].value == 12  # the window of rounds 1 to 5 holds the 700s: a 32% range
    # A drive still falling 10% a round never settles: the final window fails, with its numbers; its figures stay.
    falling = [(1000 * (t + 1), 1000.0 * 0.9 ** (t // 2)) for t in range(12)]
    m = {x.name: x for x in derive.steady_state(falling, 2, 12, "write.iops")}
    assert m["steady.reached"].value == 0 and "steady.reached_s" not in m and "steady.avg_iops" in m
    assert m["steady.reached"].source.endswith(
        "rounds 2 to 6 (t = 2 to 12 s): range 42.0% (at most 20%) and slope excursion 41.9% (at most 10%) of its "
        "average 737 IOPS, slope -10.49% of it a round, a decline (over 1% a round, and over 2.353 standard errors "
        "of the slope: more than its rounds' scatter explains): not reached"
    )
    assert m["steady.slope_percent_per_min"].value == pytest.approx(-10.49 * 30, abs=0.2)
    # 9 s hold 4 whole rounds: no window, so no figures, and the reason says why.
    m = {x.name: x for x in derive.steady_state(points[:9], 2, 9, "write.iops")}
    assert set(m) == {"steady.rounds", "steady.reached"} and m["steady.reached"].value == 0
    assert m["steady.reached"].source.endswith(
        "not reached: the step's 9 s held 4 whole rounds of 2 s, and a window is 5"
    )


def test_transfer_size_curves_are_fios_bandwidth_per_job(smoke_run):
    run, data_dir = smoke_run
    s = step(run, "xfer")
    doc = fio_doc(data_dir, s)
    by_name = {job["jobname"]: job for job in doc["jobs"]}
    for rw in ("read", "write"):
        for qd in (1, 32):
            curve = series(run, data_dir, s, f"{rw}.qd{qd}.mb_s")
            assert curve["x_unit"] == "bytes"
            expected = [
                (4096, by_name[f"{rw}.qd{qd}.bs4k"][rw]["bw_bytes"] / 1e6),
                (1024**2, by_name[f"{rw}.qd{qd}.bs1m"][rw]["bw_bytes"] / 1e6),
            ]
            assert points(data_dir, curve["id"]) == expected


def sweep_log(data_dir, s, direction):
    """The pass's per-IO latency log: every IO it did, in order."""
    return derive.per_io_log(folder(data_dir, s), f"{direction}-pass")[1]


def test_sweeps_report_each_zone_and_the_recovery(smoke_run):
    run, data_dir = smoke_run
    capacity, zone, bs = run["drive"]["capacity_bytes"], 4 * 1024**2, 128 * 1024
    offsets = plan.zone_offsets(4, zone, capacity)
    averages = {}
    for key in ("sweep-clean", "sweep-dirty", "sweep-recovered"):
        s = step(run, key)
        doc, m = fio_doc(data_dir, s), metrics(s)
        assert len(doc["jobs"]) == 2  # a write pass and a read pass, each one job over its 4 zones
        for d in ("write", "read"):
            ios = sweep_log(data_dir, s, d)
            per = zone // bs
            # each zone's bytes over the sum of its IOs' latencies (ns): at QD1, the time it was busy
            zone_mb_s = [zone / sum(io.value for io in ios[k : k + per]) * 1e3 for k in range(0, len(ios), per)]
            curve = series(run, data_dir, s, f"{d}.mb_s")
            assert curve["x_unit"] == "offset"
            stored = points(data_dir, curve["id"])
            assert [x for x, _ in stored] == offsets
            assert [y for _, y in stored] == pytest.approx(zone_mb_s, rel=1e-12)
            assert m[f"{d}.avg_mb_s"]["value"] == pytest.approx(statistics.fmean(zone_mb_s), rel=1e-12)
            assert m[f"{d}.min_mb_s"]["value"] == pytest.approx(min(zone_mb_s), rel=1e-12)
            # the pass's wall time, from its first IO's issue to its last one's completion, and its IOs' time
            job = next(j for j in doc["jobs"] if j["jobname"] == f"{d}-pass")[d]
            assert m[f"{d}.io_s"]["value"] == pytest.approx(job["lat_ns"]["mean"] * job["total_ios"] / 1e9)
            wall = (ios[-1].t_ms - ios[0].t_ms + ios[0].value / 1e6) / 1000
            assert m[f"{d}.pass_s"]["value"] == pytest.approx(wall, rel=1e-9)
        averages[key] = m["write.avg_mb_s"]["value"]
    recovered = metrics(step(run, "sweep-recovered"))["recovered_percent"]["value"]
    assert recovered == pytest.approx(100 * averages["sweep-recovered"] / averages["sweep-clean"], rel=1e-12)


def test_the_degraded_sweep_reads_the_whole_surface_before_its_write_pass(smoke_run):
    """Methodology 6: the degraded sweep's read pass reads what the torture left, every zone from LBA 0 to the end
    of the drive, and only then does its write pass begin; the clean and recovered sweeps write first."""
    run, data_dir = smoke_run
    capacity, zone, bs = run["drive"]["capacity_bytes"], 4 * 1024**2, 128 * 1024
    offsets = plan.zone_offsets(4, zone, capacity)
    # the zones reach both ends of the surface: the last ends less than a MiB for each zone short of its end
    assert offsets[0] == 0 and capacity - 4 * 1024**2 < offsets[-1] + zone <= capacity
    for key, passes in (
        ("sweep-clean", ("write", "read")),
        ("sweep-dirty", ("read", "write")),
        ("sweep-recovered", ("write", "read")),
    ):
        s = step(run, key)
        with open(os.path.join(folder(data_dir, s), f"{key}.fio")) as f:
            jobs = validity.fio_jobs(f.read())
        # fio runs the passes in the job file's order, the second once the first has ended (stonewall)
        assert all(options["stonewall"] == "1" for _, options in jobs)
        assert [options["rw"] for _, options in jobs] == list(passes)
        doc = fio_doc(data_dir, s)
        assert [job["jobname"] for job in doc["jobs"]] == [name for name, _ in jobs]
        for n, direction in enumerate(passes):
            other = passes[1 - n]
            job = doc["jobs"][n]
            # every zone whole, in the pass's direction only, in the order of their offsets
            assert (job[direction]["io_bytes"], job[other]["io_bytes"]) == (4 * zone, 0), (key, job["jobname"])
            due = [start + k * bs for start in offsets for k in range(zone // bs)]
            assert [io.offset for io in sweep_log(data_dir, s, direction)] == due
    # What the degraded read pass read was written before it (the fill and the torture): rule 3 flags nothing.
    db = store.connect(data_dir)
    try:
        judged = step(document.run_document(db, 1), "sweep-dirty")
    finally:
        db.close()
    assert not [reason for reason in judged["suspect"] if "never written" in reason]


def test_whole_drive_trim_is_timed(smoke_run):
    run, _ = smoke_run
    s = step(run, "trim")
    assert s["detail"]["command"][0] == "blkdiscard"
    assert metrics(s)["trim.seconds"]["value"] == s["detail"]["seconds"] > 0


def trace_docs(data_dir, s):
    """fio's JSON of each part of a trace step, in order."""
    return [
        fio_output.fio_result(open(path).read())
        for path in sorted(glob.glob(os.path.join(folder(data_dir, s), "fio-*.json")))
    ]


def test_trace_playback_is_labelled_synthetic_and_checked_against_the_lock(smoke_run):
    run, data_dir = smoke_run
    s = step(run, "trace")
    info = s["detail"]["trace"]
    assert info["synthetic"] is True and "synthetic" in info["label"]
    # the bytes generated for the run are the ones the workload hash covers
    assert info["sha256"] == locked.manifest()["smoke"]["traces"]["trace"]["sha256"]
    assert info["sha256"] == trace_file.digest(trace_generator.generate(info["profile"], info["seed"]))
    # on make fio's fio, the segments hand over through fio's own start_fifo and done_fifo, recorded with the patch
    assert info["handoff"] == {"options": "start_fifo, done_fifo", "fio_patch": handoff.FIO_PATCH}


def test_trace_files_are_packed_and_only_completion_latency_is_logged(smoke_run):
    run, data_dir = smoke_run
    s = step(run, "trace")
    names = sorted(os.listdir(folder(data_dir, s)))
    segments = s["detail"]["trace"]["segments"]
    assert [n for n in names if n.endswith(".replay.gz")] == [f"seg{k:04d}.replay.gz" for k in range(segments)]
    assert len([n for n in names if "_clat." in n and n.endswith(".log.gz")]) == segments
    # nothing per IO left unpacked, no total or submission latency logs, no copy of the trace
    assert not [n for n in names if n.endswith((".replay", ".log")) or "_lat." in n or "_slat." in n]
    assert "trace.txt" not in names
    docs = trace_docs(data_dir, s)
    assert len(docs) == sum(1 for n in names if n.startswith("fio-") and n.endswith(".json")) >= 1
    assert [job["jobname"] for doc in docs for job in doc["jobs"]] == [f"seg{k:04d}" for k in range(segments)]


def test_busy_time_counts_only_time_with_io_outstanding(smoke_run):
    run, data_dir = smoke_run
    s = step(run, "trace")
    jobs, m = [job for doc in trace_docs(data_dir, s) for job in doc["jobs"]], metrics(s)
    # the bytes the per-IO logs account for are the bytes fio counted
    assert m["all.bytes"]["value"] == m["fio.read.io_bytes"]["value"] + m["fio.write.io_bytes"]["value"]
    assert m["fio.read.io_bytes"]["value"] == sum(job["read"]["io_bytes"] for job in jobs)
    assert m["all.mb_s"]["value"] == pytest.approx(m["all.bytes"]["value"] / m["all.busy_s"]["value"] / 1e6)
    # reads and writes overlap, so the union is at most their sum and at least each one
    assert max(m["read.busy_s"]["value"], m["write.busy_s"]["value"]) <= m["all.busy_s"]["value"]
    assert m["all.busy_s"]["value"] <= m["read.busy_s"]["value"] + m["write.busy_s"]["value"] + 1e-9
    # At QD1 nothing overlaps: a segment's busy time is exactly the sum of its completion latencies.
    out = folder(data_dir, s)
    qd1 = [job["jobname"] for job in jobs if int(job["job options"]["iodepth"]) == 1]
    assert qd1
    for name in qd1:
        with gzip.open(glob.glob(os.path.join(out, f"{name}_clat.*.log.gz"))[0], "rt") as f:
            lat_s = sum(x.value for x in fio_output.fio_log(f.read())) / 1e9
        busy = derive.busy_seconds([(a, b) for a, b, _, _ in derive.replayed_intervals(out, name, 1)])
        assert busy == pytest.approx(lat_s, rel=1e-9)
    # The step's wall time includes fio starting each segment's job; busy time leaves that out.
    wall = s["finished_at"] - s["started_at"]
    assert m["all.busy_s"]["value"] < wall


def test_busy_time_is_checked_against_the_kernels_io_ticks(smoke_run):
    run, data_dir = smoke_run
    s = step(run, "trace")
    m = metrics(s)
    ticks = s["detail"]["io_ticks"]
    assert ticks["file"] == f"/sys/class/block/{os.path.basename(run['drive']['path'])}/stat"
    kernel, rebuilt = m["kernel.busy_s"], m["all.busy_s"]["value"]
    assert kernel["value"] == (ticks["after_ms"] - ticks["before_ms"]) / 1000
    assert (
        kernel["source"] == f"io_ticks (field 10 of {ticks['file']}, ms) read after the step's fio minus before, / 1000"
    )
    # The kernel counted the drive busy for a part of the step, never for longer than the step took.
    assert 0 < kernel["value"] <= s["finished_at"] - s["started_at"]
    # The step is flagged exactly when the two differ by more than 5% of the kernel's count.
    db = store.connect(data_dir)
    flagged = [r for r in step(document.run_document(db, 1), "trace")["suspect"] if "io_ticks" in r]
    off = abs(rebuilt - kernel["value"]) / kernel["value"]
    assert len(flagged) == (off > 0.05)
    if flagged:
        says = (
            f"rebuilt from fio's logs, {rebuilt:,.3f} s, is {off:.1%} off the {kernel['value']:,.3f} s that the kernel"
        )
        assert says in flagged[0]
    assert not [x for x in run["steps"] if x["key"] != "trace" and "kernel.busy_s" in metrics(x)]


def test_mixed_burst_counts_throughput_only_inside_bursts(smoke_run):
    run, data_dir = smoke_run
    s = step(run, "burst")
    doc, m = fio_doc(data_dir, s), metrics(s)
    fg = next(job for job in doc["jobs"] if job["jobname"] == "foreground")
    assert m["burst.read.bursts"]["value"] == 3
    assert fg["read"]["io_bytes"] == 3 * plan.burst_blocks({"burst": "4000000", "bs": "64k"}) * 65536
    # The foreground idles 0.5 s between its 3 bursts; the service time leaves that out.
    wall = s["finished_at"] - s["started_at"]
    assert m["burst.read.service_s"]["value"] < wall - 2 * 0.5
    assert m["burst.write.service_s"]["value"] < wall
    assert m["burst.read.mb_s"]["value"] == pytest.approx(
        fg["read"]["io_bytes"] / m["burst.read.service_s"]["value"] / 1e6, rel=1e-9
    )
    # fio sums the background's writers (group_reporting): one set of write percentiles.
    for p in ("50", "90", "99", "99.9", "99.99"):
        assert f"foreground.read.lat_p{p}" in m and f"background.write.lat_p{p}" in m
    # The background against its clock (tests/test_burst.py shows it on throttled drives): a loop device
    # writes 4 MB in far less than its 0.5 s period, so it keeps the target, 977 writes of 4 KiB in each.
    assert m["overrun_periods"]["value"] == 0 and m["background_periods"]["value"] >= 2
    assert m["background_mb_s"]["value"] == pytest.approx(977 * 4096 / 0.5 / 1e6, rel=1e-9)
    # smoke's background is one writer, one write outstanding, as the shipped suites' (methodology 8)
    assert "(background1_lat log)" in m["background_mb_s"]["source"]
    reads = series(run, data_dir, s, "burst.read.service_s")
    assert [y for _, y in points(data_dir, reads["id"])] == pytest.approx(
        [(e - b) / 1e6 for b, e, _ in derive.bursts(derive.io_intervals(folder(data_dir, s), "foreground"), 0.25)]
    )
    assert len(points(data_dir, series(run, data_dir, s, "burst.write.period_s")["id"])) >= 2


def test_section_9_rows_come_from_their_fio_jobs(smoke_run):
    run, data_dir = smoke_run
    cdm = step(run, "cdm")
    doc, m = fio_doc(data_dir, cdm), metrics(cdm)
    for i, job in enumerate(doc["jobs"]):
        d = "read" if job["jobname"].endswith("read") else "write"
        assert m[f"{job['jobname']}.{d}.mb_s"]["value"] == job[d]["bw_bytes"] / 1e6
        assert m[f"{job['jobname']}.{d}.mb_s"]["source"] == f"/jobs/{i}/{d}/bw_bytes / 1e6"
    pts = metrics(step(run, "pts"))
    assert {"mix100.bs4k.read.iops", "mix0.bs1m.write.iops", "mix65.bs4k.write.iops"} <= set(pts)
    lat = metrics(step(run, "qd1-latency"))
    assert "randread.read.lat_p99.99" in lat and "randwrite.write.lat_p99.99" in lat
    oltp = fio_doc(data_dir, step(run, "oltp"))["jobs"][0]
    share = oltp["read"]["total_ios"] / (oltp["read"]["total_ios"] + oltp["write"]["total_ios"])
    assert 0.6 < share < 0.8


def test_every_metric_names_where_it_came_from(smoke_run):
    run, data_dir = smoke_run
    for s in run["steps"]:
        if s["kind"] in ("purge",):
            continue
        # a trace's figures come from its parts' JSON and its per-IO logs (test_busy_time_...)
        doc = fio_doc(data_dir, s) if s["kind"] not in ("trim", "trace") else None
        for m in s["metrics"]:
            assert m["source"], (s["key"], m["name"])
            if m["source"].startswith("/"):
                assert fio_output.source_value(doc, m["source"]) == m["value"], (s["key"], m)


def test_a_histogram_log_of_empty_bins_gives_no_series(tmp_path):
    """fio writes a clat_hist log of zeros when it keeps no completion-latency percentiles (clat_percentiles=0, as
    the test suites set it): no empty histogram is stored."""
    line = ", ".join(["1007", "0", "4096"] + ["0"] * fio_output.PLAT_BINS)
    (tmp_path / "step_clat_hist.1.log").write_text(line + "\n")
    assert derive.latency_histograms(str(tmp_path)) == []
    (tmp_path / "step_clat_hist.1.log").write_text(data("fio-3.33-randrw_clat_hist.1.log"))
    names = [name for name, *_ in derive.latency_histograms(str(tmp_path))]
    assert names == ["read.clat_hist", "write.clat_hist"]


def test_each_fio_step_of_the_suites_has_its_latency_histogram(smoke_run):
    """The shipped suites keep completion-latency percentiles, so fio fills its histogram log: every single-job
    step that moved data has a histogram per direction, of at most the IOs fio counted (fio logs whole
    intervals only)."""
    run, data_dir = smoke_run
    checked = 0
    for s in run["steps"]:
        if s["kind"] != "fio" or s["state"] != "done":
            continue
        m = metrics(s)
        for d in ("read", "write"):
            if f"{d}.total_ios" not in m or not m[f"{d}.total_ios"]["value"]:
                continue
            hist = series(run, data_dir, s, f"{d}.clat_hist")
            counted = sum(v for _, v in points(data_dir, hist["id"]))
            assert 0 < counted <= m[f"{d}.total_ios"]["value"], (s["key"], d, counted)
            checked += 1
    assert checked >= 3
