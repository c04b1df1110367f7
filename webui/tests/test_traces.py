"""Storage Bench traces: the generator against the published figures, the format, the importers
on real captures (data/traces/README.md says how each was made), and malformed input."""

import os

import pytest

from ssdbench.errors import SsdbenchError
from ssdbench.suites import trace_file, trace_generator, trace_import, trace_profiles

DATA = os.path.join(os.path.dirname(__file__), "data", "traces")

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


def test_round_trip(tmp_path):
    trace = trace_generator.generate("smoke", scale=0.5)
    trace_file.write(trace, tmp_path / "t.txt")
    back = trace_file.read(tmp_path / "t.txt")
    assert back.meta == trace.meta and back.synthetic and back.standard
    assert flat(back) == flat(trace)
    assert trace_file.stats(tmp_path / "t.txt") == trace_file.stats(trace)
    assert not os.path.exists(tmp_path / "t.txt.part")


def test_generator_arguments_are_checked():
    for call in (
        lambda: trace_generator.generate("heavy-2012"),
        lambda: trace_generator.generate("smoke", seed=-1),
        lambda: trace_generator.generate("smoke", scale=0),
        lambda: trace_generator.generate("smoke", scale=0.01),
    ):
        with pytest.raises(SsdbenchError):
            call()


def test_map_to_capacity_folds_a_large_trace_onto_the_drive():
    trace = trace_generator.generate("smoke")
    same, mapped = trace_file.map_to_capacity(trace, 64 * 2**20)
    assert same is trace and not mapped
    small, mapped = trace_file.map_to_capacity(trace, 20 * 2**20 + 12345)
    assert mapped and small.meta["footprint"] == 20 * 2**20 and small.meta["mapped_from"] == 32 * 2**20
    before, after = flat(trace), flat(small)
    assert [(qd, op, n) for qd, op, _, n in after] == [(qd, op, n) for qd, op, _, n in before]
    assert all(off >= 0 and off + n <= 20 * 2**20 for _, _, off, n in after)
    assert all(a[2] % 4096 == b[2] % 4096 for a, b in zip(after, before))


# --- importers, on the captures ------------------------------------------------------------


def test_blkparse_capture():
    trace = trace_import.load(os.path.join(DATA, "blkparse-loop.txt"))
    assert trace.meta["format"] == "blkparse" and not trace.synthetic and not trace.standard
    ios = flat(trace)
    ops = [op for _, op, _, _ in ios]
    assert (ops.count("R"), ops.count("W")) == (47, 65)  # the D R and D WS events; flushes and discards dropped
    assert ios[:32] == [(1, "R", k * 65536, 65536) for k in range(32)]  # the sequential QD1 reads
    # Counted by hand from the D and C lines of the file (line numbers in blkparse-loop.txt):
    assert ios[32] == (1, "W", 7904 * 512, 4096)  # line 197: nothing outstanding
    assert ios[39] == (8, "W", 46336 * 512, 4096)  # line 232: the eighth D with no C between
    assert ios[40] == (6, "W", 119664 * 512, 4096)  # line 240: after three Cs (lines 233-235)
    assert ios[43] == (6, "W", 85344 * 512, 4096)  # line 258: 8, then three Cs at 251-253
    assert ios[48] == (1, "W", 57736 * 512, 4096)  # line 298: all done; the flush's C WS 0 is not an IO
    assert max(qd for qd, *_ in ios) == 8


def test_fio_iolog_v3_capture():
    trace = trace_import.load(os.path.join(DATA, "fio-3.33-iolog-v3.log"), qd=4)
    assert trace.meta["format"] == "fio iolog v3" and "chosen at import" in trace.meta["qd"]
    ios = flat(trace)
    assert len(ios) == 120 and sum(op == "R" for _, op, _, _ in ios) == 73
    assert ios[0] == (4, "R", 4046848, 65536)
    assert ios[-1] == (4, "R", 63971328, 16384)
    assert list(trace_file.segments(trace))[0][0] == 4


def test_fio_iolog_v2_handwritten():
    trace = trace_import.load(os.path.join(DATA, "fio-iolog-v2-handwritten.log"))
    assert trace.meta["format"] == "fio iolog v2"
    assert flat(trace) == [
        (1, "W", 0, 65536),
        (1, "W", 65536, 65536),
        (1, "W", 131072, 65536),
        (1, "R", 1048576, 4096),
        (1, "R", 5242880, 16384),
        (1, "R", 0, 131072),
        (1, "W", 2097152, 32768),
        (1, "R", 2097152, 32768),
        (1, "W", 12582912, 4096),
        (1, "R", 12582912, 4096),
    ]


def test_msr_handmade():
    trace = trace_import.load(os.path.join(DATA, "msr-handmade.csv"))
    assert trace.meta["format"] == "MSR-Cambridge CSV"
    ios = flat(trace)
    # Issue times and response times (ticks after the first IO): 0+1000, 200+3000, 400+500,
    # 1000+100 (the first and third are done by then), 5000+800 twice, 5071+800, 5171+2000,
    # 8371+50 (all done), a zero-length write (dropped), 8571+400, 8671+150.
    assert [qd for qd, *_ in ios] == [1, 2, 3, 2, 1, 2, 3, 4, 1, 1, 2]
    assert [op for _, op, _, _ in ios] == list("RWRWRRRWRWR")
    assert ios[0] == (1, "R", 3203653632, 4096)


def test_imported_trace_round_trips(tmp_path):
    trace = trace_import.load(os.path.join(DATA, "blkparse-loop.txt"))
    trace_file.write(trace, tmp_path / "user.txt")
    back = trace_import.load(tmp_path / "user.txt")
    assert back.meta == trace.meta and flat(back) == flat(trace)
    assert trace_file.stats(back)["segments"] == trace_file.stats(trace)["segments"]


def test_large_imports_are_grouped_into_at_most_1000_segments(tmp_path):
    # IO i is issued at 10 ms * i and takes 10 ms * (i % 7), so up to 7 are in flight.
    rows = [f"{100_000 * i},hm,0,Write,{4096 * i},4096,{(i % 7) * 100_000 + 1}" for i in range(5000)]
    header = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n"
    (tmp_path / "big.csv").write_text(header + "\n".join(rows) + "\n")
    trace = trace_import.load(tmp_path / "big.csv")
    segs = list(trace_file.segments(trace))
    assert len(segs) <= 1000 and sum(len(ios) for _, ios in segs) == 5000
    assert {qd for qd, _ in segs} <= set(range(1, 8)) and len({qd for qd, _ in segs}) > 1


# --- malformed input -----------------------------------------------------------------------

HEADER = "# ssdbench trace 1\n# label: test\n# footprint: 1048576\n"


@pytest.mark.parametrize(
    "text,line,message",
    [
        (HEADER + "1 R 0 4096\n1 X 4096 4096\n", 5, "op 'X'"),
        (HEADER + "1 R -512 4096\n", 4, "offset '-512'"),
        (HEADER + "1 W 100 4096\n", 4, "multiples of 512"),
        (HEADER + "1 W 0 0\n", 4, "length > 0"),
        (HEADER + "1 R 4096\n", 4, "expected '<qd> <R|W> <offset> <length>'"),
        (HEADER + "0 R 0 4096\n", 4, "qd must be at least 1"),
        (HEADER + "1 R 1048576 4096\n", 4, "past the footprint"),
        ("# ssdbench trace 2\n# footprint: 1048576\n1 R 0 4096\n", 1, "unknown trace version '2'"),
        ("# label: x\n1 R 0 4096\n", 1, "not an ssdbench trace"),
        (HEADER.replace("1048576", "big"), 3, "footprint 'big'"),
    ],
)
def test_malformed_trace_names_the_line(tmp_path, text, line, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(SsdbenchError, match=f"line {line}: .*{message}"):
        trace_file.read(path)


def test_empty_trace_and_missing_footprint(tmp_path):
    (tmp_path / "empty.txt").write_text(HEADER)
    with pytest.raises(SsdbenchError, match="no IOs"):
        trace_file.read(tmp_path / "empty.txt")
    (tmp_path / "nofoot.txt").write_text("# ssdbench trace 1\n1 R 0 4096\n")
    with pytest.raises(SsdbenchError, match="no 'footprint'"):
        trace_file.read(tmp_path / "nofoot.txt")
    with pytest.raises(SsdbenchError, match="cannot read trace"):
        trace_file.read(tmp_path / "missing.txt")


@pytest.mark.parametrize(
    "name,text,line,message",
    [
        ("v2.log", "fio version 2 iolog\n/dev/sdb add\n/dev/sdb frob 0 4096\n", 3, "unknown iolog action"),
        ("v2.log", "fio version 2 iolog\n/dev/sdb read x 4096\n", 2, "offset 'x'"),
        ("v2.log", "fio version 2 iolog\n/dev/sdb read 0\n", 2, "expected '<file> <action>"),
        ("v3.log", "fio version 3 iolog\n/dev/sdb read 0 4096\n", 2, "timestamp '/dev/sdb'"),
        ("msr.csv", "1,hm,0,Read,0,4096,10\n2,hm,0,Flush,0,0,10\n", 2, "Type 'Flush'"),
        ("msr.csv", "1,hm,0,Read,0,4096,10\n2,hm,0,Read,0,4096\n", 2, "expected 7 comma-separated fields"),
        ("msr.csv", "1,hm,0,Read,0,4096,10\n2,hm,1,Read,0,4096,10\n", 2, "split the file"),
        (
            "blk.txt",
            "  8,0    0   1   0.000000000   10  D   R 0 + 8 [x]\n  8,0    0   2   soon   10  C   R 0 + 8 [0]\n",
            2,
            "not a blkparse event line",
        ),
    ],
)
def test_malformed_user_trace_names_the_line(tmp_path, name, text, line, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(SsdbenchError, match=f"line {line}: .*{message}"):
        trace_import.load(path)


def test_load_rejects_what_it_does_not_know(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "blk.bin").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "flushes.txt").write_text("  8,0    0   1   0.000000000   10  D  FN [x]\n")
    for name, message in (
        ("notes.txt", "not a trace ssdbench reads"),
        ("blk.bin", "blkparse -i"),
        ("flushes.txt", "no read or write IOs"),
    ):
        with pytest.raises(SsdbenchError, match=message):
            trace_import.load(tmp_path / name)
