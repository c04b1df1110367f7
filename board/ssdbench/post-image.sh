#!/bin/sh
# Post-image script: assembles the USB stick image from what Buildroot put
# in the images directory ($1, the same as $BINARIES_DIR):
#   rootfs.cpio.zst                the root file system, the initrd
#   rootfs.cpio                    the same, uncompressed (only its size is used)
#   bzImage                        the kernel
#   grub.img                       GRUB's BIOS core image (i386-pc)
#   efi-part/EFI/BOOT/bootx64.efi  GRUB for UEFI (x86_64-efi)
# and writes there ssdbench-<release>.img, with its .bmap, and
# ssdbench-<release>.img.xz, the image to publish. The layout is in
# genimage.cfg beside this script. Last, it prints the size of each part.
# make test-boot runs it too, on stand-ins for these files.

set -eu

BOARD_DIR=$(dirname "$0")
IMAGES="${1:-$BINARIES_DIR}"
# The release name from git describe (SSDBENCH_RELEASE, see external.mk),
# made safe for a file name.
RELEASE=$(printf '%s' "${SSDBENCH_RELEASE:-unknown}" | tr -c 'A-Za-z0-9._+-' '_')

# GRUB's BIOS boot code for the MBR: Buildroot only installs it into the
# target, so take it from the grub2 build.
BOOT_IMG=
for f in "$BUILD_DIR"/grub2-[0-9]*/build-i386-pc/grub-core/boot.img; do
	[ -f "$f" ] && BOOT_IMG=$f
done
if [ -z "$BOOT_IMG" ]; then
	echo "post-image.sh: GRUB's boot.img not found under $BUILD_DIR/grub2-*/" >&2
	exit 1
fi
cp "$BOOT_IMG" "$IMAGES/boot.img"
cp "$BOARD_DIR/grub.cfg" "$IMAGES/grub.cfg"
cp "$BOARD_DIR/ssdbench.conf" "$IMAGES/ssdbench.conf"

sed "s|@SSDBENCH_RELEASE@|$RELEASE|g" "$BOARD_DIR/genimage.cfg" \
	> "$IMAGES/genimage.cfg"

# Only the image of this build stays in the images directory.
rm -f "$IMAGES"/ssdbench-*.img "$IMAGES"/ssdbench-*.img.bmap "$IMAGES"/ssdbench-*.img.xz "$IMAGES/SHA256SUMS"
support/scripts/genimage.sh -c "$IMAGES/genimage.cfg"
IMG=$IMAGES/ssdbench-$RELEASE.img
# The download: the partitions' free space compresses to almost nothing,
# the kernel and the root file system (compressed already) stay as they
# are. Etcher, Rufus and bmaptool write an .img.xz as it is.
xz -T0 -k "$IMG"
# Published beside them: `sha256sum -c SHA256SUMS` checks a download.
(cd "$IMAGES" && sha256sum "ssdbench-$RELEASE.img.xz" "ssdbench-$RELEASE.img.bmap" > SHA256SUMS)

# Sizes in MiB, one decimal.
mib() {
	awk -v b="$1" 'BEGIN { printf "%8.1f MiB", b / 1048576 }'
}
part() {
	printf '  %-34s %s  %s\n' "$1" "$(mib "$(wc -c < "$IMAGES/$1")")" "$2"
}
# The bytes of the image that hold data, as its .bmap counts them.
bmap() {
	sed -n "s|.*<$1> *\([0-9]*\) *</$1>.*|\1|p" "$IMG.bmap"
}
echo "post-image.sh: $IMG, its parts:"
part rootfs.cpio "the root file system, uncompressed: what it takes in RAM"
part rootfs.cpio.zst "the root file system, compressed once: the initrd, on SSDBENCH"
part bzImage "the kernel, compressed once, on SSDBENCH"
part grub.img "GRUB for BIOS, in the sectors before partition 1"
part efi-part/EFI/BOOT/bootx64.efi "GRUB for UEFI, on SSDBENCH"
part "ssdbench-$RELEASE.img" "the partitions SSDBENCH and SSDB-DATA, as genimage.cfg sizes them"
printf '  %-34s %s  %s\n' "  of which data" "$(mib "$(($(bmap MappedBlocksCount) * $(bmap BlockSize)))")" \
	"what bmaptool writes"
part "ssdbench-$RELEASE.img.xz" "the image to publish"
