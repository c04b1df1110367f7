#!/bin/sh
# make test-boot: the release USB stick, assembled by the release's own
# board/ssdbench/post-image.sh, genimage.cfg and grub.cfg, from Debian
# stand-ins for what Buildroot builds. Writes into OUT/images, Buildroot's
# images folder ($BINARIES_DIR):
#   bzImage      Debian's kernel (linux-image-amd64), the VM image's
#                vmlinuz, without Debian's signature (Debian's shim would
#                trust it): post-image.sh signs it as it signs the kernel
#                that Buildroot builds
#   rootfs.cpio.zst, rootfs.cpio
#                the VM image's initrd.img, a zstd-compressed cpio of the
#                whole root file system with the kernel's modules, and the
#                same uncompressed
#   grub.img, efi-part/EFI/BOOT/bootx64.efi
#                GRUB for BIOS and for UEFI (grub-pc-bin, grub-efi-amd64-bin),
#                made by grub-mkimage as Buildroot's grub2 package makes
#                them: the same formats, prefixes and modules (the
#                defconfig's lists), and GRUB for UEFI with the SBAT
#                section that external.mk gives it (board/ssdbench/sbat.csv)
#   shim/shimx64.efi.signed, shim/mmx64.efi.signed
#                shim and MokManager, signed by Microsoft: Debian's
#                shim-signed and shim-helpers-amd64-signed, as
#                package/shim-signed installs them
# and into OUT/build ($BUILD_DIR) GRUB's MBR code, where post-image.sh
# looks for it in a grub2 build. Then it runs post-image.sh, unchanged,
# from this folder as Buildroot's top folder, so that the
# support/scripts/genimage.sh it calls is the stand-in here. The stick is
# OUT/images/ssdbench-VERSION.img; OUT/stick.img is a link to it.
#
# Usage: build-stick.sh VM_DIR OUT VERSION
#   VM_DIR  the VM image (make vm-image): vmlinuz, initrd.img

set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
VM_DIR=$1
OUT=$(mkdir -p "$2" && cd "$2" && pwd)
VERSION=$3
DEFCONFIG=$TOP/configs/ssdbench_x86_64_defconfig
IMAGES=$OUT/images
BUILD=$OUT/build

# A string option of the defconfig, without its quotes; else $2, its
# default in Buildroot.
option() {
	value=$(sed -n "s/^$1=\"\(.*\)\"\$/\1/p" "$DEFCONFIG")
	echo "${value:-${2:-}}"
}

rm -rf "$IMAGES" "$BUILD"
mkdir -p "$IMAGES/efi-part/EFI/BOOT"
cp "$VM_DIR/vmlinuz" "$IMAGES/bzImage"
sbattach --remove "$IMAGES/bzImage"
mkdir -p "$IMAGES/shim"
cp /usr/lib/shim/shimx64.efi.signed /usr/lib/shim/mmx64.efi.signed "$IMAGES/shim/"
cp "$VM_DIR/initrd.img" "$IMAGES/rootfs.cpio.zst"
zstd -q -d "$IMAGES/rootfs.cpio.zst" -o "$IMAGES/rootfs.cpio"

PC_MODULES=$(option BR2_TARGET_GRUB2_BUILTIN_MODULES_PC)
EFI_MODULES=$(option BR2_TARGET_GRUB2_BUILTIN_MODULES_EFI)
# shellcheck disable=SC2086 # the module lists are lists of words
grub-mkimage -d /usr/lib/grub/i386-pc -O i386-pc -o "$IMAGES/grub.img" \
	-p "($(option BR2_TARGET_GRUB2_BOOT_PARTITION hd0,msdos1))/boot/grub" $PC_MODULES
# shellcheck disable=SC2086
grub-mkimage -d /usr/lib/grub/x86_64-efi -O x86_64-efi -o "$IMAGES/efi-part/EFI/BOOT/bootx64.efi" \
	--sbat "$TOP/board/ssdbench/sbat.csv" -p /EFI/BOOT $EFI_MODULES

GRUB_VERSION=$(grub-mkimage --version | awk '{ print $NF }')
mkdir -p "$BUILD/grub2-$GRUB_VERSION/build-i386-pc/grub-core"
cp /usr/lib/grub/i386-pc/boot.img "$BUILD/grub2-$GRUB_VERSION/build-i386-pc/grub-core/"

# As Buildroot runs a post-image script: from its top folder, with the
# images folder as argument and these in the environment.
cd "$HERE"
BR2_CONFIG=$DEFCONFIG BUILD_DIR=$BUILD BINARIES_DIR=$IMAGES SSDBENCH_RELEASE=$VERSION \
	"$TOP/board/ssdbench/post-image.sh" "$IMAGES"

# The checksums it publishes with the image check out.
(cd "$IMAGES" && sha256sum --quiet -c SHA256SUMS)
# post-image.sh leaves one stick in the images folder: this build's.
ln -f "$IMAGES"/ssdbench-*.img "$OUT/stick.img"
