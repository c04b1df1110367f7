"""The drive tools' output parsed: nvme-cli, smartctl, hdparm, lsblk and blkid, as captured from real drives."""

import json

import pytest
from conftest import data

from ssdbench.drives import tool_output
from ssdbench.errors import SsdbenchError


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
