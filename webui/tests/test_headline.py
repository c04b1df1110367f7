"""The headline figures: which stored metrics of a run each report that sets runs side by side takes, by one rule.
The steps are the smoke suite's, with the job files its plan renders; the metrics are named as derive names them."""

import pytest

from ssdbench.results import headline
from ssdbench.run import plan
from ssdbench.suites import locked


@pytest.fixture(scope="module")
def steps():
    return {s.id: s for s in plan.compile_plan(locked.load("smoke"), 2**30)}


def step(steps, key, metrics, state="done"):
    s = steps[key]
    return {
        "key": key,
        "kind": s.kind,
        "state": state,
        "job_file": s.job_file,
        "metrics": [{"name": n, "value": float(v), "unit": "u", "source": "fio.json"} for n, v in metrics.items()],
    }


def picked(run):
    return {(f.step, f.name): f.kind for f in headline.figures(run)}


def test_a_fio_job_gives_its_throughput_in_its_patterns_unit_and_its_average_latency(steps):
    tails = {"lat_max": 9, "lat_min": 1, "lat_p99.99": 8, "lat_p50": 2, "io_bytes": 4096, "total_ios": 1}
    run = {
        "steps": [
            step(steps, "rand-read-4k", {"read.iops": 1, "read.mb_s": 2, "read.bw": 3, "read.lat_mean": 4}),
            step(steps, "seq-read-128k", {"read.iops": 1, "read.mb_s": 2, "read.lat_mean": 4}),
            step(steps, "seq-fill", {"write.iops": 1, "write.mb_s": 2, "write.lat_mean": 4}),
            step(steps, "consistency", {"write.iops": 1, "write.mb_s": 2, "steady.avg_iops": 5, "steady.min_iops": 6}),
        ]
    }
    for s in run["steps"]:
        s["metrics"] += [{"name": f"read.{n}", "value": float(v), "unit": "u", "source": "x"} for n, v in tails.items()]
    assert picked(run) == {
        # Random: IOPS; sequential: MB/s. QD3 and QD32 latency: the suite's default threshold; QD1: its own.
        ("rand-read-4k", "read.iops"): headline.THROUGHPUT,
        ("rand-read-4k", "read.lat_mean"): headline.LATENCY,
        ("seq-read-128k", "read.mb_s"): headline.THROUGHPUT,
        ("seq-read-128k", "read.lat_mean"): headline.QD1_LATENCY,
        ("seq-fill", "write.mb_s"): headline.THROUGHPUT,
        ("seq-fill", "write.lat_mean"): headline.LATENCY,
        ("consistency", "write.iops"): headline.THROUGHPUT,
        ("consistency", "steady.avg_iops"): headline.DERIVED,
    }


def test_each_job_of_a_matrix_is_judged_by_its_own_pattern_and_queue_depth(steps):
    cdm = {
        "SEQ1M-Q8T1-read.read.mb_s": 1,
        "SEQ1M-Q8T1-read.read.iops": 1,
        "SEQ1M-Q8T1-read.read.lat_mean": 1,
        "RND4K-Q1T1-write.write.iops": 1,
        "RND4K-Q1T1-write.write.mb_s": 1,
        "RND4K-Q1T1-write.write.lat_mean": 1,
        "RND4K-Q1T1-write.write.lat_max": 1,
        "no-such-job.read.iops": 1,
    }
    qd1 = {"randread.read.iops": 1, "randread.read.lat_mean": 1, "randwrite.write.lat_mean": 1}
    pts = {"mix65.bs4k.read.iops": 1, "mix65.bs4k.write.iops": 1, "mix65.bs4k.write.lat_mean": 1}
    run = {"steps": [step(steps, "cdm", cdm), step(steps, "qd1-latency", qd1), step(steps, "pts", pts)]}
    assert picked(run) == {
        ("cdm", "SEQ1M-Q8T1-read.read.mb_s"): headline.THROUGHPUT,
        ("cdm", "SEQ1M-Q8T1-read.read.lat_mean"): headline.LATENCY,
        ("cdm", "RND4K-Q1T1-write.write.iops"): headline.THROUGHPUT,
        ("cdm", "RND4K-Q1T1-write.write.lat_mean"): headline.QD1_LATENCY,
        ("qd1-latency", "randread.read.iops"): headline.THROUGHPUT,
        ("qd1-latency", "randread.read.lat_mean"): headline.QD1_LATENCY,
        ("qd1-latency", "randwrite.write.lat_mean"): headline.QD1_LATENCY,
        ("pts", "mix65.bs4k.read.iops"): headline.THROUGHPUT,
        ("pts", "mix65.bs4k.write.iops"): headline.THROUGHPUT,
        ("pts", "mix65.bs4k.write.lat_mean"): headline.LATENCY,
    }


def test_sweeps_traces_and_mixed_burst_give_the_figures_the_methodology_reports(steps):
    run = {
        "steps": [
            step(steps, "purge", {}),
            step(steps, "trim", {"trim.seconds": 1}),
            step(steps, "sweep-recovered", {"write.avg_mb_s": 1, "write.min_mb_s": 1, "recovered_percent": 1}),
            step(steps, "trace", {"all.mb_s": 1, "read.mb_s": 1, "write.mb_s": 1, "all.busy_s": 1, "all.bytes": 1}),
            step(
                steps,
                "burst",
                {
                    "burst.read.service_s": 1,
                    "burst.read.mb_s": 1,
                    "burst.write.mb_s": 1,
                    "background.write.iops": 1,
                    "foreground.read.mb_s": 1,
                },
            ),
        ]
    }
    assert set(picked(run)) == {
        ("sweep-recovered", "write.avg_mb_s"),
        ("sweep-recovered", "recovered_percent"),
        ("trace", "all.mb_s"),
        ("trace", "read.mb_s"),
        ("trace", "write.mb_s"),
        ("burst", "burst.read.service_s"),
        ("burst", "burst.write.mb_s"),
    }
    assert set(picked(run).values()) == {headline.DERIVED}


def test_a_step_that_did_not_end_done_has_no_headline_figures(steps):
    metrics = {"read.iops": 1, "read.lat_mean": 2}
    for state in ("cancelled", "failed", "interrupted", "skipped"):
        assert headline.figures({"steps": [step(steps, "rand-read-4k", metrics, state)]}) == []
    figure = headline.figures({"steps": [step(steps, "rand-read-4k", metrics)]})[0]
    assert (figure.key, figure.value, figure.unit) == ("rand-read-4k/read.iops", 1.0, "u")
