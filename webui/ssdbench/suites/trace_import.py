"""User traces (blkparse text, fio iologs, MSR-Cambridge CSV) are imported into the same
structure and marked `synthetic: false`, `standard: false`; `load` tells the formats apart.
"""

import heapq
import math
import os
import re
import statistics

from ..errors import SsdbenchError
from .trace_file import MAX_IO_BYTES, SECTOR, Trace, open_text, parse_number, read, read_lines

_MAX_SEGMENTS = 1000  # imported traces
_MAX_QD = 32


def _user_trace(path, fmt, how_qd, ios):
    """A trace of imported IOs (op, offset, length, qd), grouped for playback.

    fio runs a segment at one iodepth, so the IOs go in consecutive blocks, as few IOs a
    block as keeps the trace within 1000 blocks; a block's qd is the median qd of its IOs
    (rounded half up, at most 32), and neighbouring blocks of one qd make one segment. The
    played queue depth is thus an approximation of the recorded one, coarser the longer
    the trace.
    """
    if not ios:
        raise SsdbenchError(f"{path}: no read or write IOs found")
    block = math.ceil(len(ios) / _MAX_SEGMENTS)
    grouped = []
    for i in range(0, len(ios), block):
        chunk = ios[i : i + block]
        qd = min(_MAX_QD, int(statistics.median(io[3] for io in chunk) + 0.5))
        rest = [io[:3] for io in chunk]
        if grouped and grouped[-1][0] == qd:
            grouped[-1][1].extend(rest)
        else:
            grouped.append((qd, rest))
    meta = {
        "label": f"user trace ({fmt}), not a standard trace",
        "source": os.path.basename(path),
        "format": fmt,
        "qd": how_qd,
        "footprint": max(offset + length for _, offset, length, _ in ios),
        "synthetic": False,
        "standard": False,
    }
    return Trace(meta, lambda: iter(grouped))


def _aligned(offset, length):
    """Byte extents widened to whole sectors, since playback does direct IO."""
    start = offset // SECTOR * SECTOR
    return start, -(-(offset + length) // SECTOR) * SECTOR - start


# Default blkparse output: "%D %2c %8s %5T.%9t %5p %2a %3d " then the action's payload.
_BLK_EVENT = re.compile(r"\s*\d+,\d+\s+\d+\s+\d+\s+\d+\.\d+\s+\d+\s+(\S+)\s+(\S+)\s*(.*)")
_BLK_SUMMARY = re.compile(r"(CPU\d+|Total) \(")  # the per-CPU and total counts blkparse prints at the end
_BLK_EXTENT = re.compile(r"(\d+) \+ (\d+)\b")


def import_blkparse(path):
    """A trace from blkparse's default text output (`blktrace -d DEV -o - | blkparse -i -`).

    Only D (issued to the device) and C (completed) events of data reads and writes count;
    an IO's qd is the number of IOs outstanding when it was issued, itself included. A C
    with no D before it (in flight when tracing began) is ignored. Sectors are 512 bytes.
    """
    ios, outstanding, in_flight = [], {}, 0
    for n, line in read_lines(path):
        if _BLK_SUMMARY.match(line):
            break
        if not line.strip():
            continue
        event = _BLK_EVENT.match(line)
        if not event:
            raise SsdbenchError(f"{path}, line {n}: not a blkparse event line: {line.strip()!r}")
        action, rwbs, payload = event.groups()
        op = "W" if "W" in rwbs else "R" if "R" in rwbs else None
        if action not in ("D", "C") or op is None:
            continue
        extent = _BLK_EXTENT.match(payload)
        if action == "D" and not extent:
            raise SsdbenchError(f"{path}, line {n}: a D event of a {rwbs} with no 'sector + count': {line.strip()!r}")
        if not extent or extent[2] == "0":
            continue  # no data: the empty write of a flush completes as "C WS 0 [0]"
        where = f"{path}, line {n}"
        sector = parse_number(extent[1], where, "sector")
        sectors = parse_number(extent[2], where, "sector count", MAX_IO_BYTES // SECTOR)
        key = (line.split()[0], sector, sectors)
        if action == "D":
            outstanding[key] = outstanding.get(key, 0) + 1
            in_flight += 1
            ios.append((op, sector * SECTOR, sectors * SECTOR, in_flight))
        elif outstanding.get(key):
            outstanding[key] -= 1
            in_flight -= 1
    return _user_trace(path, "blkparse", "from D and C events, median per block", ios)


_FIO_HEADERS = {"fio version 2 iolog": 2, "fio version 3 iolog": 3}
_FIO_IGNORED = {"add", "open", "close", "sync", "datasync", "trim", "wait"}


def import_fio_iolog(path, qd=1):
    """A trace from a fio iolog, version 2 or 3 (fio's HOWTO, "Trace file format").

    Reads and writes become IOs; file actions, syncs, trims and waits are dropped, and IOs
    on different files all go to the one drive. The iolog records no queue depth, so every
    IO gets `qd`, which the metadata says was chosen at import.
    """
    if not isinstance(qd, int) or isinstance(qd, bool) or not 1 <= qd <= _MAX_QD:
        raise SsdbenchError(f"qd must be a whole number from 1 to {_MAX_QD}, not {qd!r}")
    ios, version = [], None
    for n, line in read_lines(path):
        where = f"{path}, line {n}"
        if version is None:
            version = _FIO_HEADERS.get(line.strip())
            if version is None:
                raise SsdbenchError(
                    f"{where}: not a fio iolog (expected 'fio version 2 iolog' or 'fio version 3 iolog')"
                )
            continue
        fields = line.split()
        if not fields:
            continue
        if version == 3:
            parse_number(fields.pop(0), where, "timestamp")
        if len(fields) not in (2, 4):
            raise SsdbenchError(f"{where}: expected '<file> <action> [<offset> <length>]', got {line.strip()!r}")
        action = fields[1]
        if action in _FIO_IGNORED:
            continue
        if action not in ("read", "write") or len(fields) != 4:
            raise SsdbenchError(f"{where}: unknown iolog action {line.strip()!r}")
        offset = parse_number(fields[2], where, "offset")
        length = parse_number(fields[3], where, "length", MAX_IO_BYTES)
        if length:
            ios.append((action[0].upper(), *_aligned(offset, length), qd))
    if version is None:
        raise SsdbenchError(f"{path}: empty file, not a fio iolog")
    return _user_trace(path, f"fio iolog v{version}", f"{qd}, chosen at import (a fio iolog records none)", ios)


_MSR_HEADER = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime"
_MSR_ROW = re.compile(r"\d+,[^,]*,\d+,(Read|Write),\d+,\d+,\d+$")


def import_msr_csv(path):
    """A trace from an MSR-Cambridge CSV: Timestamp,Hostname,DiskNumber,Type,Offset,Size,
    ResponseTime, times in 100 ns ticks, Type Read or Write, one disk a file.

    An IO's qd is the number of IOs outstanding at its issue time (issued before it and
    not yet completed at that instant), itself included, as for blkparse.
    """
    rows, disk = [], None
    for n, line in read_lines(path):
        where = f"{path}, line {n}"
        text = line.strip()
        if not text or (n == 1 and text.startswith("Timestamp,")):
            continue
        fields = text.split(",")
        if len(fields) != 7:
            raise SsdbenchError(f"{where}: expected 7 comma-separated fields ({_MSR_HEADER}), got {len(fields)}")
        stamp, host, number, kind, offset, size, response = fields
        if kind not in ("Read", "Write"):
            raise SsdbenchError(f"{where}: Type {kind!r} is not Read or Write")
        if disk is None:
            disk = (host, number)
        elif (host, number) != disk:
            raise SsdbenchError(
                f"{where}: disk {host}/{number} after disk {disk[0]}/{disk[1]}; split the file into one file per disk"
            )
        stamp, offset, response = (
            parse_number(v, where, k) for v, k in ((stamp, "Timestamp"), (offset, "Offset"), (response, "ResponseTime"))
        )
        size = parse_number(size, where, "Size", MAX_IO_BYTES)
        if size:
            rows.append((stamp, kind[0], *_aligned(offset, size), response))
    rows.sort(key=lambda r: r[0])  # stable: same-tick IOs keep the file's order
    ios, completions = [], []
    for stamp, op, offset, length, response in rows:
        while completions and completions[0] <= stamp:
            heapq.heappop(completions)
        heapq.heappush(completions, stamp + response)
        ios.append((op, offset, length, len(completions)))
    return _user_trace(path, "MSR-Cambridge CSV", "from issue and response times, median per block", ios)


def load(path, qd=1):
    """Any trace ssdbench reads, told apart by its content: an ssdbench trace, a fio iolog
    (played at `qd`), blkparse text output, or an MSR-Cambridge CSV."""
    with open_text(path) as f:
        try:
            first = next((line for line in f if line.strip()), "")
        except UnicodeDecodeError:
            first = ""
    if first.startswith("# ssdbench trace"):
        return read(path)
    if first.strip() in _FIO_HEADERS:
        return import_fio_iolog(path, qd)
    if _BLK_EVENT.match(first):
        return import_blkparse(path)
    if first.strip() == _MSR_HEADER or _MSR_ROW.match(first.strip()):
        return import_msr_csv(path)
    raise SsdbenchError(
        f"{path}: not a trace ssdbench reads (an ssdbench trace, a fio iolog v2 or v3, "
        "blkparse text output, or an MSR-Cambridge CSV; a binary blktrace capture "
        "needs 'blkparse -i' first)"
    )
