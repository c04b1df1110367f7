#!/bin/sh
# The VM test image (make vm-image): the base root file system from
# build-base.sh, plus what the Buildroot image adds to its own: overlay/,
# the ssdbench package from webui/ (with the uPlot files of make assets)
# and /etc/ssdbench-release. Writes into OUT:
#   vmlinuz, initrd.img  the Debian kernel, and the whole root file system
#                        as its initramfs: the system runs from RAM, as the
#                        appliance does
#   stick.img            the USB stick: an MBR with SSDBENCH (FAT32: boot
#                        files, the settings template ssdbench.conf,
#                        ssdbench-results/) and SSDB-DATA (ext4, made
#                        as genimage.cfg makes it; it grows to the end of a
#                        larger stick at the first boot)
# Made without mounting anything: mkfs.vfat, mtools and mkfs.ext4 work on
# partition files, which are then copied into the disk image.
#
# Usage: build-image.sh BASE.tar BUSYBOX OUT VERSION [FIO]
#   BUSYBOX  the appliance's BusyBox (build-busybox.sh)
#   FIO      a fio program to put in place of Debian's (make vm-image VM_FIO=...)
set -eu

BASE=$1
BUSYBOX=$2
OUT=$3
VERSION=$4
FIO=${5:-}
TOP=$(cd "$(dirname "$0")/../.." && pwd)
ROOT=$OUT/root
FAT_MIB=256
DATA_MIB=256

rm -rf "$ROOT"
mkdir -p "$ROOT"
tar -xf "$BASE" -C "$ROOT"
# The VM's stand-ins for what Buildroot's packages bring (/init, rcS,
# fstab, ...), then the appliance's overlay, as Buildroot applies it.
cp -a "$TOP/board/vm/rootfs/." "$TOP/overlay/." "$ROOT/"
# BusyBox, the image's own, is init, the shell and every shell tool. As
# Buildroot installs it (install-noclobber), a program of a selected
# package keeps its place: util-linux's lsblk, not BusyBox's.
install -m 0755 "$BUSYBOX" "$ROOT/usr/bin/busybox"
chroot "$ROOT" /usr/bin/busybox --install -s
if [ -n "$FIO" ]; then
	install -m 0755 "$FIO" "$ROOT/usr/bin/fio"
fi
# The versions the VM tests run, printed as they start (webui/vmtests).
{
	chroot "$ROOT" /usr/bin/busybox | head -1
	chroot "$ROOT" python3 --version
	chroot "$ROOT" python3 -c 'import importlib.metadata as m; print("Flask", m.version("flask"))'
	chroot "$ROOT" fio --version
	chroot "$ROOT" /usr/lib/vm/modprobe --version | head -1 | sed 's/^/(VM only) /'
	echo "Linux $(basename "$ROOT"/lib/modules/*) (Debian's, VM only)"
} > "$OUT/versions.txt"

# The package as pip would install it, compiled ahead: Python starts
# slowly enough under emulation.
SITE=$ROOT/usr/lib/python3/dist-packages
test -f "$TOP/webui/ssdbench/static/vendor/uPlot.iife.min.js" ||
	{ echo "build-image.sh: no uPlot files: run make assets" >&2; exit 1; }
tar -C "$TOP/webui" --exclude=__pycache__ -cf - ssdbench | tar -C "$SITE" -xf -
printf '#!/usr/bin/python3\nimport sys\nfrom ssdbench.cli import main\nsys.exit(main())\n' \
	> "$ROOT/usr/bin/ssdbench"
chmod 0755 "$ROOT/usr/bin/ssdbench"
chroot "$ROOT" python3 -m compileall -q /usr/lib/python3/dist-packages/ssdbench
SSDBENCH_RELEASE=$VERSION "$TOP/board/ssdbench/post-build.sh" "$ROOT"

mv "$ROOT"/boot/vmlinuz-* "$OUT/vmlinuz"
rm -rf "${ROOT:?}/boot" "$ROOT/vmlinuz" "$ROOT/vmlinuz.old"
(cd "$ROOT" && find . | cpio -o -H newc --quiet) | zstd -q -T0 -9 > "$OUT/initrd.img"
rm -rf "$ROOT"

rm -f "$OUT/fat.part" "$OUT/data.part"
mkfs.vfat -F 32 -n SSDBENCH -C "$OUT/fat.part" $((FAT_MIB * 1024)) > /dev/null
mcopy -i "$OUT/fat.part" "$OUT/vmlinuz" "$OUT/initrd.img" "$TOP/board/ssdbench/ssdbench.conf" ::/
mmd -i "$OUT/fat.part" ::/ssdbench-results
mkfs.ext4 -q -b 4096 -m 0 -i 262144 -L SSDB-DATA "$OUT/data.part" "${DATA_MIB}M" > /dev/null
truncate -s $((1 + FAT_MIB + DATA_MIB))M "$OUT/stick.img.part"
sfdisk -q "$OUT/stick.img.part" <<PARTS
label: dos
start=1MiB, size=${FAT_MIB}MiB, type=c, bootable
size=${DATA_MIB}MiB, type=83
PARTS
dd if="$OUT/fat.part" of="$OUT/stick.img.part" bs=1M seek=1 conv=notrunc,sparse status=none
dd if="$OUT/data.part" of="$OUT/stick.img.part" bs=1M seek=$((1 + FAT_MIB)) conv=notrunc,sparse status=none
rm "$OUT/fat.part" "$OUT/data.part"
mv "$OUT/stick.img.part" "$OUT/stick.img"
