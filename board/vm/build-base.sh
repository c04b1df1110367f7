#!/bin/sh
# The base root file system of the VM test image: the Debian 13 (trixie)
# packages of board/vm/packages installed with mmdebstrap, then cut down to
# what the appliance runs: only those packages' own programs stay, none of
# Debian's essential set (dash, bash, coreutils, ...); build-image.sh adds
# BusyBox for the rest, as Buildroot does. Nothing of ssdbench is in it, so
# it is rebuilt only when the package or module list changes (make
# vm-image).
#
# Usage: build-base.sh OUT.tar
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$1
ROOT=$OUT.d
# Trixie, not the host's Debian 12: its Flask (3.1) is the image's, and a
# stable release does not change under CI from one day to the next. Only
# the packages that board/vm/packages names with /unstable (Python 3.14 and
# its C library) come from unstable; its fio, 3.39, gives way to make fio's
# 3.41 in build-image.sh. A mirror's copy of unstable that is not updated
# keeps its last Release file, whose date has passed: apt is told not to
# refuse it for that.
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES=$(grep -v '^#' "$HERE/packages")

rm -rf "$ROOT"
INITRD=No mmdebstrap --variant=essential \
	--include="$(echo "$PACKAGES" | paste -sd, -)" \
	--aptopt='APT::Default-Release "trixie"' \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/info/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	trixie "$ROOT" "deb $MIRROR trixie main" "deb [check-valid-until=no] $MIRROR unstable main"

# python3 is the image's 3.14, and trixie's 3.13 is gone, so that nothing
# runs on it by mistake. Debian compiled the pure-Python packages (Flask,
# ...) for 3.13 only: compiled again for 3.14, since Python starts slowly
# enough under emulation.
ln -sf python3.14 "$ROOT/usr/bin/python3"
rm -rf "$ROOT"/usr/bin/python3.13 "$ROOT"/usr/lib/python3.13 "$ROOT"/usr/lib/x86_64-linux-gnu/libpython3.13*
find "$ROOT/usr/lib/python3/dist-packages" -name '*.cpython-313*' -delete
chroot "$ROOT" python3 -m compileall -q /usr/lib/python3/dist-packages

# The kernel's own initramfs is never used (the whole root file system is
# the initramfs), and neither is perl, which packaging pulls in. udev
# keeps its rules, not its hardware database (nor does the appliance's).
# /var/log/README (systemd's) points into the docs that are left out: a
# grep -r of /var/log, which follows links, would name it.
rm -rf "$ROOT"/var/log/README "$ROOT"/boot/initrd.img-* "$ROOT"/usr/lib/udev/hwdb.bin "$ROOT"/usr/lib/udev/hwdb.d \
	"$ROOT"/etc/udev/hwdb.bin "$ROOT"/usr/share/perl \
	"$ROOT"/usr/lib/x86_64-linux-gnu/perl "$ROOT"/usr/lib/x86_64-linux-gnu/libperl.so* \
	"$ROOT"/var/cache/apt "$ROOT"/var/lib/apt/lists "$ROOT"/var/cache/debconf/*-old

# Only the listed kernel modules and what they depend on.
KVER=$(basename "$ROOT"/lib/modules/*)
grep -v "^#" "$HERE/rootfs/etc/modules" | while read -r module; do
	chroot "$ROOT" modprobe -S "$KVER" --show-depends "$module"
done | awk '$1 == "insmod" { print $2 }' | sort -u > "$ROOT/keep"
find "$ROOT/lib/modules/$KVER/kernel" -name '*.ko*' | sed "s|^$ROOT||" | sort |
	comm -23 - "$ROOT/keep" | sed "s|^|$ROOT|" | xargs rm -f
find "$ROOT/lib/modules/$KVER/kernel" -type d -empty -delete
rm "$ROOT/keep"
chroot "$ROOT" depmod "$KVER"

# Only the programs of the listed packages (and of python3's own, the
# interpreter), none of Debian's essential set: on the appliance, BusyBox
# is the shell and the shell tools (build-image.sh installs it). kmod stays
# out of the appliance's PATH, in /usr/lib/vm, for the VM's modules.
mkdir -p "$ROOT/usr/lib/vm"
mv "$ROOT/usr/bin/kmod" "$ROOT/usr/lib/vm/kmod"
ln -s kmod "$ROOT/usr/lib/vm/modprobe"
# shellcheck disable=SC2016 # ${Package} is dpkg-query's, not the shell's
{ echo "$PACKAGES" | sed 's|/.*||' | grep -v '^kmod$'; chroot "$ROOT" dpkg-query -W -f '${Package}\n' | grep '^python3'; } |
	sort -u | xargs chroot "$ROOT" dpkg -L | sed -e 's|^/bin/|/usr/bin/|' -e 's|^/sbin/|/usr/sbin/|' |
	sort -u > "$ROOT/keep"
find "$ROOT/usr/bin" "$ROOT/usr/sbin" -mindepth 1 ! -type d | sed "s|^$ROOT||" | sort |
	comm -23 - "$ROOT/keep" | sed "s|^|$ROOT|" | xargs rm -f
rm "$ROOT/keep"
# Nor the programs that Debian builds into those packages and the image's
# builds leave out: util-linux's options that package/ssdbench does not
# select, e2fsprogs' debugfs, e2image, e4defrag and e2scrub.
for program in agetty cal chfn chsh chmem fsck.cramfs mkfs.cramfs eject fallocate fdformat hardlink \
	hwclock ipcmk ipcrm ipcs irqtop kill last lastb line logger login lsfd lslogins lsmem mesg \
	mkfs.minix fsck.minix more mountpoint newgrp nologin nsenter pg pivot_root raw rename.ul rfkill \
	runuser chrt ionice taskset uclampset setpriv setterm su sulogin switch_root tunelp ul unshare \
	utmpdump uuidd vipw vigr waitpid wall wdctl write zramctl mkfs.bfs \
	debugfs e2image e4defrag e2scrub e2scrub_all; do
	rm -f "$ROOT/usr/bin/$program" "$ROOT/usr/sbin/$program"
done

tar -C "$ROOT" -cf "$OUT.part" .
mv "$OUT.part" "$OUT"
rm -rf "$ROOT"
