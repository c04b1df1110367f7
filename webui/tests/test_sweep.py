"""A zone sweep's pass is one continuous pass (methodology 6), run for real: `ssdbench run` of two sweeps of 32
zones of 8 MiB (tests/data/sweep-suite.toml) on a 504 MiB loop device, fio and its JSON and logs as they come.

Each pass must be one fio job whose wall time, from its first IO's issue to its last IO's completion, is the
time its IOs took by fio's JSON, within a few percent, and the step's time around fio its passes and fio's own
start once: a pass run as a job for each zone spent about 0.3 s starting each (measured on this loop device with
32 zones of 8 MiB: 22 s around fio for 1.3 s of IO, and each job's own runtime 21 to 51% beyond its IOs' time).
It must cover every zone whole, in order, from LBA 0 to the end of the drive, and each zone's MB/s must be its
bytes over its IOs' time."""

import os
import statistics
import subprocess

import pytest
from conftest import DATA, attach, needs_root, show, ssdbench

from ssdbench.results import document, store, validity
from ssdbench.run import derive, fio_output, plan

pytestmark = needs_root()

SUITE = ("--suite-file", os.path.join(DATA, "sweep-suite.toml"), "--non-standard")
MiB = 1024 * 1024
ZONES, ZONE, BS = 32, 8 * MiB, 128 * 1024
CAPACITY = 504 * MiB  # 8 MiB + 31 strides of 16 MiB: the last zone ends at the drive's end
# fio's log clocks the pass in whole milliseconds, and between one IO's completion and the next one's submission
# fio runs a little of its own: the pass's wall time is its IOs' time within this.
WITHIN = 0.05
# The step's time around fio beyond its two passes: fio's start and end and the second pass's start, once each
# (about 1 s on this busy machine), never once for each zone (31 more starts, about 10 s, for each pass).
AROUND_S = 5.0


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory):
    """The sweep suite's run on its loop device: (the run as `ssdbench show` gives it, its data folder)."""
    top = tmp_path_factory.mktemp("sweep")
    dev = attach(top / "drive.img", str(CAPACITY))
    data_dir = top / "data"
    try:
        ssdbench("run", *SUITE, "--drive", dev, "--confirm", os.path.basename(dev), data_dir=data_dir, check=True)
        yield show(1, data_dir), data_dir
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


def steps(run):
    return {s["key"]: s for s in run["steps"]}


def metrics(step):
    return {m["name"]: m["value"] for m in step["metrics"]}


def fio_doc(data_dir, step):
    with open(os.path.join(data_dir, step["out_dir"], "fio.json")) as f:
        return fio_output.fio_result(f.read())


def pass_log(data_dir, step, direction):
    """fio's log of every IO of the pass, in the order they completed: (offset, bs, direction, latency ns, ms)."""
    _, ios = derive.per_io_log(os.path.join(data_dir, step["out_dir"]), f"{direction}-pass")
    return ios


@pytest.mark.parametrize("key, passes", [("sweep-clean", ("write", "read")), ("sweep-again", ("read", "write"))])
def test_each_pass_is_one_fio_job_whose_wall_time_is_its_ios_time(sweep_run, key, passes):
    run, data_dir = sweep_run
    step = steps(run)[key]
    assert step["state"] == "done", step["error"]
    doc, m = fio_doc(data_dir, step), metrics(step)
    assert [job["jobname"] for job in doc["jobs"]] == [f"{d}-pass" for d in passes]
    walls = 0.0
    for job, direction in zip(doc["jobs"], passes):
        stats = job[direction]
        assert stats["io_bytes"] == ZONES * ZONE
        took = stats["lat_ns"]["mean"] * stats["total_ios"] / 1e9  # the time its IOs took, one at a time
        ios = pass_log(data_dir, step, direction)
        wall = (ios[-1].t_ms - (ios[0].t_ms - ios[0].value / 1e6)) / 1000  # first issue to last completion
        assert abs(wall - took) <= WITHIN * wall, (direction, wall, took)
        # ... as the step records them, with fio's runtime of the job
        assert m[f"{direction}.pass_s"] == pytest.approx(wall, rel=1e-9)
        assert m[f"{direction}.io_s"] == pytest.approx(took, rel=1e-9)
        assert m[f"{direction}.idle_percent"] == pytest.approx(100 * (wall - took) / wall, rel=1e-9)
        assert m[f"{direction}.fio_runtime_s"] == stats["runtime"] / 1000
        walls += wall
    # The step's time around fio holds the two passes and fio's start and end, once: no start for each zone.
    assert walls <= step["detail"]["fio_s"] <= walls + AROUND_S, (step["detail"]["fio_s"], walls)


@pytest.mark.parametrize("key", ["sweep-clean", "sweep-again"])
def test_a_pass_covers_every_zone_whole_in_order_from_lba_0_to_the_end(sweep_run, key):
    run, data_dir = sweep_run
    step = steps(run)[key]
    starts = plan.zone_offsets(ZONES, ZONE, CAPACITY)
    assert starts[0] == 0 and starts[-1] + ZONE == CAPACITY
    due = [start + k * BS for start in starts for k in range(ZONE // BS)]
    m = metrics(step)
    for direction in ("write", "read"):
        ios = pass_log(data_dir, step, direction)
        # every block of every zone, once, in order
        assert [io.offset for io in ios] == due
        assert {(fio_output.DIRECTIONS[io.direction], io.bs) for io in ios} == {(direction, BS)}
        # each zone's MB/s: its bytes over its IOs' latencies
        per = ZONE // BS
        zone_mb_s = [ZONE / sum(io.value for io in ios[k : k + per]) * 1e3 for k in range(0, len(ios), per)]
        (curve,) = [s for s in run["series"] if s["step_id"] == step["id"] and s["name"] == f"{direction}.mb_s"]
        assert curve["x_unit"] == "offset"
        db = store.connect(data_dir)
        try:
            stored = store.series_points(db, curve["id"])
        finally:
            db.close()
        assert [x for x, _ in stored] == starts
        assert [y for _, y in stored] == pytest.approx(zone_mb_s, rel=1e-12)
        assert m[f"{direction}.avg_mb_s"] == pytest.approx(statistics.fmean(zone_mb_s), rel=1e-12)
        assert m[f"{direction}.min_mb_s"] == pytest.approx(min(zone_mb_s), rel=1e-12)
        # the zones' busy times add up to the time fio's JSON says the pass's IOs took
        assert sum(io.value for io in ios) / 1e9 == pytest.approx(m[f"{direction}.io_s"], rel=1e-6)
    if key == "sweep-again":
        clean = metrics(steps(run)["sweep-clean"])["write.avg_mb_s"]
        assert m["recovered_percent"] == pytest.approx(100 * m["write.avg_mb_s"] / clean, rel=1e-12)


def test_a_continuous_pass_is_not_suspect_and_reads_only_what_was_written(sweep_run):
    """Validity: neither pass paused (rule 7), and the read-first sweep reads the zones the clean sweep wrote
    (rule 3 follows a pass's strided zones as it followed a job for each zone)."""
    _, data_dir = sweep_run
    db = store.connect(data_dir)
    try:
        judged = document.run_document(db, 1)
    finally:
        db.close()
    # on a busy host fio may wait for a CPU (rule 9): that is the host's, not the passes'
    own = {
        s["key"]: [r for r in s["suspect"] if getattr(r, "cause", None) != validity.HOST_CAUSE] for s in judged["steps"]
    }
    assert own == {"sweep-clean": [], "sweep-again": []}
