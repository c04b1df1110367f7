"""The trace file: written and read back whole, folded onto a small drive, malformed files refused by line."""

import os

import pytest

from ssdbench.errors import SsdbenchError
from ssdbench.suites import trace_file, trace_generator


def flat(trace):
    return [(qd, *io) for qd, ios in trace_file.segments(trace) for io in ios]


def test_round_trip(tmp_path):
    trace = trace_generator.generate("smoke")
    trace_file.write(trace, tmp_path / "t.txt")
    back = trace_file.read(tmp_path / "t.txt")
    assert back.meta == trace.meta and back.synthetic and back.standard
    assert flat(back) == flat(trace)
    assert trace_file.stats(tmp_path / "t.txt") == trace_file.stats(trace)
    assert not os.path.exists(tmp_path / "t.txt.part")


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
