#!/bin/sh
# The base root file system of the VM test image: the Debian 12 packages of
# board/vm/packages installed with mmdebstrap, then cut down to what the
# appliance runs. Nothing of ssdbench is in it, so it is rebuilt only when
# the package or module list changes (make vm-image).
#
# Usage: build-base.sh OUT.tar
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$1
ROOT=$OUT.d

# The host's own apt sources: the image comes from whichever Debian mirror
# the host is configured with.
SOURCES=""
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
	if [ -f "$f" ] && grep -qE '^[[:space:]]*(deb|URIs:)' "$f"; then
		SOURCES="$SOURCES $f"
	fi
done
[ -n "$SOURCES" ] || { echo "build-base.sh: no apt sources on this host" >&2; exit 1; }

rm -rf "$ROOT"
# shellcheck disable=SC2086 # SOURCES is a list of paths without blanks
INITRD=No mmdebstrap --variant=essential \
	--include="$(grep -v '^#' "$HERE/packages" | paste -sd, -)" \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/info/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	bookworm "$ROOT" $SOURCES

# The kernel's own initramfs is never used (the whole root file system is
# the initramfs), and neither is perl, which packaging pulls in. udev
# keeps its rules, not its hardware database (nor does the appliance's).
rm -rf "$ROOT"/boot/initrd.img-* "$ROOT"/usr/lib/udev/hwdb.bin "$ROOT"/usr/lib/udev/hwdb.d \
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

tar -C "$ROOT" -cf "$OUT.part" .
mv "$OUT.part" "$OUT"
rm -rf "$ROOT"
