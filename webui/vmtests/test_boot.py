"""make test-boot: the release stick's layout, booted as a PC boots it.

build/boot/stick.img is made by the release's own board/ssdbench/post-image.sh, genimage.cfg and grub.cfg, from
stand-ins for what Buildroot builds (board/boottest/build-stick.sh): the VM image's Debian kernel and its initrd,
which holds the whole root file system, and Debian's GRUB. Each boot test boots a copy of the stick in QEMU
through a PC's firmware, SeaBIOS or OVMF, then GRUB and its menu's default entry (the kernel and the initrd read
from the stick), to the web UI, and checks that the system came up the way the stick means it to: through that
firmware, by that entry, with its results on the stick's SSDB-DATA. The serial consoles go to
webui/tests/artifacts/boot-console-*.log.
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


def default_entry():
    """The kernel command line of grub.cfg's default menu entry."""
    with open(GRUB_CFG) as f:
        text = f.read()
    default = int(re.search(r'^set default="(\d+)"$', text, re.M).group(1))
    return re.findall(r"^\s*linux /bzImage (.*)$", text, re.M)[default]


@pytest.mark.parametrize("firmware", ["bios", "uefi"])
def test_the_stick_boots_to_the_web_ui(firmware, tmp_path):
    stick = str(tmp_path / "stick.img")
    subprocess.run(["cp", "--sparse=always", STICK, stick], check=True)
    os.makedirs(ARTIFACTS, exist_ok=True)
    log = os.path.join(ARTIFACTS, f"boot-console-{firmware}.log")
    if os.path.exists(log):
        os.unlink(log)
    vm = VM([QEMU_SH, firmware, stick], str(tmp_path), log)
    try:
        ui_s = vm.wait_for_ui()
        print(f"\n{firmware}: the web UI answered {ui_s:.1f} s after QEMU's start")
        # loglevel=4: the kernel does not echo its command line, where a tester's PIN and lab token go.
        assert "command line" not in vm.console_text().lower(), "the kernel echoed its command line on the console"
        assert vm.shell("test -d /sys/firmware/efi && echo uefi || echo bios") == firmware
        assert vm.shell("cat /proc/cmdline") == f"BOOT_IMAGE=/bzImage {default_entry()}"
        # The stick found by its labels, its SSDB-DATA holding the results.
        disk = vm.shell("cat /run/ssdbench/boot-disk")
        mount = vm.shell("grep ' /var/lib/ssdbench ' /proc/mounts").split()
        assert mount[:3] == [f"/dev/{disk}2", "/var/lib/ssdbench", "ext4"], mount
        vm.poweroff()
    finally:
        vm.close()
