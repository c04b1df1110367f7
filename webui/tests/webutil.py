"""Helpers for the web tests: an app on a real SQLite file, a logged-in client, runs written through the store."""

from collections import namedtuple
from types import SimpleNamespace

from ssdbench.results import store
from ssdbench.run.fio_output import Metric

PIN = "424242"
XSS = "<img src=x onerror=alert(1)>"
# What store.create_run reads of a plan step; the engine's PlanStep has more.
Step = namedtuple("Step", "index id kind title estimate_s job_file")


def make_app(data_dir, **config):
    from ssdbench.web import create_app

    return create_app({"SSDBENCH_DATA_DIR": str(data_dir), "SSDBENCH_PIN": PIN, "TESTING": True, **config})


def login(client):
    """Log the client in through the API; returns the session's CSRF token."""
    token = client.get("/api/session").get_json()["csrf_token"]
    response = client.post("/api/login", json={"pin": PIN}, headers={"X-CSRF-Token": token})
    assert response.status_code == 200, response.get_json()
    return response.get_json()["csrf_token"]


def add_run(data_dir, state="done", model="Fast SSD 1TB", serial="S123", suite_hash="a" * 64, points=20):
    """A run as the engine leaves it: a fill, a measured step, a consistency step, a sweep, a temperature."""
    db = store.connect(data_dir)
    drive_id = store.upsert_drive(
        db,
        {
            "path": "/dev/nvme0n1",
            "model": model,
            "serial": serial,
            "firmware": "1.0",
            "capacity_bytes": 10**12,
            "transport": "nvme",
        },
    )
    suite = SimpleNamespace(name="standard", sha256=suite_hash, locked=True)
    steps = [
        Step(0, "seq-fill", "fio", "Sequential fill", 10.0, "[seq-fill]\nrw=write\n"),
        Step(1, "rand-read-4k", "fio", "4K random read, QD3", 3.0, "[rand-read-4k]\nrw=randread\n"),
        Step(2, "consistency", "fio", "Consistency", 2000.0, "[consistency]\nrw=randwrite\n"),
        Step(3, "sweep-clean", "sweep", "Zone sweep, clean", 5.0, None),
    ]
    run_id = store.create_run(db, drive_id, suite, steps, state="running")
    store.add_series(
        db, run_id, None, "temperature", "°C", "hwmon:/x", [(i * 1000, 40.0 + i % 3) for i in range(points)]
    )
    ms = [(i * 1000, 1000.0 + i) for i in range(points)]
    results = [
        (
            [Metric("write.mb_s", 1234.56789012345, "MB/s", "/jobs/0/write/bw_bytes / 1e6")],
            [("write.bw", "KiB/s", "seq-fill_bw.1.log:direction=1", ms)],
        ),
        (
            [
                Metric("read.iops", 98765.4321, "IOPS", "/jobs/0/read/iops"),
                Metric("read.mb_s", 404.5, "MB/s", "/jobs/0/read/bw_bytes / 1e6"),
                Metric("read.clat_p99", 123456.0, "ns", "/jobs/0/read/clat_ns/percentile/99.000000"),
            ],
            [("read.iops", "IOPS", "rand-read-4k_iops.1.log:direction=0", ms)],
        ),
        (
            [Metric("steady.avg_iops", 5000.25, "IOPS", "mean of fio's write.iops log for t >= 1400 s")],
            [("write.iops", "IOPS", "consistency_iops.1.log:direction=1", ms)],
        ),
        (
            [Metric("write.avg_mb_s", 300.0, "MB/s", "mean over zones")],
            [("write.mb_s", "MB/s", "fio.json", [(i * 2**30, 300.0 + i) for i in range(4)], "offset")],
        ),
    ]
    for idx, (metrics, series) in enumerate(results):
        sid = store.start_step(db, run_id, idx, f"runs/{run_id}/{idx:02d}")
        store.finish_step(db, sid, "done", metrics=metrics, series=series)
    store.update_progress(db, run_id, 3, 42.5, 1234.0, 5000.0, 20.48e6)
    if state == "queued":
        db.execute("UPDATE runs SET state='queued', started_at=NULL WHERE id=?", (run_id,))
    elif state != "running":
        store.finish_run(db, run_id, state, None if state == "done" else f"the run ended {state}")
    db.close()
    return run_id
