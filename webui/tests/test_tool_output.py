"""The drive tools' output parsed: nvme-cli, smartctl, hdparm, lsblk and blkid, as captured from real drives."""

import json
import os

import pytest
from conftest import DATA, data

from ssdbench.drives import health, tool_output
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
    # SAT passthrough forced on a bridge that carries no ATA command: no identity, so the bridge's only.
    assert tool_output.smartctl(data("smartctl-usb-sat.json"))["model"] is None


def test_ata_identity_from_the_vpd_page_the_kernel_hands_out():
    with open(os.path.join(DATA, "vpd-pg89-sata.bin"), "rb") as f:
        page = f.read()
    ids = tool_output.vpd_ata_information(page)
    assert ids == {"model": "SSDB-SATA-MODEL", "serial": "SSDB-SATA-0001", "firmware": "2.5+"}
    assert tool_output.vpd_ata_information(page[:200]) is None  # cut short: not an IDENTIFY
    assert tool_output.vpd_ata_information(page[:1] + b"\x80" + page[2:]) is None  # another page


# Each fixture is QEMU's SATA disk with attribute 4 (raw value 100) given a vendor's name by `smartctl -v`,
# as smartctl's drive database names it for that vendor's drives.
@pytest.mark.parametrize(
    "fixture, name, unit, unit_bytes",
    [
        ("smartctl-sata-x-lbas.json", "Total_LBAs_Written", "logical blocks of 512 B", 512),
        ("smartctl-sata-x-32mib.json", "Host_Writes_32MiB", "32 MiB", 32 * 2**20),
        ("smartctl-sata-x-mib.json", "Host_Writes_MiB", "MiB", 2**20),
        ("smartctl-sata-x-gib.json", "Lifetime_Writes_GiB", "GiB", 2**30),
        ("smartctl-sata-x-gb.json", "Total_Writes_GB", "GB", 10**9),
    ],
)
def test_sata_host_writes_take_their_unit_from_the_attribute_name(fixture, name, unit, unit_bytes):
    sata = tool_output.smartctl(data(fixture))
    assert sata["host_writes"] == {"attribute": 4, "name": name, "raw": 100, "unit": unit, "bytes": 100 * unit_bytes}
    assert sata["host_bytes_written"] == 100 * unit_bytes


@pytest.mark.parametrize(
    "fixture, name",
    [("smartctl-sata-x-nounit.json", "Host_Writes"), ("smartctl-sata-x-nounit2.json", "Total_Host_Writes")],
)
def test_sata_host_writes_whose_name_has_no_unit_stay_raw(fixture, name):
    sata = tool_output.smartctl(data(fixture))
    assert sata["host_writes"] == {"attribute": 4, "name": name, "raw": 100, "unit": "unit unknown", "bytes": None}
    assert sata["host_bytes_written"] is None


def test_sata_nand_writes_are_not_host_writes():
    # Attribute 4 is NAND_Writes_1GiB (raw 100), 9 is Host_Writes_GiB (raw 1).
    sata = tool_output.smartctl(data("smartctl-sata-x-nand.json"))
    assert (sata["host_writes"]["name"], sata["host_bytes_written"]) == ("Host_Writes_GiB", 2**30)


def test_sata_host_writes_in_a_known_unit_win_over_one_without():
    # Attribute 4 is Lifetime_Writes (raw 100, no unit), 9 is Total_LBAs_Written (raw 1).
    sata = tool_output.smartctl(data("smartctl-sata-x-two.json"))
    assert (sata["host_writes"]["attribute"], sata["host_bytes_written"]) == (9, 512)


def test_sata_without_a_host_writes_attribute_has_no_counter():
    for fixture in ("smartctl-sata.json", "smartctl-sata-x.json"):
        sata = tool_output.smartctl(data(fixture))
        assert sata["host_writes"] is None and sata["host_bytes_written"] is None


def test_nvme_host_writes_count_data_units_of_512000_bytes():
    # Captured after the host wrote 64 MiB: QEMU rounds the 131072 sectors up to 132 thousands.
    log = tool_output.nvme_smart_log(data("nvme-smart-log-64mib.json"))
    smart = tool_output.smartctl(data("smartctl-nvme-x-64mib.json"))
    expected = {
        "attribute": "data_units_written",
        "name": "Data Units Written",
        "raw": 132,
        "unit": "data units of 512000 B",
        "bytes": 132 * 512000,
    }
    assert log["host_writes"] == smart["host_writes"] == expected
    assert log["host_bytes_written"] == smart["host_bytes_written"] == 132 * 512000


def test_written_between_snapshots():
    before = health.from_log("nvme smart-log", tool_output.nvme_smart_log(data("nvme-smart-log.json")))
    after = health.from_log("nvme smart-log", tool_output.nvme_smart_log(data("nvme-smart-log-64mib.json")))
    assert after["host_writes"]["raw"] == 132 and after["log"]["data_units_written"] == "132"
    assert 64 * 2**20 <= health.written_between(before, after) < 64 * 2**20 + 512000


def test_written_between_is_unknown_when_a_side_has_no_unit():
    known = health.from_log("smartctl -x", tool_output.smartctl(data("smartctl-sata-x-gib.json")))
    unknown = health.from_log("smartctl -x", tool_output.smartctl(data("smartctl-sata-x-nounit.json")))
    assert unknown["host_writes"]["unit"] == "unit unknown"
    assert health.written_between(known, known) == 0
    assert health.written_between(known, unknown) is None and health.written_between(unknown, known) is None
    assert health.written_between(unknown, unknown) is None


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


def test_sas_identity_from_inquiry_and_the_unit_serial_number_page():
    """QEMU's scsi-hd behind its megasas HBA (tests/data/README.md)."""
    ids = tool_output.sg_inq(data("sg_inq-sas.txt"))
    assert ids == {"vendor": "SSDB", "product": "SAS-SSD-400G", "revision": "2.5+", "serial": "SSDB-SAS-0001"}
    with pytest.raises(SsdbenchError, match="sg_inq printed no INQUIRY data"):
        tool_output.sg_inq("sg_inq failed: Invalid argument\n")
    with open(os.path.join(DATA, "vpd-pg80-sas.bin"), "rb") as f:
        page = f.read()
    assert tool_output.vpd_unit_serial(page) == "SSDB-SAS-0001"
    assert tool_output.vpd_unit_serial(page[:1] + b"\x89" + page[2:]) is None  # another page
    # smartctl reads the same SCSI identity, and no temperature: QEMU's disk has no Temperature log page.
    smart = tool_output.smartctl(data("smartctl-sas.json"))
    assert (smart["protocol"], smart["serial"], smart["temperature_c"]) == ("SCSI", "SSDB-SAS-0001", None)


def test_ata_commands_to_a_disk_that_takes_none_give_no_identity():
    """What a SATA drive behind an HBA that passes no ATA command looks like: smartctl -d sat and hdparm -I
    (through SG_IO) on QEMU's SCSI disk answer, and say nothing of a drive."""
    assert tool_output.smartctl(data("smartctl-sas-sat.json"))["model"] is None
    ident = tool_output.hdparm_identify(data("hdparm-I-sas.txt"))
    assert ident["model"] is None and ident["security_supported"] is None
