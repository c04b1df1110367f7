"""Drive verdicts: on the lsblk tree captured in QEMU, and on real loop devices."""

import json
import os
import subprocess
import time

import pytest
from conftest import DATA, data, needs_root, ssdbench

from ssdbench.drives import discovery, tool_output

NO_BOOT = discovery.NO_BOOT


def node(name):
    return next(n for n in tool_output.lsblk(data("lsblk.json")) if n["name"] == name)


def base(n):
    return {
        "name": n["name"],
        "transport": n["tran"],
        "capacity_bytes": n["size"],
        "mounts": discovery.mounts(n),
        "partitions": [c["name"] for c in n.get("children", [])],
        "signatures": [],
    }


def test_verdicts_on_the_drives_qemu_emulates():
    nvme, sata, usb = node("nvme0n1"), node("sda"), node("sdb")
    assert discovery.verdict(base(nvme), nvme, False, False, set(), NO_BOOT)["eligible"]
    assert discovery.verdict(base(sata), sata, False, False, set(), NO_BOOT)["reason"] == "empty SATA drive"
    v = discovery.verdict(base(usb), usb, False, True, set(), NO_BOOT)
    assert not v["eligible"] and "mounted file systems (/dev/sdb1 on /mnt/usb)" in v["reason"]
    usb_unmounted = {**base(usb), "mounts": []}
    v = discovery.verdict(usb_unmounted, usb, False, False, set(), NO_BOOT)
    assert not v["eligible"] and "USB-attached" in v["reason"]
    v = discovery.verdict(usb_unmounted, usb, False, True, set(), NO_BOOT)
    assert v["eligible"] and v["needs_wipe_confirmation"] and "partition sdb1" in v["reason"]
    booted_from_nvme = discovery.Boot(frozenset({"nvme0n1"}))
    assert "boot stick" in discovery.verdict(base(nvme), nvme, False, False, set(), booted_from_nvme)["reason"]
    assert "running system" in discovery.verdict(base(sata), sata, False, False, {"sda"}, NO_BOOT)["reason"]


def test_the_stick_is_the_disk_holding_the_partition_grub_booted_from():
    image = [(None, None), ("SSDBENCH", "531A-305D"), ("SSDB-DATA", "0b6d3f8e-8c5a-4c1e-9a43-1f5e0f3c2a10")]
    old_image = [(None, None), ("SSDBENCH", "1C2E-77F0"), ("SSDB-DATA", "5a1b0c9d-2e3f-4a5b-8c7d-6e5f4a3b2c1d")]
    booted = discovery.Boot(frozenset({"sdb"}), "531A-305D")
    assert discovery.is_boot_stick("sdb", image, booted)
    # A test SSD that once had an image written to it is a drive like any other.
    assert not discovery.is_boot_stick("sda", old_image, booted)
    # A copy of the very image that booted holds the partition too: kept out, whichever disk S30stick took.
    assert discovery.is_boot_stick("nvme0n1", image, booted)
    # Booted without the stick's GRUB (no UUID known): an ssdbench image's labels are enough to keep a disk out.
    assert discovery.is_boot_stick("sda", old_image, NO_BOOT)
    assert not discovery.is_boot_stick("sda", [(None, None), ("DATA", "AAAA-BBBB")], NO_BOOT)


def test_the_boot_flow_names_the_stick(tmp_path, monkeypatch):
    cmdline, disks = tmp_path / "cmdline", tmp_path / "boot-disk"
    # blkid and lsblk write a FAT UUID in upper case; one typed on the kernel line may be in lower case.
    cmdline.write_text("BOOT_IMAGE=/bzImage console=tty1 ssdbench.stick=531a-305d loglevel=4\n")
    disks.write_text("sdb\nsdc\n")
    monkeypatch.setattr(discovery, "CMDLINE", str(cmdline))
    monkeypatch.setattr(discovery, "BOOT_DISK_FILE", str(disks))
    assert discovery.boot_stick() == discovery.Boot(frozenset({"sdb", "sdc"}), "531A-305D")
    cmdline.write_text("BOOT_IMAGE=/bzImage ssdbench.stick= loglevel=4\n")
    disks.unlink()
    assert discovery.boot_stick() == discovery.Boot()


@needs_root()
def test_loop_devices_only_when_named(loopdev):
    dev, _ = loopdev("64M")
    listed = json.loads(ssdbench("drives", "--json", check=True).stdout)
    assert dev not in [d["path"] for d in listed]
    named = json.loads(ssdbench("drives", "--json", dev, check=True).stdout)
    assert len(named) == 1
    assert named[0]["eligible"] and named[0]["development_target"]
    assert named[0]["confirm_id"] == os.path.basename(dev)


@needs_root()
def test_signatures_need_destroy_data_and_mounts_are_refused(loopdev, tmp_path):
    dev, _ = loopdev("64M")
    subprocess.run(["mkfs.ext4", "-q", dev], check=True)
    d = discovery.find(dev)
    assert d["eligible"] and d["needs_wipe_confirmation"] and "ext4 signature" in d["reason"]
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", dev, str(mnt)], check=True)
    try:
        d = discovery.find(dev)
        assert not d["eligible"] and f"on {mnt}" in d["reason"]
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@needs_root()
def test_io_ticks_is_the_kernels_busy_time_of_the_device_or_none_when_it_counts_none(loopdev):
    dev, _ = loopdev("64M")
    name = os.path.basename(dev)
    stat, before = discovery.io_ticks(dev)
    assert stat == f"/sys/class/block/{name}/stat"
    started = time.monotonic()
    read = ["dd", f"if={dev}", "of=/dev/null", "bs=4k", "count=4096", "iflag=direct"]
    subprocess.run(read, check=True, capture_output=True)
    elapsed_ms = (time.monotonic() - started) * 1000
    # Busy while dd read, never longer than dd took (give or take the kernel's tick, at most 10 ms).
    assert 0 < discovery.io_ticks(dev)[1] - before <= elapsed_ms + 10
    iostats = f"/sys/block/{name}/queue/iostats"
    with open(iostats, "w") as f:
        f.write("0")
    try:
        assert discovery.io_ticks(dev) is None
    finally:
        with open(iostats, "w") as f:
            f.write("1")
    assert discovery.io_ticks("/dev/does-not-exist") is None


def test_unknown_drive_is_a_clear_error():
    proc = ssdbench("drives", "/dev/does-not-exist")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "ssdbench: error: unknown drive /dev/does-not-exist: no such device"
    assert "Traceback" not in proc.stderr


@pytest.mark.skipif(not os.path.exists("/dev/vda"), reason="the host's system disk is /dev/vda here")
def test_system_disk_is_never_eligible():
    system = [d for d in discovery.discover() if d["name"] == "vda"]
    assert system and not system[0]["eligible"]


def test_a_disk_behind_a_sas_hba_is_a_sata_drive_when_it_speaks_ata_else_a_sas_drive():
    with open(os.path.join(DATA, "vpd-pg89-sata.bin"), "rb") as f:
        pg89 = f.read()
    # mpt3sas and smartpqi: lsblk says sas for every disk, SATA drives too; their SAT answers INQUIRY with "ATA".
    assert discovery.hba_transport("sas", "mpt3sas", data("vendor-sata.txt"), pg89) == "sata"
    assert discovery.hba_transport("sas", "smartpqi", data("vendor-sata.txt"), None) == "sata"
    assert discovery.hba_transport("sas", "mpt3sas", "SEAGATE ", None) == "sas"
    # megaraid_sas's JBOD: no transport; the disk's own answers say what it is (QEMU's megasas and scsi-hd).
    (jbod,) = tool_output.lsblk(data("lsblk-megasas.json"))[:1]
    assert discovery.hba_transport(jbod["tran"], "megaraid_sas", data("vendor-sas.txt"), None) == "sas"
    assert discovery.hba_transport(None, "megaraid_sas", "ATA", pg89) == "sata"
    # A SCSI disk on no SAS HBA (virtio-scsi), and disks lsblk knows the transport of, are not the HBA's.
    assert discovery.hba_transport(None, "virtio-pci", data("vendor-sas.txt"), None) is None
    assert discovery.hba_transport("sata", "ahci", "ATA", pg89) is None


def test_a_scsi_disk_on_no_sas_hba_is_refused_in_words_and_a_sas_drive_is_tested():
    sata = node("sda")
    scsi = {**base(sata), "transport": "scsi"}
    v = discovery.verdict(scsi, sata, False, False, set(), NO_BOOT)
    assert not v["eligible"] and v["reason"].startswith("a SCSI disk on no SAS HBA")
    sas = {**base(sata), "transport": "sas"}
    assert discovery.verdict(sas, sata, False, False, set(), NO_BOOT)["reason"] == "empty SAS drive"
