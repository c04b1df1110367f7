"""The host's share of a figure (issue 32, item 2): a run measures what this PC costs each of its jobs' IOs on fio's
null engine before its first step, and every step carries its jobs' host share and the time fio waited for a CPU,
each traced to fio's own output and the kernel's count; a share or a wait over the limit flags the step (validity
rule 9), and a calibration in which fio lacked a whole CPU flags the testbed. On real loop devices, real fio, and a
real CPU cgroup quota (cgroup v1 `cpu.cfs_quota_us`, or v2 `cpu.max`) for the slow host."""

import copy
import os
import re
import shutil
import sqlite3
import uuid

import pytest
from conftest import ENGINE_SUITE, backing_file, login, make_app, needs_root, ssdbench
from test_review import runs_of

from ssdbench.results import card, causes, document, store, testbed, validity
from ssdbench.run import fio_output, handoff, host_cost, kernel_device, plan
from ssdbench.suites import locked
from ssdbench.system import tools

V1 = "/sys/fs/cgroup/cpu"


def fio_job(path, name):
    """A job of fio's final document in `path` (a step's fio.json holds a status document every second first)."""
    with open(path) as f:
        doc = fio_output.fio_documents(f.read())[-1]
    return next(job for job in doc["jobs"] if job["jobname"] == name)


@needs_root()
def test_a_run_measures_the_hosts_cost_and_every_figure_carries_its_share(finished_run):
    data_dir, _ = finished_run
    run = runs_of(data_dir)[0]
    cost = run["environment"]["host_cost"]
    run_dir = store.run_dir(str(data_dir), run["id"])
    suite = locked.load(path=ENGINE_SUITE[1], allow_non_standard=True)
    steps = plan.compile_plan(suite, run["drive"]["capacity_bytes"], run["drive"]["logical_block_size"])
    # every job of the plan that the null engine plays, once, each traced to the calibration's own fio output
    assert [job["key"] for job in cost["jobs"]] == list(host_cost.jobs_of(steps))
    with open(os.path.join(run_dir, cost["job_file"])) as f:
        text = f.read()
    assert text.count("ioengine=null") == 1
    # on make fio's fio, one job after another through fio's own start_fifo and done_fifo: one stonewall, a FIFO
    # waited on by each job after the first, and none left in the folder
    assert cost["handoff"] == {"options": "start_fifo, done_fifo", "fio_patch": handoff.FIO_PATCH}
    assert text.count("stonewall=1") == 1 and text.count("start_fifo=") == len(cost["jobs"]) - 1
    assert not [name for name in os.listdir(os.path.join(run_dir, host_cost.FOLDER)) if name.endswith(".go")]
    for n, job in enumerate(cost["jobs"]):
        measured = host_cost.iops(fio_job(os.path.join(run_dir, cost["output"]), f"job{n}"))
        assert job["iops"] == measured > 0 and job["us_per_io"] == pytest.approx(1e6 / measured)
        # fio's own clock, in ms: each job began once the one before it had played its time
        if n:
            before = fio_job(os.path.join(run_dir, cost["output"]), f"job{n - 1}")["job_start"]
            began = fio_job(os.path.join(run_dir, cost["output"]), f"job{n}")["job_start"]
            assert began >= before + host_cost.CALIBRATE_MS - 1, n
        # the host's CPU time per IO: its wall time per IO, less the share of it fio waited for a CPU
        assert job["cpu_us_per_io"] == pytest.approx(job["us_per_io"] * min(job["cpu_percent"], 100) / 100)
    # the same jobs through the kernel, with the suite's ioengine and direct IO: on null_blk where the kernel has
    # it, here on the stand-in, which says why
    kernel = cost["kernel"]
    assert kernel["device"].startswith("null_blk: " if os.path.exists(kernel_device.NULL_BLK) else "stand-in: ")
    with open(os.path.join(run_dir, kernel["job_file"])) as f:
        text = f.read()
    assert "ioengine=libaio" in text and "direct=1" in text and "ioengine=null" not in text
    assert [job["key"] for job in kernel["jobs"]] == [job["key"] for job in cost["jobs"]]
    for n, job in enumerate(kernel["jobs"]):
        assert job["iops"] == host_cost.iops(fio_job(os.path.join(run_dir, kernel["output"]), f"job{n}")) > 0
    # at the run's end, its first and last job on the null engine again, each one's ratio traced to both outputs
    end, first_last = cost["end"], (cost["jobs"][0], cost["jobs"][-1])
    assert [job["key"] for job in end["jobs"]] == [job["key"] for job in first_last]
    for n, (job, begun) in enumerate(zip(end["jobs"], first_last)):
        assert job["iops"] == host_cost.iops(fio_job(os.path.join(run_dir, end["output"]), f"job{n}")) > 0
        assert end["ratios"][n] == pytest.approx(job["cpu_us_per_io"] / begun["cpu_us_per_io"])
    limit = host_cost.DRIFT_LIMIT
    assert end["moved"] == (all(r > 1 + limit for r in end["ratios"]) or all(r < 1 - limit for r in end["ratios"]))
    # the CPU's vulnerabilities and their mitigations, as the kernel words them, in the testbed record
    folder = "/sys/devices/system/cpu/vulnerabilities"
    if os.path.isdir(folder):
        with_words = {name: open(os.path.join(folder, name)).read().strip() for name in os.listdir(folder)}
        assert run["environment"]["cpu"]["vulnerabilities"] == with_words
    through = {job["key"]: job for job in kernel["jobs"]}
    null = {job["key"]: job for job in cost["jobs"]}
    done = {s["key"]: s for s in document.run_document(store.connect(data_dir), run["id"])["steps"]}
    for step in steps:
        if step.kind != "fio":
            continue
        stored = done[step.id]
        metrics = {m["name"]: m["value"] for m in stored["metrics"]}
        job = fio_job(os.path.join(data_dir, store.step_folder(run["id"], step.index, step.id), "fio.json"), step.id)
        expected = null[host_cost.key(step.jobs[0][1])]["cpu_us_per_io"] * host_cost.iops(job) / 1e4
        assert metrics["host_share_percent"] == pytest.approx(expected), step.id
        kernel_share = through[host_cost.key(step.jobs[0][1])]["cpu_us_per_io"] * host_cost.iops(job) / 1e4
        assert metrics["host_kernel_share_percent"] == pytest.approx(kernel_share), step.id
        # the kernel's count of fio's wait for a CPU, as the step's detail records it
        waited = stored["detail"]["cpu_wait"]
        assert waited["tasks"] >= 1 and waited["ran_s"] > 0
        assert metrics["host.cpu_wait_percent"] == waited["wait_percent"]
        assert validity.host_bound(metrics) == [r for r in stored["suspect"] if "the PC's" in r]
    assert "us of CPU per IO" in card.of(run)["testbed"]["host"]


@needs_root()
def test_a_cpu_that_slowed_by_the_runs_end_or_a_calibration_that_failed_flags_the_run(finished_run, tmp_path):
    data_dir, _ = finished_run
    run = copy.deepcopy(runs_of(data_dir)[0])
    cost = run["environment"]["host_cost"]
    suite = locked.load(path=ENGINE_SUITE[1], allow_non_standard=True)
    # As if the CPU had run twice as fast when the run began: fio on the null engine at the end, for real, takes
    # about twice the CPU time per IO in every job played again.
    fast = {**cost, "jobs": [{**job, "cpu_us_per_io": job["cpu_us_per_io"] / 2} for job in cost["jobs"]]}
    end = host_cost.again(suite, fast, str(tmp_path), None, lambda now=False: False, True)
    assert end["moved"] and len(end["ratios"]) == 2 and min(end["ratios"]) > 1 + host_cost.DRIFT_LIMIT
    cost["end"] = end
    assert any("the CPU's speed changed while the steps ran" in f for f in testbed.flags(run))
    assert card.of(run)["testbed"]["classes"]["flagged"] != testbed.REFERENCE["flagged"]
    # A calibration through the kernel that failed, one at the end, and one before the first step: each flagged.
    for part, text in (("kernel", "through the kernel failed"), ("end", "at the run's end failed")):
        broken = copy.deepcopy(run)
        broken["environment"]["host_cost"][part] = {"unavailable": "fio: failed"}
        assert any(text in f for f in testbed.flags(broken)), part
    run["environment"]["host_cost"] = {"unavailable": "the host-cost calibration on fio's null engine failed: x"}
    assert not any("calibration failed" in f for f in testbed.flags(run))  # a suite with no job to calibrate
    run["environment"]["host_cost"]["failed"] = True
    assert any("the host-cost calibration failed" in f for f in testbed.flags(run))


@needs_root()
def test_a_stock_fio_calibrates_each_job_once_the_one_before_has_ended_and_says_why(tmp_path, monkeypatch):
    # Debian's own fio (/usr/bin/fio) lacks start_fifo: each job after a stonewall, as before our patch
    (tmp_path / "fio").symlink_to("/usr/bin/fio")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    suite = locked.load(path=ENGINE_SUITE[1], allow_non_standard=True)
    steps = [step for step in plan.compile_plan(suite, 2**30, data=plan.STOCK) if step.kind == "fio"][:2]
    native = tools.fio_knows("start_fifo")
    cost = host_cost.calibrate(suite, steps, str(tmp_path / "run"), None, lambda now=False: False, native)
    assert cost["handoff"] == {"options": "stonewall", "why": host_cost.STONEWALL_WHY}
    assert len(cost["jobs"]) == 2 and all(job["iops"] > 0 for job in cost["jobs"])
    for job_file in (cost["job_file"], cost["kernel"]["job_file"]):
        text = (tmp_path / "run" / job_file).read_text()
        assert text.count("stonewall=1") == 2 and "_fifo=" not in text, job_file


@needs_root()
def test_the_stand_in_for_null_blk_is_a_direct_io_loop_device_in_ram_and_leaves_nothing():
    name = f"ssdbench-test-{uuid.uuid4().hex[:8]}"
    with kernel_device.stand_in(name) as (dev, what):
        assert backing_file(dev) == os.path.join(kernel_device.SHM, name)
        with open(f"/sys/block/{os.path.basename(dev)}/loop/dio") as f:
            assert f.read().strip() == "1" and "with direct IO" in what
        assert "null_blk is not in this kernel" in what
    assert backing_file(dev) != os.path.join(kernel_device.SHM, name)
    assert not os.path.exists(os.path.join(kernel_device.SHM, name))


def test_a_share_or_a_wait_over_the_limit_flags_the_figure():
    limit, wait = validity.HOST_SHARE_LIMIT, validity.CPU_WAIT_LIMIT
    assert validity.host_bound({"host_share_percent": limit, "host.cpu_wait_percent": wait}) == []
    over = validity.host_bound({"a.host_share_percent": limit + 0.1, "b.host_share_percent": 1.0})
    assert len(over) == 1 and f"{limit + 0.1:.1f}% in a" in over[0] and " in b" not in over[0]
    assert (
        "waited for a CPU 10.1% of the step's time, over 10%"
        in validity.host_bound({"host.cpu_wait_percent": wait + 0.1})[0]
    )


@pytest.fixture
def slow_host():
    """A CPU cgroup whose processes get a fifth of one CPU: the slow host of issue 32 (item 7's (b))."""
    name = f"ssdbench-test-{uuid.uuid4().hex[:8]}"
    if os.path.isdir(V1):
        folder = os.path.join(V1, name)
        os.mkdir(folder)
        with open(os.path.join(folder, "cpu.cfs_period_us"), "w") as f:
            f.write("100000")
        with open(os.path.join(folder, "cpu.cfs_quota_us"), "w") as f:
            f.write("20000")
    else:
        folder = os.path.join("/sys/fs/cgroup", name)
        os.mkdir(folder)
        with open(os.path.join(folder, "cpu.max"), "w") as f:
            f.write("20000 100000")
    try:
        yield folder
    finally:
        os.rmdir(folder)  # its processes have ended: the run waited for them


def join(folder):
    with open(os.path.join(folder, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))


@needs_root()
def test_a_slow_host_is_flagged_in_every_step_and_in_its_testbed(loopdev, tmp_path, slow_host):
    data_dir = tmp_path / "data"
    dev, _ = loopdev()
    proc = ssdbench(
        "run",
        *ENGINE_SUITE,
        "--drive",
        dev,
        "--confirm",
        os.path.basename(dev),
        data_dir=data_dir,
        preexec_fn=lambda: join(slow_host),
    )
    assert proc.returncode == 0, proc.stderr
    run = runs_of(data_dir)[0]
    doc = document.run_document(store.connect(data_dir), run["id"])
    shares = sorted(job["cpu_percent"] for job in run["environment"]["host_cost"]["jobs"])
    assert shares[len(shares) // 2] < testbed.WHOLE_CPU
    assert any("when the host's cost was measured before the run" in f for f in testbed.flags(run))
    for step in doc["steps"]:
        if step["kind"] == "fio":
            assert any("fio waited for a CPU" in reason for reason in step["suspect"]), step["key"]
    assert card.of(run)["testbed"]["classes"]["flagged"] != testbed.REFERENCE["flagged"]
    # one cause for the tester: the testbed's flag and the steps' under one line
    host = [group for group in causes.of(doc) if group["cause"] == validity.HOST_CAUSE]
    assert len(host) == 1 and host[0]["steps"]
    assert any("when the host's cost was measured" in detail for detail in host[0]["details"])


@needs_root()
def test_a_figure_the_pc_is_in_is_marked_in_the_summary_compare_bars_and_bench(finished_repeat, tmp_path):
    """The engine's three runs, their host figures set (in their database) so that the 4K random read's step waited
    12% for a CPU and every other figure is the drive's: that figure alone is marked, on the run page, its compare
    bars and its bench cell."""
    data_dir = tmp_path / "data"
    shutil.copytree(finished_repeat[0], data_dir, ignore=shutil.ignore_patterns("run.lock"))
    db = sqlite3.connect(data_dir / "ssdbench.db")
    with db:
        db.execute("UPDATE metrics SET value = 1.0 WHERE name LIKE '%host_share_percent' OR name LIKE 'host.%'")
        db.execute(
            "UPDATE metrics SET value = 12.0 WHERE name = 'host.cpu_wait_percent' AND step_id IN "
            "(SELECT id FROM steps WHERE key = 'rand-read-4k')"
        )
    db.close()
    client = make_app(data_dir).test_client()
    login(client)
    page = client.get("/runs/1").get_data(as_text=True)
    assert "fio waited for a CPU 12.0% of the step&#39;s time" in page
    bars = client.get("/compare?runs=1,2").get_data(as_text=True)
    charts = dict(re.findall(r'<figure class="chart bars" data-chart="([^"]+)"(.*?)</figure>', bars, re.S))
    wide = {chart: body.split('<svg class="narrow"')[0] for chart, body in charts.items()}  # a phone's: the same
    assert {chart: body.count("⚠ host") for chart, body in wide.items() if "⚠ host" in body} == {"rand-read-4k-qd3": 2}
    bench = client.get("/bench").get_data(as_text=True)
    assert bench.count('<span class="badge host"') == 1 and "the PC is in this figure: fio waited" in bench
