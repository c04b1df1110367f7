#!/bin/sh
# Post-image script: assembles the USB stick image from what Buildroot put
# in the images directory ($1, the same as $BINARIES_DIR):
#   rootfs.cpio.zst                the root file system, the initrd
#   rootfs.cpio                    the same, uncompressed (only its size is used)
#   bzImage                        the kernel
#   grub.img                       GRUB's BIOS core image (i386-pc)
#   efi-part/EFI/BOOT/bootx64.efi  GRUB for UEFI (x86_64-efi), with an SBAT
#                                  section (external.mk remakes it so)
#   shim/shimx64.efi.signed        shim, signed by Microsoft, and MokManager
#   shim/mmx64.efi.signed          (package/shim-signed: Debian's binaries)
# and writes there ssdbench-<release>.img, with its .bmap, and
# ssdbench-<release>.img.xz, the image to publish. The layout is in
# genimage.cfg beside this script. Last, it prints the size of each part.
#
# UEFI with Secure Boot on: the firmware starts shim (EFI/BOOT/bootx64.efi),
# which starts GRUB (grubx64.efi beside it), which starts the kernel. Shim
# trusts GRUB and the kernel by the key that signs them here, once its
# certificate is in MokList: it opens MokManager (mmx64.efi) when it is
# not, and the tester enrolls ENROLL_THIS_KEY_IN_MOKMANAGER.cer from the
# stick. The key: signing-key.sh (SSDBENCH_SIGNING_KEY and
# SSDBENCH_SIGNING_CERT, or a throwaway key in SSDBENCH_SIGNING_DIR, which
# make image sets to build/signing, else $BUILD_DIR/ssdbench-signing).
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

# Shim refuses a GRUB without SBAT (its revocation data); GRUB has it only
# when grub-mkimage was given --sbat.
GRUB_EFI=$IMAGES/efi-part/EFI/BOOT/bootx64.efi
if ! grep -q -a 'sbat,1,SBAT Version' "$GRUB_EFI"; then
	echo "post-image.sh: $GRUB_EFI has no SBAT section (grub-mkimage --sbat)" >&2
	exit 1
fi
SIGNING=$("$BOARD_DIR/signing-key.sh" "${SSDBENCH_SIGNING_DIR:-$BUILD_DIR/ssdbench-signing}")
KEY=$(echo "$SIGNING" | sed -n 1p)
CERT=$(echo "$SIGNING" | sed -n 2p)
rm -rf "$IMAGES/efi-signed"
mkdir -p "$IMAGES/efi-signed"
cp "$IMAGES/shim/shimx64.efi.signed" "$IMAGES/efi-signed/bootx64.efi"
cp "$IMAGES/shim/mmx64.efi.signed" "$IMAGES/efi-signed/mmx64.efi"
sbsign --key "$KEY" --cert "$CERT" --output "$IMAGES/efi-signed/grubx64.efi" "$GRUB_EFI"
sbsign --key "$KEY" --cert "$CERT" --output "$IMAGES/efi-signed/bzImage" "$IMAGES/bzImage"
# MokManager reads a certificate in DER.
openssl x509 -in "$CERT" -outform DER -out "$IMAGES/efi-signed/ENROLL_THIS_KEY_IN_MOKMANAGER.cer"

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
part efi-signed/bzImage "the kernel, compressed once, signed, on SSDBENCH"
part grub.img "GRUB for BIOS, in the sectors before partition 1"
part efi-signed/grubx64.efi "GRUB for UEFI, signed, on SSDBENCH"
part efi-signed/bootx64.efi "shim, signed by Microsoft, on SSDBENCH"
part efi-signed/mmx64.efi "MokManager, signed by Microsoft, on SSDBENCH"
part "ssdbench-$RELEASE.img" "the partitions SSDBENCH and SSDB-DATA, as genimage.cfg sizes them"
printf '  %-34s %s  %s\n' "  of which data" "$(mib "$(($(bmap MappedBlocksCount) * $(bmap BlockSize)))")" \
	"what bmaptool writes"
part "ssdbench-$RELEASE.img.xz" "the image to publish"
