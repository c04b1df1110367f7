#!/bin/sh
# Post-image script: assembles the USB stick image from what Buildroot put
# in the images directory ($1, the same as $BINARIES_DIR):
#   bzImage                        the kernel, the root file system inside
#   grub.img                       GRUB's BIOS core image (i386-pc)
#   efi-part/EFI/BOOT/bootx64.efi  GRUB for UEFI (x86_64-efi)
# and writes ssdbench-<release>.img there, with its .bmap. The layout is
# in genimage.cfg beside this script.

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

sed "s|@SSDBENCH_RELEASE@|$RELEASE|g" "$BOARD_DIR/genimage.cfg" \
	> "$IMAGES/genimage.cfg"

# Only the image of this build stays in the images directory.
rm -f "$IMAGES"/ssdbench-*.img "$IMAGES"/ssdbench-*.img.bmap
support/scripts/genimage.sh -c "$IMAGES/genimage.cfg"

echo "post-image.sh: $IMAGES/ssdbench-$RELEASE.img"
