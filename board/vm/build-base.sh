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
# Trixie, not the host's Debian 12: its Python (3.13) and Flask (3.1) are the
# nearest to the image's that a stable release has (its fio, 3.39, gives way to
# make fio's 3.41 in build-image.sh).
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

rm -rf "$ROOT"
INITRD=No mmdebstrap --variant=essential \
	--include="$(grep -v '^#' "$HERE/packages" | paste -sd, -)" \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/info/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	trixie "$ROOT" "deb $MIRROR trixie main"

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
{ grep -v -e '^#' -e '^kmod$' "$HERE/packages"; chroot "$ROOT" dpkg-query -W -f '${Package}\n' | grep '^python3'; } |
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
