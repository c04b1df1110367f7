"""Synthetic traces: a generated trace has the published figures, within the tolerances the methodology
states, its sequential IOs come in runs of the stated law, and generation is deterministic."""

import compileall
import os
import shutil
import subprocess
import sys

import pytest

import ssdbench
from ssdbench.errors import SsdbenchError
from ssdbench.suites import locked, trace_file, trace_generator, trace_profiles

# AnandTech Storage Bench 2011, Heavy workload (seed 000), and the tolerances of docs/methodology.md,
# section 7: IO counts exact; bytes written within one IO of the largest size; every published share within
# 0.01 percentage point; average queue depth within 0.001.
PUBLISHED = {"reads": 2_168_893, "writes": 1_783_447, "bytes_written": 106.32e9}
PUBLISHED_SIZES = {4096: 0.28, 16384: 0.10, 32768: 0.10, 65536: 0.04}
PUBLISHED_SHARES = {"sequential_share": 0.42, "qd1_share": 0.59}
SHARE_TOLERANCE = 1e-4
QD_TOLERANCE = 1e-3
# Our own choices, stated in the methodology: the other queue depths' shares, and the mean run length of the
# power law within 5% (the last run is cut to fit, and the runs are a sample of the law).
CHOSEN_QDS = {4: 0.10, 8: 0.08, 16: 0.05}
RUN_MEAN_TOLERANCE = 0.05
# The traces are part of the suite definition: a change here changes what every suite plays.
# Also checks that random()'s sequence, the generator's only source, is the same on this Python.
HEAVY_SHA256 = "b24a5be1a5b73c047db1d5061034f5fef666cb2d64e71d08ccd3e992dd8249d2"
SMOKE_SHA256 = "ef7349d8649156bcf95902c9a47d526859ec6f349db6eacb44b3c1448ca03d66"


def flat(trace):
    return [(qd, *io) for qd, ios in trace_file.segments(trace) for io in ios]


@pytest.fixture(scope="module")
def heavy():
    """The full-length Heavy trace's figures (about 10 s of CPU to generate and count)."""
    return trace_file.stats(trace_generator.generate("heavy-2011"))


def test_heavy_has_the_published_figures(heavy):
    s = heavy
    assert (s["reads"], s["writes"]) == (PUBLISHED["reads"], PUBLISHED["writes"])
    assert abs(s["bytes_written"] - PUBLISHED["bytes_written"]) <= 2**20
    for size, share in PUBLISHED_SIZES.items():
        assert s["size_mix"][size] == pytest.approx(share, abs=SHARE_TOLERANCE), size
    for key, share in PUBLISHED_SHARES.items():
        assert s[key] == pytest.approx(share, abs=SHARE_TOLERANCE), key
    assert s["avg_qd"] == pytest.approx(4.625, abs=QD_TOLERANCE)
    for qd, share in CHOSEN_QDS.items():
        assert s["qd_mix"][qd] == pytest.approx(share, abs=SHARE_TOLERANCE), qd
    assert sum(s["size_mix"].values()) == pytest.approx(1) and sum(s["qd_mix"].values()) == pytest.approx(1)
    assert s["footprint_bytes"] <= trace_profiles.PROFILES["heavy-2011"]["footprint"]
    assert s["segments"] <= 1000


def test_sequential_ios_come_in_runs_of_the_stated_law(heavy):
    """Not the 1.7 IOs a run that drawing each IO sequential or not at random gives: runs of two IOs or
    more average about 10 IOs, up to a thousand."""
    want = trace_profiles.targets("heavy-2011")["run_ios_mean"]
    assert 10 < want < 10.2
    assert heavy["run_ios_mean"] == pytest.approx(want, rel=RUN_MEAN_TOLERANCE)
    assert 900 < heavy["run_ios_max"] <= trace_profiles.PROFILES["heavy-2011"]["runs"]["longest"]
    # the sequential IOs are those that continue a run: each run has one that does not
    continuing = heavy["sequential_share"] * (heavy["reads"] + heavy["writes"])
    assert heavy["sequential_runs"] == pytest.approx(continuing / (heavy["run_ios_mean"] - 1), rel=1e-6)


def test_a_run_is_one_direction_and_one_size_and_only_runs_are_sequential():
    ios = flat(trace_generator.generate("smoke"))
    prev = None
    for _, op, offset, length in ios:
        if prev and prev[0] == op and prev[1] + prev[2] == offset:
            assert length == prev[2]  # a run keeps its size
        elif prev:
            assert offset != prev[1] + prev[2]  # a run never starts where the IO before it ended
        prev = (op, offset, length)


def test_segment_plan_is_the_generated_traces_without_generating_it():
    for name in ("smoke", "light-2011"):
        got = [(qd, len(ios)) for qd, ios in trace_file.segments(trace_generator.generate(name))]
        assert trace_generator.segment_plan(name) == got


def test_generation_is_deterministic(tmp_path):
    assert trace_file.digest(trace_generator.generate("heavy-2011", seed=2011)) == HEAVY_SHA256
    trace_file.write(trace_generator.generate("smoke"), tmp_path / "smoke.txt")
    assert (
        trace_file.sha256(tmp_path / "smoke.txt")
        == SMOKE_SHA256
        == trace_file.digest(trace_generator.generate("smoke"))
    )


def test_the_recipe_names_everything_the_bytes_follow_from(monkeypatch):
    recipe = trace_generator.recipe_sha256("smoke")
    assert recipe == trace_generator.recipe_sha256("smoke", seed=2011)
    assert recipe != trace_generator.recipe_sha256("smoke", seed=1)
    assert recipe != trace_generator.recipe_sha256("heavy-2011")
    monkeypatch.setitem(trace_profiles.PROFILES["smoke"], "sequential", 0.5)
    assert trace_generator.recipe_sha256("smoke") != recipe


def test_another_seed_gives_another_trace():
    other = trace_generator.generate("smoke", seed=1)
    assert trace_file.digest(other) != SMOKE_SHA256
    assert trace_file.stats(other)["reads"] == trace_profiles.PROFILES["smoke"]["reads"]


@pytest.mark.parametrize("name", ["light-2011", "smoke"])
def test_profiles_meet_their_targets(name):
    s, want = trace_file.stats(trace_generator.generate(name)), trace_profiles.targets(name)
    for key in ("reads", "writes", "bytes_read", "bytes_written", "footprint_bytes"):
        assert s[key] == want[key], key
    for key in ("size_mix", "qd_mix"):
        assert s[key] == pytest.approx(want[key]), key
    for key in ("sequential_share", "avg_qd", "qd1_share"):
        assert s[key] == pytest.approx(want[key]), key
    assert s["run_ios_mean"] == pytest.approx(want["run_ios_mean"], rel=RUN_MEAN_TOLERANCE)
    assert trace_profiles.volume(trace_profiles.PROFILES[name]) == (s["bytes_read"], s["bytes_written"])


def test_light_is_far_less_write_intensive():
    light, heavy = trace_profiles.targets("light-2011"), trace_profiles.targets("heavy-2011")
    assert light["bytes_written"] < heavy["bytes_written"] / 5
    assert light["writes"] / (light["reads"] + light["writes"]) < 0.25


def test_smoke_is_tiny():
    s = trace_file.stats(trace_generator.generate("smoke"))
    assert 2000 < s["reads"] + s["writes"] < 5000
    assert s["footprint_bytes"] <= 32 * 2**20
    assert 5 <= s["segments"] <= 20


def test_generated_ios_are_aligned_and_segments_alternate():
    ios = flat(trace_generator.generate("smoke"))
    assert all(off % 512 == 0 and length % 512 == 0 and length > 0 for _, _, off, length in ios)
    qds = [qd for qd, _ in trace_file.segments(trace_generator.generate("smoke"))]
    assert qds[::2] == [1] * (len(qds) // 2) and 1 not in qds[1::2]


def test_generator_arguments_are_checked():
    for call in (
        lambda: trace_generator.generate("heavy-2012"),
        lambda: trace_generator.generate("smoke", seed=-1),
        lambda: trace_generator.segment_plan("smoke", seed=True),
    ):
        with pytest.raises(SsdbenchError):
            call()


def test_the_recipe_is_the_same_from_bytecode_alone(tmp_path):
    """On the appliance Python is bytecode only: the recipe hash there is the one in the manifest."""
    package = tmp_path / "ssdbench"
    shutil.copytree(os.path.dirname(ssdbench.__file__), package, ignore=shutil.ignore_patterns("__pycache__"))
    assert compileall.compile_dir(package, legacy=True, quiet=1)
    for source in package.rglob("*.py"):
        source.unlink()
    assert not (package / "suites" / "trace_generator.py").exists()
    recorded = locked.manifest()["smoke"]["traces"]["trace"]["recipe_sha256"]
    code = "from ssdbench.suites import trace_generator; print(trace_generator.recipe_sha256('smoke', 1))"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)}, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == trace_generator.recipe_sha256("smoke", 1) == recorded
