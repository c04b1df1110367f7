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
