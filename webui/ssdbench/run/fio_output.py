"""Turn what fio writes into plain values: its JSON documents, its per-second and per-IO logs, and the
progress between two status documents.

Nothing here starts a process, so every function is tested on outputs captured from fio (tests/data/).
"""

import json
import re
from dataclasses import dataclass

from ..errors import SsdbenchError

DIRECTIONS = ("read", "write", "trim")  # in the order of fio's direction numbers in its logs
# Percentiles the suites ask fio for (percentile_list); fio keys them as "99.990000".
PERCENTILES = ("50", "90", "99", "99.9", "99.99")


@dataclass(frozen=True)
class Metric:
    """One figure, with the JSON pointer (RFC 6901) of the fio field it was read from."""

    name: str
    value: float
    unit: str
    source: str


def fio_documents(text):
    """Every JSON document in fio's output, in order.

    fio may print notes before its JSON, and --status-interval appends one whole
    document per interval, so the text is a stream of documents, not one.
    """
    return fio_stream(text)[0]


def fio_stream(text):
    """The whole documents at the start of a growing fio output, and how many characters they used.

    fio starts every document with a "{" at the start of a line; inner objects are
    indented. A document that does not decode is complete only if another follows.
    """
    decoder = json.JSONDecoder()
    starts = [m.start() for m in re.finditer(r"^\{", text, re.M)]
    docs, used = [], 0
    for n, start in enumerate(starts):
        try:
            doc, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            if n == len(starts) - 1:
                return docs, start
            continue
        if isinstance(doc, dict) and "jobs" in doc:
            docs.append(doc)
        used = end
    return docs, used


def fio_result(text):
    """The final document of fio's output: the one that holds the whole job's result."""
    docs = fio_documents(text)
    if not docs:
        raise SsdbenchError("fio wrote no JSON result; see the step's fio.stderr for its message")
    return docs[-1]


def pointer_get(doc, pointer):
    """Resolve an RFC 6901 JSON pointer such as /jobs/0/read/iops."""
    value = doc
    for token in pointer.lstrip("/").split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        value = value[int(token)] if isinstance(value, list) else value[token]
    return value


def source_value(doc, source):
    """The value a metric's source names: a JSON pointer, optionally scaled as '<pointer> / 1e6'."""
    pointer, _, divisor = source.partition(" / ")
    value = pointer_get(doc, pointer)
    return value / float(divisor) if divisor else value


def _percentile_key(p):
    return f"{float(p):.6f}"


def fio_metrics(doc):
    """The metrics of one fio result, each traced to its field in the JSON.

    Only directions that did I/O are reported, so a read test has no write rows.
    Job names prefix the metrics only when the result holds several jobs.
    """
    metrics = []
    jobs = doc.get("jobs", [])
    for i, job in enumerate(jobs):
        prefix = f"{job['jobname']}." if len(jobs) > 1 else ""
        base = f"/jobs/{i}"
        for d in DIRECTIONS:
            stats = job.get(d)
            if not stats or not stats.get("total_ios"):
                continue
            p = f"{base}/{d}"

            def add(name, unit, pointer):
                metrics.append(Metric(f"{prefix}{d}.{name}", float(pointer_get(doc, pointer)), unit, pointer))

            add("iops", "IOPS", f"{p}/iops")
            add("bw", "B/s", f"{p}/bw_bytes")
            # MB/s (10^6 bytes), the unit of the articles and of CrystalDiskMark: bw_bytes scaled, not rounded.
            metrics.append(Metric(f"{prefix}{d}.mb_s", stats["bw_bytes"] / 1e6, "MB/s", f"{p}/bw_bytes / 1e6"))
            add("io_bytes", "B", f"{p}/io_bytes")
            add("total_ios", "IOs", f"{p}/total_ios")
            add("runtime", "ms", f"{p}/runtime")
            # One basis for every latency figure: total latency (submission + completion). The suites ask
            # fio for its percentiles (lat_percentiles=1); completion-latency percentiles are never reported.
            for stat in ("mean", "min", "max", "stddev"):
                add(f"lat_{stat}", "ns", f"{p}/lat_ns/{stat}")
            percentiles = stats.get("lat_ns", {}).get("percentile", {})
            for pct in PERCENTILES:
                if _percentile_key(pct) in percentiles:
                    add(f"lat_p{pct}", "ns", f"{p}/lat_ns/percentile/{_percentile_key(pct)}")
        metrics.append(Metric(f"{prefix}usr_cpu", float(job["usr_cpu"]), "%", f"{base}/usr_cpu"))
        metrics.append(Metric(f"{prefix}sys_cpu", float(job["sys_cpu"]), "%", f"{base}/sys_cpu"))
    for i, disk in enumerate(doc.get("disk_util", [])):
        metrics.append(Metric(f"disk.{disk['name']}.util", float(disk["util"]), "%", f"/disk_util/{i}/util"))
    return metrics


def fio_job_error(doc):
    """fio's own error number for the first failed job, or 0."""
    return next((job["error"] for job in doc.get("jobs", []) if job.get("error")), 0)


@dataclass(frozen=True)
class LogSample:
    t_ms: int
    value: float
    direction: int  # 0 read, 1 write, 2 trim, as fio writes it
    bs: int
    offset: int | None = None  # present in logs written with log_offset=1


def fio_log(text):
    """Rows of a fio iops/bw/lat log: time (ms), value, direction, block size, ..."""
    samples = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        try:
            offset = int(fields[4]) if len(fields) > 5 else None  # the last field is the priority
            samples.append(LogSample(int(fields[0]), float(fields[1]), int(fields[2]), int(fields[3]), offset))
        except (ValueError, IndexError) as exc:
            raise SsdbenchError(f"fio log line {n} is not 'time, value, direction, bs': {line!r}") from exc
    return samples


# fio's latency histogram (stat.h): FIO_IO_U_PLAT_BITS, and FIO_IO_U_PLAT_NR = 29 groups of 2**BITS bins.
PLAT_BITS = 6
PLAT_BINS = 29 << PLAT_BITS


def plat_value(index):
    """The latency in ns that fio gives a histogram bin (stat.c, plat_idx_to_val): below 2 * 2**BITS a bin is
    one ns wide; above, each group of 2**BITS bins doubles the width, and a bin stands for its middle."""
    if index < 2 << PLAT_BITS:
        return float(index)
    error_bits = (index >> PLAT_BITS) - 1
    base = 1 << (error_bits + PLAT_BITS)
    return base + ((index % (1 << PLAT_BITS)) + 0.5) * (1 << error_bits)


def hist_log(text):
    """A fio clat_hist log (log_hist_msec, log_hist_coarseness 0): for each direction, the IOs that completed
    in each bin, summed over every interval (each line holds the interval's IOs, not a running total):
    {direction: [count per bin]}."""
    sums = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            fields = [int(f) for f in line.split(",")]
        except ValueError as exc:
            raise SsdbenchError(f"fio histogram log line {n} is not whole numbers: {line[:80]!r}") from exc
        if len(fields) != 3 + PLAT_BINS:
            raise SsdbenchError(
                f"fio histogram log line {n} has {len(fields) - 3} bins, not fio's {PLAT_BINS} "
                "(log_hist_coarseness must be 0)"
            )
        into = sums.setdefault(fields[1], [0] * PLAT_BINS)
        for i, count in enumerate(fields[3:]):
            into[i] += count
    return sums


@dataclass(frozen=True)
class Issue:
    t_us: int  # microseconds from the job's start, when fio queued the IO
    op: str  # read or write
    offset: int
    length: int


def fio_iolog(text):
    """The read and write actions of an iolog fio wrote (write_iolog, version 3 with timestamps)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "fio version 3 iolog":
        raise SsdbenchError("not a fio version 3 iolog (its first line must be 'fio version 3 iolog')")
    issues = []
    for n, line in enumerate(lines[1:], 2):
        fields = line.split()
        if len(fields) == 5 and fields[2] in ("read", "write"):
            try:
                issues.append(Issue(int(fields[0]), fields[2], int(fields[3]), int(fields[4])))
            except ValueError as exc:
                raise SsdbenchError(f"iolog line {n} is not 'time file action offset length': {line!r}") from exc
    return issues


def progress_between(prev, cur):
    """Current IOPS and bytes/s between two --status-interval documents (they are cumulative)."""
    dt = (cur["timestamp_ms"] - prev["timestamp_ms"]) / 1000.0
    if dt <= 0:
        return 0.0, 0.0

    def totals(doc):
        ios = sum(job[d]["total_ios"] for job in doc["jobs"] for d in DIRECTIONS if d in job)
        nbytes = sum(job[d]["io_bytes"] for job in doc["jobs"] for d in DIRECTIONS if d in job)
        return ios, nbytes

    ios0, b0 = totals(prev)
    ios1, b1 = totals(cur)
    return (ios1 - ios0) / dt, (b1 - b0) / dt
