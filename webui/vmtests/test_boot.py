"""make test-boot: the release stick's layout, booted as a PC boots it.

build/boot/stick.img is made by the release's own board/ssdbench/post-image.sh, genimage.cfg and grub.cfg, from
stand-ins for what Buildroot builds (board/boottest/build-stick.sh): the VM image's Debian kernel and its initrd,
which holds the whole root file system, and Debian's GRUB. Each boot test boots a copy of the stick in QEMU
through a PC's firmware, SeaBIOS or OVMF, then GRUB and its menu's default entry (the kernel and the initrd read
from the stick), to the web UI, and checks that the system came up the way the stick means it to: through that
firmware, by that entry, with its results on the stick's SSDB-DATA. The serial consoles go to
webui/tests/artifacts/boot-console-*.log.

The stick is the second disk, as on a PC whose firmware numbers its own disk first: a SATA disk comes before it.
With BIOS, that disk's boot loader starts the stick's (GRUB's chainloader, from the disk's own MBR), handing it
the drive number 0x81, as a BIOS that numbers the stick second does: the stick's GRUB must find its files on the
drive it was started from, not on the first disk. With UEFI, the firmware finds no boot loader on the SATA disk
and goes on to the stick.
"""

import os
import re
import subprocess

import pytest
from vm import VM

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BOOT_DIR = os.path.join(TOP, "build", "boot")
STICK = os.path.join(BOOT_DIR, "stick.img")
QEMU_SH = os.path.join(TOP, "board", "boottest", "qemu.sh")
GRUB_CFG = os.path.join(TOP, "board", "ssdbench", "grub.cfg")
ARTIFACTS = os.path.join(TOP, "webui", "tests", "artifacts")

pytestmark = pytest.mark.skipif(not os.path.exists(STICK), reason="no boot test stick: make test-boot builds it")


def default_entry(stick_uuid):
    """The kernel command line of grub.cfg's default menu entry, with the UUID GRUB finds for the stick's
    SSDBENCH partition."""
    with open(GRUB_CFG) as f:
        text = f.read()
    default = int(re.search(r'^set default="(\d+)"$', text, re.M).group(1))
    return re.findall(r"^\s*linux /bzImage (.*)$", text, re.M)[default].replace("$stick", stick_uuid)


def first_disk(folder):
    """A SATA disk for the first place: in its MBR and the sectors after it, Debian's GRUB for BIOS, made to
    start the second disk's boot code (chainloader) with that disk's drive number. QEMU options that attach it."""
    img = os.path.join(folder, "first.img")
    cfg = os.path.join(folder, "chain.cfg")
    with open(cfg, "w") as f:
        f.write("serial --unit=0 --speed=115200\nterminal_output serial\n")
        f.write("echo 'first disk: starting the second disk'\nset root=(hd1)\nchainloader +1\nboot\n")
    core = os.path.join(folder, "chain.img")
    subprocess.run(
        ["grub-mkimage", "-O", "i386-pc", "-o", core, "-c", cfg, "-p", "/", "biosdisk", "chain", "echo"]
        + ["serial", "terminal"],
        check=True,
    )
    subprocess.run(["truncate", "-s", "64M", img], check=True)
    # boot.img loads the core from sector 1, as post-image.sh lays out the stick.
    subprocess.run(["dd", "if=/usr/lib/grub/i386-pc/boot.img", f"of={img}", "conv=notrunc", "status=none"], check=True)
    subprocess.run(["dd", f"if={core}", f"of={img}", "bs=512", "seek=1", "conv=notrunc", "status=none"], check=True)
    return [
        "-device",
        "ahci,id=ahci",
        "-drive",
        f"if=none,id=first,file={img},format=raw",
        "-device",
        "ide-hd,bus=ahci.0,drive=first,bootindex=0",
    ]


@pytest.mark.parametrize("firmware", ["bios", "uefi"])
def test_the_stick_boots_to_the_web_ui_as_the_second_disk(firmware, tmp_path):
    stick = str(tmp_path / "stick.img")
    subprocess.run(["cp", "--sparse=always", STICK, stick], check=True)
    uuid = subprocess.run(
        ["blkid", "-p", "-O", str(1024 * 1024), "-o", "value", "-s", "UUID", stick],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    os.makedirs(ARTIFACTS, exist_ok=True)
    log = os.path.join(ARTIFACTS, f"boot-console-{firmware}.log")
    if os.path.exists(log):
        os.unlink(log)
    second = {"SSDBENCH_STICK_BOOTINDEX": "1"}
    vm = VM([QEMU_SH, firmware, stick, *first_disk(str(tmp_path))], str(tmp_path), log, second)
    try:
        ui_s = vm.wait_for_ui()
        print(f"\n{firmware}: the web UI answered {ui_s:.1f} s after QEMU's start")
        console = vm.console_text()
        assert ("first disk: starting the second disk" in console) == (firmware == "bios")
        # loglevel=4: the kernel does not echo its command line, where a tester's PIN and lab token go.
        assert "command line" not in console.lower(), "the kernel echoed its command line on the console"
        assert vm.shell("test -d /sys/firmware/efi && echo uefi || echo bios") == firmware
        # GRUB named the partition it booted from, the stick's SSDBENCH, on the kernel line.
        assert vm.shell("cat /proc/cmdline") == f"BOOT_IMAGE=/bzImage {default_entry(uuid)}"
        # The stick found by that partition: the USB disk, whichever name the kernel gave it (the SATA disk's
        # controller usually answers first, but on a busy host the USB disk can be sda), its SSDB-DATA holding the
        # results.
        disk = vm.shell("cat /run/ssdbench/boot-disk")
        # (A short answer: a long one over the emulated serial port may be lost on a busy host.)
        assert disk in ("sda", "sdb") and vm.shell(f"readlink -f /sys/block/{disk} | grep -c /usb") == "1", disk
        mount = vm.shell("grep ' /var/lib/ssdbench ' /proc/mounts").split()
        assert mount[:3] == [f"/dev/{disk}2", "/var/lib/ssdbench", "ext4"], mount
        vm.poweroff()
    finally:
        vm.close()
    # The release's SSDBENCH holds the settings file's template (genimage.cfg), which set nothing, and the logs
    # that the log keeper mirrored there, with its diagnostics zip as it stopped: any PC reads them.
    fat = f"{stick}@@{1024 * 1024}"
    assert fat_text(fat, "::ssdbench.conf") == open(os.path.join(TOP, "board", "ssdbench", "ssdbench.conf")).read()
    assert "settings: the defaults" in fat_text(fat, "::ssdbench-logs/boot.log")
    assert ".zip" in fat_text(fat, "::ssdbench-logs", tool="mdir")


def fat_text(fat, path, tool="mtype"):
    """A file of the stick's FAT partition as text, or its folder's listing, read with mtools from the host."""
    env = {**os.environ, "MTOOLS_SKIP_CHECK": "1"}
    return subprocess.run([tool, "-i", fat, path], check=True, capture_output=True, text=True, env=env).stdout
