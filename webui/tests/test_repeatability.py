"""A repeat set's summary, from runs written through the store with figures chosen so that each statistic is known
exactly: the mean, the sample standard deviation, the CoV against the suite's thresholds, and the flag."""

from types import SimpleNamespace

import pytest
from conftest import Step

from ssdbench.results import repeatability, store
from ssdbench.run.fio_output import Metric

DRIVE = {"path": "/dev/nvme0n1", "model": "Fast SSD", "serial": "S1", "capacity_bytes": 10**12, "transport": "nvme"}
SUITE = SimpleNamespace(name="standard", sha256="b" * 64, locked=True)
DEFAULTS = {"cov_percent": 2.5, "qd1_latency_cov_percent": 3.0}
STEPS = [
    Step(0, "rand-read-4k", "fio", "4K random read, QD3", 3.0, "[rand-read-4k]\nrw=randread\niodepth=3\n"),
    Step(1, "qd1", "fio", "4K random read, QD1", 3.0, "[qd1]\nrw=randread\niodepth=1\n"),
]


def add_set(data_dir, runs, thresholds=DEFAULTS):
    """A repeat set whose runs end in the given states with the given figures: [(state, {(step, name): value})]."""
    db = store.connect(data_dir)
    request = {"device": DRIVE["path"], "confirm": "S1", "destroy_data": False, "allow_usb": False}
    repeat_id = store.create_repeat(db, DRIVE, SUITE, max(2, len(runs)), thresholds, request)
    for position, (state, figures) in enumerate(runs, 1):
        run_id = store.create_run(db, DRIVE, SUITE, STEPS, repeat=(repeat_id, position))
        for step in STEPS:
            sid = store.start_step(db, run_id, step.index, f"runs/{run_id}/{step.index:02d}")
            metrics = [Metric(n, v, "u", "/jobs/0") for (key, n), v in figures.items() if key == step.id]
            store.finish_step(db, sid, "done", metrics=metrics)
        store.finish_run(db, run_id, state)
    store.finish_repeat(db, repeat_id, "done")
    return db, repeat_id


def figures_of(summary):
    return {f["key"]: f for f in summary["figures"]}


def run(iops, qd3_lat, qd1_lat, qd1_iops=5000.0):
    return {
        ("rand-read-4k", "read.iops"): iops,
        ("rand-read-4k", "read.lat_mean"): qd3_lat,
        ("rand-read-4k", "read.lat_max"): qd3_lat * 100,  # not a headline figure
        ("qd1", "read.iops"): qd1_iops,
        ("qd1", "read.lat_mean"): qd1_lat,
    }


def test_each_headline_figure_gets_its_mean_stdev_cov_min_max_and_flag(data_dir):
    db, repeat_id = add_set(
        data_dir,
        [
            ("done", run(100.0, 1000.0, 1000.0)),
            ("done", run(102.0, 1026.0, 1031.0)),
            ("done", run(104.0, 974.0, 969.0)),
            # A run cut short measured less than the suite asks: it is not counted.
            ("cancelled", run(10.0, 9000.0, 9000.0)),
        ],
    )
    summary = repeatability.summary(db, repeat_id)
    assert summary["counted"] == [r["id"] for r in summary["runs"][:3]] and len(summary["runs"]) == 4
    got = figures_of(summary)
    assert set(got) == {"rand-read-4k/read.iops", "rand-read-4k/read.lat_mean", "qd1/read.iops", "qd1/read.lat_mean"}
    iops = got["rand-read-4k/read.iops"]
    assert iops["values"] == [100.0, 102.0, 104.0] and iops["runs"] == summary["counted"]
    # Sample standard deviation: (4 + 0 + 4) / (3 - 1) = 4, so 2, and a CoV of 2/102.
    assert (iops["n"], iops["mean"], iops["stdev"], iops["min"], iops["max"]) == (3, 102.0, 2.0, 100.0, 104.0)
    assert iops["cov_percent"] == pytest.approx(100 * 2 / 102) and not iops["flagged"]
    # The same CoV of 2.6% is flagged at QD3 (above 2.5%), and a QD1 latency is judged against 3%: 3.1% is
    # flagged, 3.0% is not above it.
    qd3 = got["rand-read-4k/read.lat_mean"]
    assert (qd3["stdev"], qd3["cov_percent"], qd3["threshold_percent"], qd3["flagged"]) == (26.0, 2.6, 2.5, True)
    qd1 = got["qd1/read.lat_mean"]
    assert (qd1["stdev"], qd1["cov_percent"], qd1["threshold_percent"], qd1["flagged"]) == (31.0, 3.1, 3.0, True)
    assert (got["qd1/read.iops"]["stdev"], got["qd1/read.iops"]["flagged"]) == (0.0, False)
    assert summary["flagged"] == 2
    db, repeat_id = add_set(data_dir, [("done", run(100.0, 1000.0, 1000.0)), ("done", run(100.0, 1000.0, 1030.0))])
    qd1 = figures_of(repeatability.summary(db, repeat_id))["qd1/read.lat_mean"]
    assert qd1["cov_percent"] == pytest.approx(100 * 21.213203435596427 / 1015) and not qd1["flagged"]


def test_the_thresholds_are_the_ones_the_set_kept_from_its_suite(data_dir):
    runs = [
        ("done", run(100.0, 1000.0, 1000.0)),
        ("done", run(102.0, 1026.0, 1031.0)),
        ("done", run(104.0, 974.0, 969.0)),
    ]
    db, repeat_id = add_set(data_dir, runs, {"cov_percent": 1.5, "qd1_latency_cov_percent": 5.0})
    got = figures_of(repeatability.summary(db, repeat_id))
    assert got["rand-read-4k/read.iops"]["flagged"] and got["rand-read-4k/read.iops"]["threshold_percent"] == 1.5
    assert not got["qd1/read.lat_mean"]["flagged"] and got["qd1/read.lat_mean"]["threshold_percent"] == 5.0


def test_one_run_has_no_spread_and_a_figure_counts_the_runs_that_have_it(data_dir):
    db, repeat_id = add_set(data_dir, [("done", run(100.0, 1000.0, 1000.0)), ("failed", run(1.0, 1.0, 1.0))])
    summary = repeatability.summary(db, repeat_id)
    iops = figures_of(summary)["rand-read-4k/read.iops"]
    assert (iops["n"], iops["mean"], iops["stdev"], iops["cov_percent"], iops["flagged"]) == (
        1,
        100.0,
        None,
        None,
        False,
    )
    short = run(100.0, 1000.0, 1000.0)
    del short[("qd1", "read.lat_mean")]
    db, repeat_id = add_set(data_dir, [("done", run(100.0, 1000.0, 1000.0)), ("done", short), ("done", short)])
    summary = repeatability.summary(db, repeat_id)
    assert figures_of(summary)["qd1/read.lat_mean"]["runs"] == summary["counted"][:1]
    assert figures_of(summary)["rand-read-4k/read.iops"]["n"] == 3
    assert repeatability.summary(db, 99) is None


def test_a_mean_of_zero_has_no_cov(data_dir):
    db, repeat_id = add_set(data_dir, [("done", run(0.0, 1000.0, 1000.0)), ("done", run(0.0, 1000.0, 1000.0))])
    iops = figures_of(repeatability.summary(db, repeat_id))["rand-read-4k/read.iops"]
    assert (iops["stdev"], iops["cov_percent"], iops["flagged"]) == (0.0, None, False)
