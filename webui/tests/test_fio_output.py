"""fio's output parsed: captured JSON documents (plain, with notes, with status intervals) and logs."""

import json

import pytest
from conftest import data

from ssdbench.errors import SsdbenchError
from ssdbench.run import fio_output


def test_fio_plain_json_metrics_point_at_their_fields():
    text = data("fio-3.33-randrw.json")
    doc = fio_output.fio_result(text)
    metrics = {m.name: m for m in fio_output.fio_metrics(doc)}
    assert metrics["read.iops"].value == doc["jobs"][0]["read"]["iops"]
    assert metrics["write.lat_max"].value == doc["jobs"][0]["write"]["lat_ns"]["max"]
    assert "trim.iops" not in metrics  # no trim I/O was done
    for m in metrics.values():
        assert fio_output.source_value(json.loads(text), m.source) == pytest.approx(m.value, rel=0, abs=0)


def test_every_latency_figure_is_total_latency():
    # Captured with the suites' lat_percentiles=1 and clat_percentiles=0.
    doc = fio_output.fio_result(data("fio-3.33-randrw-lat.json"))
    metrics = {m.name: m for m in fio_output.fio_metrics(doc)}
    for d in ("read", "write"):
        assert metrics[f"{d}.lat_p99.99"].source == f"/jobs/0/{d}/lat_ns/percentile/99.990000"
        assert metrics[f"{d}.lat_max"].source == f"/jobs/0/{d}/lat_ns/max"
        assert metrics[f"{d}.lat_p50"].value <= metrics[f"{d}.lat_p99.99"].value
    assert not [name for name in metrics if "clat" in name]
    # An output with completion-latency percentiles only (fio's default) gives no percentile at all,
    # rather than figures of another basis beside the total-latency mean and max.
    plain = {m.name for m in fio_output.fio_metrics(fio_output.fio_result(data("fio-3.33-randrw.json")))}
    assert "read.lat_mean" in plain and not [name for name in plain if "_p9" in name or "_p50" in name]


def test_fio_note_before_json_is_skipped():
    text = data("fio-3.33-note-before-json.txt")
    assert text.startswith("note:")
    doc = fio_output.fio_result(text)
    assert doc["jobs"][0]["jobname"] == "note"


def test_fio_status_interval_documents_are_all_read():
    text = data("fio-3.33-status-interval.json")
    docs = fio_output.fio_documents(text)
    assert len(docs) == text.count('"fio version"') >= 3
    ios = [d["jobs"][0]["write"]["total_ios"] for d in docs]
    assert ios == sorted(ios)  # cumulative
    iops, bw = fio_output.progress_between(docs[0], docs[1])
    dt = (docs[1]["timestamp_ms"] - docs[0]["timestamp_ms"]) / 1000
    w0, w1 = docs[0]["jobs"][0]["write"], docs[1]["jobs"][0]["write"]
    assert iops == (w1["total_ios"] - w0["total_ios"]) / dt > 0
    assert bw == (w1["io_bytes"] - w0["io_bytes"]) / dt


def test_fio_stream_stops_at_a_half_written_document():
    text = data("fio-3.33-status-interval.json")
    docs, used = fio_output.fio_stream(text[: len(text) // 2])
    assert docs and used < len(text) // 2
    rest, _ = fio_output.fio_stream(text[used:])
    assert len(docs) + len(rest) == len(fio_output.fio_documents(text))


def test_fio_without_json_is_a_clear_error():
    with pytest.raises(SsdbenchError, match="no JSON"):
        fio_output.fio_result("fio: failed to open /dev/nope\n")


def test_fio_log_rows():
    samples = fio_output.fio_log(data("fio-3.33-randrw_iops.1.log"))
    assert {s.direction for s in samples} == {0, 1}
    assert all(s.bs == 0 or s.bs == 4096 for s in samples)
    with pytest.raises(SsdbenchError, match="line 1"):
        fio_output.fio_log("garbage\n")


def test_a_latency_histogram_log_sums_its_intervals_into_fios_bins():
    """fio 3.33's clat_hist log of the captured randrw job: each line one interval's IOs per bin."""
    text = data("fio-3.33-randrw_clat_hist.1.log")
    sums = fio_output.hist_log(text)
    lines = [[int(f) for f in line.split(",")] for line in text.splitlines() if line.strip()]
    for direction, counts in sums.items():
        assert sum(counts) == sum(sum(line[3:]) for line in lines if line[1] == direction)
    doc = fio_output.fio_result(data("fio-3.33-randrw.json"))
    # fio reports each percentile as its bin's value: every one of them is a value plat_value gives a bin
    values = {fio_output.plat_value(i) for i in range(fio_output.PLAT_BINS)}
    for direction in ("read", "write"):
        percentiles = doc["jobs"][0][direction]["clat_ns"]["percentile"].values()
        assert set(percentiles) <= values
        assert sum(sums[fio_output.DIRECTIONS.index(direction)]) <= doc["jobs"][0][direction]["total_ios"]


def test_a_histogram_log_of_other_bins_is_refused_with_its_line():
    with pytest.raises(SsdbenchError, match="line 1 has 3 bins"):
        fio_output.hist_log("1000, 0, 4096, 1, 2, 3\n")
