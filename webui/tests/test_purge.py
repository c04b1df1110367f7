"""Purge on a real loop device: each chain falls back, and says why the stronger methods were not used."""

from conftest import needs_root

from ssdbench.drives import purge

pytestmark = needs_root()


def test_purge_falls_back_through_the_nvme_and_sata_chains(loopdev):
    dev, _ = loopdev()
    nvme = {
        "path": dev,
        "transport": "nvme",
        "trim_supported": True,
        "erase": {"format": False, "sanitize_block_erase": False},
    }
    detail = purge.purge(nvme)
    assert [a["outcome"] for a in detail["attempts"]] == ["not available", "not available", "used"]
    assert detail["method"] == "NVMe deallocate (whole namespace)"
    # A loop device has no ATA security feature set: why is kept, and TRIM is used instead.
    sata = {"path": dev, "transport": "sata", "trim_supported": True}
    detail = purge.purge(sata)
    first = detail["attempts"][0]
    assert first["method"] == "ATA Security Erase" and first["outcome"] in ("failed", "not available")
    assert first["reason"]
    assert detail["method"] == "ATA TRIM (whole device)"


def test_whole_controller_methods_are_refused_while_another_namespace_is_in_use(loopdev):
    dev, _ = loopdev()
    busy = ["nvme0n2: /dev/nvme0n2 on /srv"]
    nvme = {
        "path": dev,
        "transport": "nvme",
        "trim_supported": True,
        "erase": {"format": True, "format_all_namespaces": True, "sanitize_block_erase": True},
    }
    detail = purge.purge(nvme, busy=busy)
    assert detail["method"] == "NVMe deallocate (whole namespace)"
    format_, sanitize = detail["attempts"][:2]
    assert format_["outcome"] == sanitize["outcome"] == "not available"
    assert "formats every namespace at once, and another is in use (nvme0n2: /dev/nvme0n2 on /srv)" in format_["reason"]
    assert "Sanitize erases every namespace" in sanitize["reason"] and "nvme0n2" in sanitize["reason"]


def test_behind_a_sas_hba_the_purge_says_what_the_hba_did_not_pass(loopdev):
    dev, _ = loopdev()
    # A loop device answers no ATA command, as an HBA that passes none through its SCSI/ATA translation.
    sata = {"path": dev, "transport": "sata", "trim_supported": True, "hba": {"driver": "megaraid_sas"}}
    detail = purge.purge(sata)
    first = detail["attempts"][0]
    assert first["outcome"] == "not available" and first["reason"].startswith(
        "the HBA (megaraid_sas) passes no ATA command through its SCSI/ATA translation"
    )
    assert detail["method"] == "ATA TRIM (whole device)" and detail["method"] not in purge.ERASES


def test_a_sas_drive_falls_back_from_sanitize_and_format_unit_to_unmap(loopdev):
    dev, _ = loopdev()
    # A loop device takes neither SANITIZE nor FORMAT UNIT: sg3_utils' own errors are kept, and UNMAP is used.
    detail = purge.purge({"path": dev, "transport": "sas", "trim_supported": True})
    assert [(a["method"], a["outcome"]) for a in detail["attempts"]] == [
        ("SCSI Sanitize, block erase", "failed"),
        ("SCSI Format Unit", "failed"),
        ("SCSI UNMAP (whole device)", "used"),
    ]
    sanitize, format_unit = detail["attempts"][:2]
    assert "sg_sanitize --block --quick" in sanitize["reason"] and "sg_format --format --quick" in format_unit["reason"]
    assert "SCSI Sanitize, block erase" in purge.ERASES and "SCSI Format Unit" in purge.ERASES
