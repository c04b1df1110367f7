"""Synthetic traces: the profiles meet the published figures, and generation is deterministic."""

import pytest

from ssdbench.errors import SsdbenchError
from ssdbench.suites import trace_file, trace_generator, trace_profiles

# AnandTech Storage Bench 2011, Heavy workload (seed 000).
PUBLISHED = {
    "reads": 2_168_893,
    "writes": 1_783_447,
    "bytes_written": 106.32e9,
    "sequential_share": 0.42,
    "avg_qd": 4.625,
    "qd1_share": 0.59,
}
PUBLISHED_SIZES = {4096: 0.28, 16384: 0.10, 32768: 0.10, 65536: 0.04}
# The traces are part of the suite definition: a change here changes what every suite plays.
# Also checks that random()'s sequence, the generator's only source, is the same on this Python.
HEAVY_SHA256 = "9dacdca408ecbe783371d962ef9b5c594cba777bcac30045ebcf4aabaa26f275"
SMOKE_SHA256 = "1c01088d860a7850d179ae9cf5af7a7ee2ccaf19d2fd49a39e289ec059eb696e"


def flat(trace):
    return [(qd, *io) for qd, ios in trace_file.segments(trace) for io in ios]


def near(got, want, rel=0.01):
    return abs(got - want) <= rel * abs(want)


@pytest.fixture(scope="module")
def heavy(tmp_path_factory):
    path = tmp_path_factory.mktemp("heavy") / "heavy.txt"
    trace_file.write(trace_generator.generate("heavy-2011"), path)
    return path


def test_heavy_matches_the_published_figures():
    s = trace_file.stats(trace_generator.generate("heavy-2011"))
    assert s["reads"] == PUBLISHED["reads"] and s["writes"] == PUBLISHED["writes"]
    assert round(s["bytes_written"] / 1e9, 2) == 106.32
    for key, want in PUBLISHED.items():
        assert near(s[key], want), (key, s[key], want)
    for size, share in PUBLISHED_SIZES.items():
        assert near(s["size_mix"][size], share), (size, s["size_mix"][size])
    assert sum(s["size_mix"].values()) == pytest.approx(1)
    assert s["footprint_bytes"] <= trace_profiles.PROFILES["heavy-2011"]["footprint"]
    assert s["segments"] <= 1000


def test_heavy_segments_are_playable():
    lengths = [len(ios) for _, ios in trace_file.segments(trace_generator.generate("heavy-2011"))]
    assert len(lengths) <= 1000 and min(lengths) >= 100


def test_generation_is_deterministic(heavy, tmp_path):
    assert trace_file.sha256(heavy) == HEAVY_SHA256
    again = tmp_path / "again.txt"
    trace_file.write(trace_generator.generate("heavy-2011", seed=2011, scale=1.0), again)
    assert trace_file.sha256(again) == trace_file.sha256(heavy)
    trace_file.write(trace_generator.generate("smoke"), tmp_path / "smoke.txt")
    assert trace_file.sha256(tmp_path / "smoke.txt") == SMOKE_SHA256


def test_another_seed_gives_another_trace(tmp_path):
    trace_file.write(trace_generator.generate("smoke", seed=1), tmp_path / "one.txt")
    assert trace_file.sha256(tmp_path / "one.txt") != SMOKE_SHA256
    assert trace_file.stats(tmp_path / "one.txt")["reads"] == trace_profiles.PROFILES["smoke"]["reads"]


@pytest.mark.parametrize("name,scale", [("light-2011", 1.0), ("smoke", 1.0), ("heavy-2011", 0.1)])
def test_profiles_meet_their_targets(name, scale):
    s, want = trace_file.stats(trace_generator.generate(name, scale=scale)), trace_profiles.targets(name, scale)
    for key in ("reads", "writes", "bytes_read", "bytes_written", "footprint_bytes"):
        assert s[key] == want[key], key
    assert s["size_mix"] == pytest.approx(want["size_mix"])
    for key in ("sequential_share", "avg_qd", "qd1_share"):
        assert s[key] == pytest.approx(want[key]), key
    assert trace_profiles.scaled_bytes(trace_profiles.PROFILES[name], scale) == (s["bytes_read"], s["bytes_written"])


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
        lambda: trace_generator.generate("smoke", scale=0),
        lambda: trace_generator.generate("smoke", scale=0.01),
    ):
        with pytest.raises(SsdbenchError):
            call()
