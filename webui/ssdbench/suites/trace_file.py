"""The format (version 1) is plain text, one IO a line, after a header of `# key: value` lines::

    # ssdbench trace 1
    # label: synthetic, modelled on the AnandTech Storage Bench 2011 Heavy workload (not the original trace)
    # profile: heavy-2011
    # seed: 2011
    # footprint: 68719476736
    # synthetic: true
    # standard: true
    1 W 3284107264 4096
    1 W 3284111360 16384

Each IO line is `<qd> <R|W> <offset bytes> <length bytes>`. `qd` is the queue depth the IO
was issued at (1: nothing else was outstanding). Offsets and lengths are multiples of 512,
and every IO lies inside `footprint`, the LBA span from LBA 0 that the trace needs. Other
`#` lines are comments. A **segment** is a run of consecutive IOs with one qd; playback
runs each as one fio job at iodepth=qd. The file bytes are the trace's identity (`sha256`).
"""

import hashlib
import os
import tempfile

from ..errors import SsdbenchError

VERSION = 1
KiB, MiB, GiB = 1024, 1024**2, 1024**3
SECTOR = 512
# Bounds on what a trace may say: an offset or a count fits in 63 bits; one IO moves at most 16 MiB (the
# kernel splits larger requests anyway, and no trace ssdbench writes or reads holds one).
MAX_NUMBER = 2**63 - 1
MAX_IO_BYTES = 16 << 20

_META_TYPES = {"seed": int, "footprint": int, "mapped_from": int, "synthetic": bool, "standard": bool}


class Trace:
    """A trace's metadata and its segments.

    The IOs are produced afresh on every pass (regenerated, or reread from the file)
    rather than kept: the full Heavy trace as Python tuples would take about half a GB.
    """

    def __init__(self, meta, source):
        self.meta = meta
        self._source = source  # a function that returns a new iterator of (qd, ios)

    label = property(lambda self: self.meta["label"])
    synthetic = property(lambda self: self.meta["synthetic"])
    standard = property(lambda self: self.meta["standard"])
    footprint = property(lambda self: self.meta["footprint"])


def segments(trace):
    """The segments of a trace in order, each (qd, [(op, offset, length), ...]), one at a time."""
    return trace._source()


# --- the format ---------------------------------------------------------------------------


def _show(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return " ".join(str(value).split())  # one line, whatever a file name holds


def _header_text(meta):
    return f"# ssdbench trace {VERSION}\n" + "".join(f"# {k}: {_show(v)}\n" for k, v in meta.items())


def _segment_text(qd, ios):
    return "".join([f"{qd} {op} {offset} {length}\n" for op, offset, length in ios])


def text_chunks(trace):
    """The trace in its file format, a chunk at a time: the header (with qd None), then each segment's
    lines with the segment's qd."""
    yield None, _header_text(trace.meta)
    for qd, ios in segments(trace):
        yield qd, _segment_text(qd, ios)


def write(trace, path, replace=True):
    """Write a trace, streamed segment by segment; the file appears whole or not at all. Its part file has a
    name of its own, so that two writers never write one file. Without `replace`, a file already at `path`
    stays, and FileExistsError says so."""
    f = tempfile.NamedTemporaryFile(  # noqa: SIM115 - kept open while written, closed by the with below
        "w", encoding="utf-8", newline="\n", dir=os.path.dirname(os.path.abspath(path)), suffix=".part", delete=False
    )
    try:
        with f:
            for _, text in text_chunks(trace):
                f.write(text)
        os.chmod(f.name, 0o644)  # as open() makes a file; the temporary one is 0600
        if replace:
            os.replace(f.name, path)
        else:
            os.link(f.name, path)  # atomic, and refused when the name is taken
            os.remove(f.name)
    except BaseException:
        if os.path.exists(f.name):
            os.remove(f.name)
        raise


def open_text(path):
    try:
        return open(path, encoding="utf-8")
    except OSError as e:
        raise SsdbenchError(f"cannot read trace {path}: {e.strerror}") from None


def read_lines(path):
    """(line number, line) of a text file, "\r\n" read as "\n"; bytes that are not UTF-8 are an error that
    names their line, not a traceback."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise SsdbenchError(f"cannot read trace {path}: {e.strerror}") from None
    with f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise SsdbenchError(f"{path}, line {n}: not text (bytes that are not UTF-8)") from None
            yield n, line[:-2] + "\n" if line.endswith("\r\n") else line


def parse_number(text, where, what, most=MAX_NUMBER):
    """A whole number of the file, at most `most` (by default 2^63 - 1, what fio and the kernel take for an
    offset): a larger one, or a longer one (Python refuses to read 4,300 digits), is refused by its line."""
    if not (text.isascii() and text.isdigit()):
        raise SsdbenchError(f"{where}: {what} {text!r} is not a whole number >= 0")
    if len(text.lstrip("0")) > len(str(most)) or int(text) > most:
        raise SsdbenchError(f"{where}: {what} {text[:24]}{'...' if len(text) > 24 else ''} is over {most}")
    return int(text)


def _header(path):
    meta, first = {}, True
    for n, line in read_lines(path):
        where = f"{path}, line {n}"
        if first:
            words = line.split()
            if words[:3] != ["#", "ssdbench", "trace"]:
                raise SsdbenchError(f"{where}: not an ssdbench trace (expected '# ssdbench trace {VERSION}')")
            if words[3:] != [str(VERSION)]:
                raise SsdbenchError(
                    f"{where}: unknown trace version {' '.join(words[3:])!r} (this ssdbench reads version {VERSION})"
                )
            first = False
            continue
        if not line.startswith("#"):
            break
        key, sep, value = line[1:].strip().partition(": ")
        if not sep:
            continue  # a comment
        kind = _META_TYPES.get(key, str)
        if kind is bool:
            if value not in ("true", "false"):
                raise SsdbenchError(f"{where}: {key} must be true or false, not {value!r}")
            meta[key] = value == "true"
        else:
            meta[key] = parse_number(value, where, key) if kind is int else value
    if first:
        raise SsdbenchError(f"{path}: empty file, not an ssdbench trace")
    if "footprint" not in meta:
        raise SsdbenchError(f"{path}: the header has no 'footprint' line")
    return meta


def _ios(path, footprint):
    """(qd, op, offset, length) of every IO line of a trace file, checked."""
    for n, line in read_lines(path):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        where = f"{path}, line {n}"
        if len(fields) != 4:
            raise SsdbenchError(f"{where}: expected '<qd> <R|W> <offset> <length>', got {line.strip()!r}")
        qd, op, offset, length = fields
        qd = parse_number(qd, where, "qd")
        offset = parse_number(offset, where, "offset")
        length = parse_number(length, where, "length", MAX_IO_BYTES)
        if qd < 1:
            raise SsdbenchError(f"{where}: qd must be at least 1")
        if op not in ("R", "W"):
            raise SsdbenchError(f"{where}: op {op!r} is not R or W")
        if offset % SECTOR or length % SECTOR or not length:
            raise SsdbenchError(f"{where}: offset and length must be multiples of {SECTOR}, and length > 0")
        if offset + length > footprint:
            raise SsdbenchError(f"{where}: the IO ends at {offset + length}, past the footprint {footprint}")
        yield qd, op, offset, length


def _runs(ios):
    """Group (qd, op, offset, length) into segments: maximal runs of one qd."""
    qd, run = None, []
    for q, op, offset, length in ios:
        if q != qd and run:
            yield qd, run
            run = []
        qd = q
        run.append((op, offset, length))
    if run:
        yield qd, run


def read(path):
    """Read a trace file. Every line is checked here, so a bad file fails now, naming the line."""
    meta = _header(path)
    if not sum(1 for _ in _ios(path, meta["footprint"])):
        raise SsdbenchError(f"{path}: the trace has no IOs")
    return Trace(meta, lambda: _runs(_ios(path, meta["footprint"])))


def sha256(path):
    """The sha256 of a trace file's bytes, in hex."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --- figures ------------------------------------------------------------------------------


def stats(trace):
    """The figures of a trace (or of a trace file): op counts and bytes, share of IOs by
    length, sequential share, the sequential runs, mean qd over IOs, share of IOs at qd 1
    and by qd, footprint (the end of the highest IO) and number of segments.

    An IO is sequential when it has the direction of the IO before it and starts where that
    one ended. A sequential run is an IO that is not, followed by the IOs that are; the run
    figures count the runs of two IOs or more."""
    if not isinstance(trace, Trace):
        trace = read(trace)
    reads = writes = bytes_read = bytes_written = sequential = qd_sum = count = footprint = 0
    by_size, by_qd, runs, prev, run = {}, {}, {}, None, 0
    for qd, ios in segments(trace):
        count += 1
        qd_sum += qd * len(ios)
        by_qd[qd] = by_qd.get(qd, 0) + len(ios)
        for op, offset, length in ios:
            if op == "R":
                reads += 1
                bytes_read += length
            else:
                writes += 1
                bytes_written += length
            if prev == (op, offset):
                sequential += 1
                run += 1
            else:
                runs[run] = runs.get(run, 0) + 1
                run = 1
            by_size[length] = by_size.get(length, 0) + 1
            prev = (op, offset + length)
            footprint = max(footprint, offset + length)
    runs[run] = runs.get(run, 0) + 1
    long_runs = {k: c for k, c in runs.items() if k >= 2}
    n = reads + writes
    return {
        "reads": reads,
        "writes": writes,
        "bytes_read": bytes_read,
        "bytes_written": bytes_written,
        "size_mix": {s: c / n for s, c in sorted(by_size.items())},
        "sequential_share": sequential / n,
        "sequential_runs": sum(long_runs.values()),
        "run_ios_mean": sum(k * c for k, c in long_runs.items()) / max(1, sum(long_runs.values())),
        "run_ios_max": max(long_runs, default=0),
        "avg_qd": qd_sum / n,
        "qd1_share": by_qd.get(1, 0) / n,
        "qd_mix": {q: c / n for q, c in sorted(by_qd.items())},
        "footprint_bytes": footprint,
        "segments": count,
    }


def digest(trace):
    """The sha256 of a trace's file bytes, streamed: the trace is never written out to get it."""
    h = hashlib.sha256()
    for _, text in text_chunks(trace):
        h.update(text.encode())
    return h.hexdigest()


def measured(trace):
    """(stats, sha256 of the file bytes) of a trace, in one pass over it."""
    h = hashlib.sha256(_header_text(trace.meta).encode())

    def hashed():
        for qd, ios in segments(trace):
            h.update(_segment_text(qd, ios).encode())
            yield qd, ios

    return stats(Trace(trace.meta, hashed)), h.hexdigest()


def map_to_capacity(trace, capacity_bytes):
    """(trace, mapped): a trace whose footprint exceeds the drive is folded onto it, offset
    modulo the capacity rounded down to 1 MiB (which keeps each IO's alignment); an IO that
    would then cross the end is moved back to end there."""
    footprint = trace.meta["footprint"]
    if footprint <= capacity_bytes:
        return trace, False
    usable = capacity_bytes // MiB * MiB
    if usable < 16 * MiB:
        raise SsdbenchError(f"a drive of {capacity_bytes} bytes is too small to play a trace on")

    def folded():
        for qd, ios in segments(trace):
            out = []
            for op, offset, length in ios:
                if length > usable:
                    raise SsdbenchError(f"an IO of {length} bytes does not fit on a drive of {capacity_bytes} bytes")
                offset %= usable
                out.append((op, min(offset, usable - length), length))
            yield qd, out

    return Trace(dict(trace.meta, footprint=usable, mapped_from=footprint), folded), True
