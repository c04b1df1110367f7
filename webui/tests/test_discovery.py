"""Drive verdicts: on the lsblk tree captured in QEMU, and on real loop devices."""

import json
import os
import subprocess
import time

import pytest
from conftest import data, needs_root, ssdbench

from ssdbench.drives import discovery, tool_output


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
    assert discovery.verdict(base(nvme), nvme, False, False, set(), None)["eligible"]
    assert discovery.verdict(base(sata), sata, False, False, set(), None)["reason"] == "empty SATA drive"
    v = discovery.verdict(base(usb), usb, False, True, set(), None)
    assert not v["eligible"] and "mounted file systems (/dev/sdb1 on /mnt/usb)" in v["reason"]
    usb_unmounted = {**base(usb), "mounts": []}
    v = discovery.verdict(usb_unmounted, usb, False, False, set(), None)
    assert not v["eligible"] and "USB-attached" in v["reason"]
    v = discovery.verdict(usb_unmounted, usb, False, True, set(), None)
    assert v["eligible"] and v["needs_wipe_confirmation"] and "partition sdb1" in v["reason"]
    assert "boot stick" in discovery.verdict(base(nvme), nvme, False, False, set(), "nvme0n1")["reason"]
    assert "running system" in discovery.verdict(base(sata), sata, False, False, {"sda"}, None)["reason"]


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
