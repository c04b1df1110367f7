"""Parsers against outputs captured from the real tools (see data/README.md)."""

import json

import pytest
from conftest import data

from ssdbench.drives import tool_output
from ssdbench.errors import SsdbenchError
from ssdbench.run import fio_output


def test_fio_plain_json_metrics_point_at_their_fields():
    text = data("fio-3.33-randrw.json")
    doc = fio_output.fio_result(text)
    metrics = {m.name: m for m in fio_output.fio_metrics(doc)}
    assert metrics["read.iops"].value == doc["jobs"][0]["read"]["iops"]
    assert metrics["write.lat_max"].value == doc["jobs"][0]["write"]["lat_ns"]["max"]
    assert metrics["read.clat_p99.99"].source == "/jobs/0/read/clat_ns/percentile/99.990000"
    assert "trim.iops" not in metrics  # no trim I/O was done
    for m in metrics.values():
        assert fio_output.source_value(json.loads(text), m.source) == pytest.approx(m.value, rel=0, abs=0)


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


def test_nvme_id_ctrl_and_smart_log():
    ids = tool_output.nvme_id_ctrl(data("nvme-id-ctrl.json"))
    assert (ids["model"], ids["serial"], ids["firmware"]) == ("QEMU NVMe Ctrl", "SSDB-NVME-0001", "7.2.22")
    assert ids["format_supported"] is True and ids["sanitize_supported"] is False
    assert ids["warning_temp_k"] == 343
    smart = tool_output.nvme_smart_log(data("nvme-smart-log.json"))
    assert smart["temperature_c"] == json.loads(data("nvme-smart-log.json"))["temperature"] - 273
    assert tool_output.nvme_list(data("nvme-list.json"))[0]["SerialNumber"] == "SSDB-NVME-0001"


def test_smartctl_sata_nvme_and_unknown_usb_bridge():
    sata = tool_output.smartctl(data("smartctl-sata.json"))
    assert (sata["model"], sata["serial"], sata["capacity_bytes"]) == ("SSDB-SATA-MODEL", "SSDB-SATA-0001", 1073741824)
    assert sata["temperature_c"] == 31
    nvme = tool_output.smartctl(data("smartctl-nvme.json"))
    assert nvme["protocol"] == "NVMe" and nvme["host_bytes_written"] == 0
    usb = tool_output.smartctl(data("smartctl-usb.json"))
    assert usb["model"] is None and "Unknown USB bridge" in usb["messages"][0]


def test_hdparm_identify():
    ident = tool_output.hdparm_identify(data("hdparm-I-sata.txt"))
    assert (ident["model"], ident["serial"], ident["firmware"]) == ("SSDB-SATA-MODEL", "SSDB-SATA-0001", "2.5+")
    assert ident["sectors"] == 2097152 and ident["logical_block_size"] == 512
    # QEMU's ATA disk has no security feature set and does not advertise TRIM in IDENTIFY.
    assert ident["security_supported"] is None and ident["trim_supported"] is False


def test_lsblk_tree():
    tree = tool_output.lsblk(data("lsblk.json"))
    by_name = {n["name"]: n for n in tree}
    assert by_name["sda"]["tran"] == "sata" and by_name["nvme0n1"]["tran"] == "nvme"
    assert by_name["sdb"]["children"][0]["mountpoints"] == ["/mnt/usb"]


def test_bad_tool_json_is_a_clear_error():
    with pytest.raises(SsdbenchError, match="smartctl did not print valid JSON"):
        tool_output.smartctl("not json")


def test_blkid_export_names_the_file_system_and_label():
    found = tool_output.blkid(data("blkid-vfat.txt"))
    assert found["TYPE"] == "vfat" and found["LABEL"] == "RESULTS" and found["DEVNAME"].startswith("/dev/loop")
    assert tool_output.blkid("") == {}
