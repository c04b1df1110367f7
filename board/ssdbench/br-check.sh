#!/bin/sh
# make br-check: checks the br2-external tree against a Buildroot tree,
# without building anything. Needs BUILDROOT_DIR (a Buildroot source tree);
# without it, it says SKIPPED and succeeds.
#
# 1. ssdbench_x86_64_defconfig resolves: every line of it is still in the
#    savedefconfig output (no unknown, dropped or overridden symbol).
# 2. The resolved configuration keeps the image small: the kernel and the
#    root file system, a cpio archive beside it (not built into it), each
#    compressed once with zstd; no time zone data, udev hardware database
#    or glibc character set converters.
# 3. make show-info lists the packages the appliance needs.
# 4. linux-firmware installs what real PCs' NICs and GPUs load: Realtek
#    RTL8111/8125 (RTL_8169), RTL8153/8156 (RTL_815X), RTL8126/8127 (named
#    in external.mk) and Intel i915 (DMC, GuC, HuC: without them i915
#    prints errors on the console of every recent Intel PC).
# 5. Buildroot builds BusyBox from our whole configuration,
#    board/ssdbench/busybox.config, written for the BusyBox version it
#    builds (make vm-image checks that make oldconfig keeps it as it is).
# 6. The UEFI boot path for Secure Boot: GRUB for x86_64-efi made again
#    with SBAT (external.mk's hook), shim and MokManager from Debian's
#    shim-signed (package/shim-signed), and post-image.sh signing GRUB and
#    the kernel with sbsign into the layout genimage.cfg puts on SSDBENCH.
# 7. utils/check-package passes on every file of the external tree.

set -eu

EXTERNAL=$(cd "$(dirname "$0")/../.." && pwd)
DEFCONFIG=ssdbench_x86_64_defconfig
# The packages show-info must list.
REQUIRED="ssdbench uplot python3 python-flask python-waitress sqlite fio libaio kbd
nvme json-c hdparm smartmontools util-linux dosfstools exfatprogs e2fsprogs
eudev busybox linux grub2 shim-signed ca-certificates"
# What the resolved configuration must set, and what it must leave out:
# nothing on the appliance reads time zones (it runs on UTC), the hardware
# database (USB and PCI names) or iconv's converters (which Buildroot
# copies only for packages that ask, such as mtools).
# The root file system is the initrd that grub.cfg loads beside the
# kernel, not built into it.
# The firmware options: see 4.
# Python's zlib (the bundles' deflate) and unicodedata (the idna codec that
# a lab's host name goes through) must be there: package/ssdbench selects
# them.
WANTED="BR2_LINUX_KERNEL_ZSTD BR2_TARGET_ROOTFS_CPIO BR2_TARGET_ROOTFS_CPIO_ZSTD
BR2_PACKAGE_PYTHON3_ZLIB BR2_PACKAGE_PYTHON3_UNICODEDATA
BR2_PACKAGE_LINUX_FIRMWARE_RTL_8169 BR2_PACKAGE_LINUX_FIRMWARE_RTL_815X
BR2_PACKAGE_LINUX_FIRMWARE_I915 BR2_TARGET_GRUB2_X86_64_EFI BR2_PACKAGE_SHIM_SIGNED"
UNWANTED="BR2_TARGET_ROOTFS_INITRAMFS BR2_TARGET_TZ_INFO BR2_PACKAGE_TZDATA
BR2_PACKAGE_EUDEV_ENABLE_HWDB BR2_TOOLCHAIN_GLIBC_GCONV_LIBS_COPY"

if [ -z "${BUILDROOT_DIR:-}" ]; then
	echo "************************************************************"
	echo "SKIPPED: BUILDROOT_DIR not set"
	echo "  br-check needs a Buildroot tree, for example:"
	echo "  make br-check BUILDROOT_DIR=/path/to/buildroot-2026.05.1"
	echo "************************************************************"
	exit 0
fi

fail() {
	echo "br-check: FAILED: $*" >&2
	exit 1
}

BR=$(cd "$BUILDROOT_DIR" 2>/dev/null && pwd) ||
	fail "BUILDROOT_DIR=$BUILDROOT_DIR is not a directory"
if [ ! -f "$BR/Makefile" ] || [ ! -x "$BR/utils/check-package" ]; then
	fail "$BR is not a Buildroot source tree"
fi

BR_VERSION=$(sed -n 's/^export BR2_VERSION := *//p' "$BR/Makefile")
echo "br-check: Buildroot $BR_VERSION in $BR"
if [ -n "${BUILDROOT_VERSION:-}" ] && [ "$BR_VERSION" != "$BUILDROOT_VERSION" ]; then
	echo "br-check: WARNING: the pinned Buildroot is $BUILDROOT_VERSION"
fi

# check-package's own needs, named before it fails on them.
command -v shellcheck >/dev/null ||
	fail "check-package needs shellcheck (apt-get install shellcheck)"
python3 -c 'import magic, flake8' 2>/dev/null ||
	fail "check-package needs python-magic and flake8 (pip install python-magic flake8)"

# Buildroot runs with a make environment of its own, not the caller's.
unset MAKEFLAGS MFLAGS MAKELEVEL

OUT=$(mktemp -d "${TMPDIR:-/tmp}/br-check.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

br_make() {
	make -C "$BR" O="$OUT" "$@" > "$OUT/make.log" 2>&1 || {
		cat "$OUT/make.log" >&2
		fail "make $*"
	}
}

# 1. The defconfig resolves as written.
br_make BR2_EXTERNAL="$EXTERNAL" "$DEFCONFIG"
if grep -i 'warning:' "$OUT/make.log"; then
	fail "Kconfig warnings for $DEFCONFIG"
fi
br_make savedefconfig BR2_DEFCONFIG="$OUT/saved_defconfig"
# Compare normalised lines: no blank lines, no comments except
# "# BR2_FOO is not set", no surrounding blanks.
normalise() {
	sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' "$1" |
		grep -E '^(BR2_|# BR2_[A-Za-z0-9_]+ is not set$)' | sort -u
}
normalise "$EXTERNAL/configs/$DEFCONFIG" > "$OUT/wanted"
normalise "$OUT/saved_defconfig" > "$OUT/resolved"
comm -23 "$OUT/wanted" "$OUT/resolved" > "$OUT/missing"
if [ -s "$OUT/missing" ]; then
	echo "br-check: these lines of configs/$DEFCONFIG do not survive" \
		"make savedefconfig (unknown symbol, unmet dependency or default value):" >&2
	sed 's/^/  /' "$OUT/missing" >&2
	fail "$DEFCONFIG does not resolve cleanly"
fi
echo "br-check: ok: $DEFCONFIG resolves, $(wc -l < "$OUT/wanted") lines kept"

# 2. What keeps the image small, in the resolved configuration.
for symbol in $WANTED; do
	grep -q "^$symbol=y\$" "$OUT/.config" || fail "$symbol is not set"
done
for symbol in $UNWANTED; do
	if grep -q "^$symbol=y\$" "$OUT/.config"; then
		fail "$symbol is set: the image would carry what nothing on it uses"
	fi
done
echo "br-check: ok: the kernel and the root file system each compressed once with zstd; Python's zlib and" \
	"unicodedata; Realtek and i915 firmware; no tzdata, hwdb or gconv"

# 3. show-info lists every package the appliance needs.
make -s -C "$BR" O="$OUT" show-info > "$OUT/show-info.json" 2> "$OUT/make.log" || {
	cat "$OUT/make.log" >&2
	fail "make show-info"
}
# shellcheck disable=SC2086 # REQUIRED is a list of words
python3 - "$OUT/show-info.json" $REQUIRED <<'PY' || fail "packages missing from make show-info"
import json
import sys

info = json.load(open(sys.argv[1]))
missing = [name for name in sys.argv[2:] if name not in info]
if missing:
    print("br-check: show-info lacks: " + " ".join(missing), file=sys.stderr)
    sys.exit(1)
print("br-check: ok: show-info lists %d packages, among them:" % len(info))
for name in sys.argv[2:]:
    print("  %-16s %s" % (name, info[name]["version"]))
PY

# 4. The firmware files external.mk adds reach linux-firmware's list.
make -s -C "$BR" O="$OUT" printvars VARS=LINUX_FIRMWARE_FILES > "$OUT/firmware" 2> "$OUT/make.log" || {
	cat "$OUT/make.log" >&2
	fail "make printvars"
}
for file in "rtl_nic/rtl8126a-*.fw" "rtl_nic/rtl8127a-*.fw"; do
	grep -qF "$file" "$OUT/firmware" || fail "linux-firmware does not install $file"
done
echo "br-check: ok: linux-firmware installs the RTL8126 and RTL8127 firmware"

# 5. BusyBox's configuration is ours, for Buildroot's BusyBox version.
make -s -C "$BR" O="$OUT" printvars VARS="BUSYBOX_VERSION BUSYBOX_CONFIG_FILE" > "$OUT/busybox" 2> "$OUT/make.log" || {
	cat "$OUT/make.log" >&2
	fail "make printvars"
}
BB_VERSION=$(sed -n 's/^BUSYBOX_VERSION=//p' "$OUT/busybox")
BB_CONFIG=$(sed -n 's/^BUSYBOX_CONFIG_FILE=//p' "$OUT/busybox")
[ "$BB_CONFIG" = "$EXTERNAL/board/ssdbench/busybox.config" ] ||
	fail "Buildroot builds BusyBox from $BB_CONFIG, not board/ssdbench/busybox.config"
grep -q "^# ssdbench: .*Busybox version: $BB_VERSION\$" "$BB_CONFIG" ||
	fail "board/ssdbench/busybox.config is not written for BusyBox $BB_VERSION, the version Buildroot builds"
echo "br-check: ok: BusyBox $BB_VERSION with board/ssdbench/busybox.config"
# 6. The Secure Boot path: GRUB's SBAT hook is registered, post-image.sh
# signs GRUB and the kernel, and genimage.cfg puts shim, MokManager, the
# signed GRUB and kernel and the certificate on SSDBENCH.
make -s -C "$BR" O="$OUT" printvars VARS=GRUB2_POST_INSTALL_IMAGES_HOOKS > "$OUT/hooks" 2> "$OUT/make.log" || {
	cat "$OUT/make.log" >&2
	fail "make printvars"
}
grep -q SSDBENCH_GRUB2_SBAT "$OUT/hooks" || fail "GRUB for UEFI is not made with SBAT (external.mk)"
# shellcheck disable=SC2016 # post-image.sh's own words, its variables unexpanded
for step in 'sbsign .*grubx64.efi" "$GRUB_EFI"' 'sbsign .*efi-signed/bzImage" "$IMAGES/bzImage"' \
	'shim/shimx64.efi.signed" "$IMAGES/efi-signed/bootx64.efi"' 'shim/mmx64.efi.signed" "$IMAGES/efi-signed/mmx64.efi"'; do
	grep -q "$step" "$EXTERNAL/board/ssdbench/post-image.sh" || fail "post-image.sh lacks: $step"
done
for file in 'EFI/BOOT/bootx64.efi' 'EFI/BOOT/mmx64.efi' 'EFI/BOOT/grubx64.efi' ENROLL_THIS_KEY_IN_MOKMANAGER.cer bzImage; do
	grep -q "^[[:space:]]*file \"*$file\"* {" "$EXTERNAL/board/ssdbench/genimage.cfg" ||
		fail "genimage.cfg does not put $file on SSDBENCH"
done
if grep -q 'image = "bzImage"\|image = "efi-part/' "$EXTERNAL/board/ssdbench/genimage.cfg"; then
	fail "genimage.cfg puts an unsigned GRUB or kernel on SSDBENCH"
fi
echo "br-check: ok: shim, MokManager, GRUB with SBAT and the kernel signed by sbsign, the certificate on SSDBENCH"

# 7. check-package on every file of the external tree, run from the tree
# as Buildroot documents it for a br2-external (-b). As in Buildroot's own
# tree, .checkpackageignore lists the init scripts that start no daemon,
# so have no DAEMON variable.
cd "$EXTERNAL"
FILES=$(find .checkpackageignore Config.in external.mk external.desc board configs package overlay \
	-type f | sort)
# shellcheck disable=SC2086 # FILES is a list of paths without blanks
"$BR/utils/check-package" -b --ignore-list .checkpackageignore $FILES || fail "check-package"
echo "br-check: ok: check-package on $(echo "$FILES" | wc -l) files"

echo "br-check: OK (defconfig, image size, show-info, firmware, BusyBox configuration, Secure Boot path, check-package)"
