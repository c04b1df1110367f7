"""The image's configuration (configs/, board/ssdbench/): the kernel builds in what real testbeds need, and the
image carries nothing that nothing on it reads. The kernel builds every driver in, so that nothing depends on
loading a module: a driver counts only when it is =y. make br-check resolves the same choices with Buildroot, and
make test-boot boots the layout that grub.cfg and genimage.cfg describe."""

import os
import pathlib
import re
import subprocess

TOP = pathlib.Path(__file__).resolve().parents[2]
FRAGMENT = os.path.join(TOP, "board", "ssdbench", "linux.fragment")
DEFCONFIG = TOP / "configs" / "ssdbench_x86_64_defconfig"
BOARD = TOP / "board" / "ssdbench"
REQUIRED = BOARD / "linux.required"


def needed():
    """{symbol: what for} of linux.required, the drivers real testbeds need (linux-config-check.sh reads it too)."""
    lines = [line.split(None, 1) for line in REQUIRED.read_text().splitlines() if line and not line.startswith("#")]
    return dict(lines)


def fragment():
    """Each CONFIG_ option set in the fragment, with how many times it is set."""
    found, count = {}, {}
    with open(FRAGMENT) as f:
        for line in f:
            name, _, value = line.strip().partition("=")
            if name.startswith("CONFIG_"):
                found[name[7:]] = value
                count[name[7:]] = count.get(name[7:], 0) + 1
    return found, count


def test_the_kernel_builds_in_the_drivers_real_testbeds_need():
    found, count = fragment()
    missing = {name: why for name, why in needed().items() if found.get(name) != "y"}
    assert not missing, missing
    assert [name for name, n in count.items() if n > 1] == []  # a later line would silently win


def test_the_kernel_check_names_each_line_the_merge_dropped(tmp_path):
    """linux-config-check.sh on a merged configuration (make image runs it before the kernel builds; make
    br-check after merging the fragment into a real kernel's configuration): a line of the fragment or a
    required driver that Kconfig dropped fails it, by name."""
    check = str(BOARD / "linux-config-check.sh")
    found, _ = fragment()
    merged = [f"CONFIG_{name}={value}" for name, value in found.items()]
    config = tmp_path / ".config"
    config.write_text("\n".join(merged) + "\n")
    assert subprocess.run([check, str(config)], capture_output=True).returncode == 0
    # An unmet dependency: Kconfig leaves the symbol out; a choice the merge changed: another value.
    config.write_text("\n".join(m for m in merged if not m.startswith("CONFIG_USB4=")) + "\n")
    with open(config, "a") as f:
        f.write("CONFIG_SCSI_MPT3SAS=m\n")
    config.write_text(config.read_text().replace("CONFIG_SCSI_MPT3SAS=y\n", ""))
    failed = subprocess.run([check, str(config)], capture_output=True, text=True)
    assert failed.returncode == 1
    assert "CONFIG_USB4=y, but CONFIG_USB4 is unknown or its dependencies unmet" in failed.stderr
    assert "CONFIG_SCSI_MPT3SAS=y, but CONFIG_SCSI_MPT3SAS=m" in failed.stderr


def test_the_root_file_system_is_compressed_once():
    """The root file system is Buildroot's cpio archive beside the kernel, compressed once with zstd
    (rootfs.cpio.zst), and the kernel is compressed once with zstd too (it unpacks faster than xz at boot, for a
    few per cent more size). Built into the kernel instead, the archive was compressed twice, gzip inside gzip by
    the kernel's defaults. So the kernel takes a zstd initrd, GRUB loads it in every menu entry, and it is on the
    boot partition."""
    found, _ = fragment()
    assert (found["BLK_DEV_INITRD"], found["RD_ZSTD"]) == ("y", "y")
    assert not [name for name in found if name.startswith("INITRAMFS_")]
    lines = set(DEFCONFIG.read_text().splitlines())
    assert {"BR2_TARGET_ROOTFS_CPIO=y", "BR2_TARGET_ROOTFS_CPIO_ZSTD=y", "BR2_LINUX_KERNEL_ZSTD=y"} <= lines
    assert "BR2_TARGET_ROOTFS_INITRAMFS=y" not in lines
    entries = re.findall(r"^menuentry .*?^}", (BOARD / "grub.cfg").read_text(), re.M | re.S)
    assert entries and all(re.search(r"^\s*initrd /rootfs\.cpio\.zst$", entry, re.M) for entry in entries)
    assert re.search(r'file rootfs\.cpio\.zst \{\s*image = "rootfs\.cpio\.zst"', (BOARD / "genimage.cfg").read_text())


def test_every_kernel_line_passes_the_drives_through_the_iommu():
    """iommu=pt on every kernel line the appliance boots (GRUB's entries) and the VM's (board/vm/qemu.sh, which
    passes the same line without GRUB): AMD's default IOMMU translation lowers NVMe IOPS at high queue depth. Each
    run records whether the running kernel had it (run/environment.iommu)."""
    lines = re.findall(r"^\s*linux /bzImage (.*)$", (BOARD / "grub.cfg").read_text(), re.M)
    vm = re.findall(r'-append "([^"]*)"', (TOP / "board" / "vm" / "qemu.sh").read_text())
    assert len(lines) == 3 and len(vm) == 1
    assert all("iommu=pt" in line.split() for line in lines + vm)


def test_what_testers_meet_on_real_pcs_is_built_in():
    """Issue 34, item 5: GRUB says it is loading before the minute a USB 2 stick may take (its echo built in, for
    BIOS and UEFI); a safe entry boots without NVMe power states or PCIe link power management; the console has
    Terminus 16x32 for 4K screens; USB4 devices are authorized as they appear, on hosts that have no "no
    security" setting; Python has zlib (the bundles' deflate) and unicodedata (idna, for a lab's name)."""
    entries = re.findall(r"^menuentry (.*?) \{(.*?)^\}", (BOARD / "grub.cfg").read_text(), re.M | re.S)
    assert all(re.match(r'\s*echo "Loading ssdbench from the stick', body) for _, body in entries), entries
    safe = [body for title, body in entries if "safe" in title]
    assert len(safe) == 1 and {"nvme_core.default_ps_max_latency_us=0", "pcie_aspm=off"} <= set(safe[0].split())
    for firmware in ("PC", "EFI"):
        modules = re.search(rf'^BR2_TARGET_GRUB2_BUILTIN_MODULES_{firmware}="(.*)"$', DEFCONFIG.read_text(), re.M)
        assert "echo" in modules[1].split(), firmware
    found, _ = fragment()
    assert (found.get("FONTS"), found.get("FONT_8x16"), found.get("FONT_TER16x32")) == ("y", "y", "y")
    rule = (TOP / "overlay" / "etc" / "udev" / "rules.d" / "91-ssdbench-usb4.rules").read_text()
    assert 'SUBSYSTEM=="thunderbolt", ATTR{authorized}=="0", ATTR{authorized}="1"' in rule
    selects = (TOP / "package" / "ssdbench" / "Config.in").read_text()
    assert "select BR2_PACKAGE_PYTHON3_ZLIB " in selects and "select BR2_PACKAGE_PYTHON3_UNICODEDATA " in selects


def test_the_firmware_real_nics_and_intel_graphics_load_is_on_the_image():
    """Issue 34, item 5: Realtek's RTL8111/8125 and RTL8153/8156 firmware (Buildroot's options), RTL8126/8127's
    (which those options do not list yet: external.mk adds the files while RTL_8169 is set), and i915's DMC,
    GuC and HuC, without which the i915 built into x86_64_defconfig prints errors on recent Intel PCs. make
    br-check resolves the same options against the Buildroot release and checks the files reach its list."""
    lines = DEFCONFIG.read_text().splitlines()
    for option in ("RTL_8169", "RTL_815X", "I915"):
        assert f"BR2_PACKAGE_LINUX_FIRMWARE_{option}=y" in lines, option
    added = re.search(
        r"^ifeq \(\$\(BR2_PACKAGE_LINUX_FIRMWARE_RTL_8169\),y\)\nLINUX_FIRMWARE_FILES \+= (.*)\nendif$",
        (TOP / "external.mk").read_text(),
        re.M,
    )
    assert added and added[1].split() == ["rtl_nic/rtl8126a-*.fw", "rtl_nic/rtl8127a-*.fw"]
    check = (BOARD / "br-check.sh").read_text()
    assert all(f"BR2_PACKAGE_LINUX_FIRMWARE_{option}" in check for option in ("RTL_8169", "RTL_815X", "I915"))


def test_the_boot_s_messages_are_kept():
    """Issue 34, item 4: init runs rcS through boot-log, whose /var/log/boot.log the log keeper keeps."""
    sysinit = re.findall(r"^::sysinit:(.*rcS.*)$", (TOP / "overlay" / "etc" / "inittab").read_text(), re.M)
    assert sysinit == ["/usr/libexec/ssdbench/boot-log /etc/init.d/rcS"]
    assert os.access(TOP / "overlay" / "usr" / "libexec" / "ssdbench" / "boot-log", os.X_OK)


# What time zone data, the udev hardware database and glibc's character set converters would serve.
NEEDS_TZDATA = r"\bzoneinfo\b|\btzdata\b|\blocaltime\b|\bTZ="
NEEDS_HWDB = r"FROM_DATABASE|\bhwdb\b"
NEEDS_GCONV = r"\biconv\b|\bmtools\b|\bm(copy|dir|type|md|rd|del|label|format|info)\b"


def appliance_code():
    """Everything that runs on the appliance and comes from this tree: the package and the boot flow."""
    for folder in (TOP / "webui" / "ssdbench", TOP / "overlay"):
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.suffix in ("", ".py", ".sh", ".html", ".script") and "vendor" not in path.parts:
                yield path, path.read_text(errors="replace")


def test_the_image_leaves_out_time_zones_hwdb_and_gconv_which_nothing_reads():
    """The appliance runs on UTC and writes its times with gmtime and datetime.UTC: no time zone data. Drive
    identity comes from the drives (ATA IDENTIFY, NVMe Identify, sysfs), never from udev's hardware database of
    USB and PCI names. glibc's converters serve iconv, which Buildroot copies for mtools; nothing on the
    appliance runs mtools (the hosts that read the stick do). If code comes to need one of them, this fails."""
    lines = DEFCONFIG.read_text().splitlines()
    assert "BR2_TARGET_TZ_INFO=y" not in lines
    assert "# BR2_PACKAGE_EUDEV_ENABLE_HWDB is not set" in lines
    assert "BR2_PACKAGE_MTOOLS" not in (TOP / "package" / "ssdbench" / "Config.in").read_text()
    uses = [
        (str(path.relative_to(TOP)), what)
        for path, text in appliance_code()
        for what, pattern in (("tzdata", NEEDS_TZDATA), ("hwdb", NEEDS_HWDB), ("gconv", NEEDS_GCONV))
        if re.search(pattern, text)
    ]
    assert uses == []
