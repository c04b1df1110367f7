"""Users' traces imported: blkparse, fio iologs v2 and v3, MSR-Cambridge CSV; malformed ones refused by line."""

import os

import pytest

from ssdbench.errors import SsdbenchError
from ssdbench.suites import trace_file, trace_import

DATA = os.path.join(os.path.dirname(__file__), "data", "traces")


def flat(trace):
    return [(qd, *io) for qd, ios in trace_file.segments(trace) for io in ios]


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
