#!/bin/sh
# make test-boot: the release USB stick, assembled by the release's own
# board/ssdbench/post-image.sh, genimage.cfg and grub.cfg, from Debian
# stand-ins for what Buildroot builds. Writes into OUT/images, Buildroot's
# images folder ($BINARIES_DIR):
#   bzImage      already there: build-kernel.sh, the kernel with the root
#                file system inside
#   grub.img, efi-part/EFI/BOOT/bootx64.efi
#                GRUB for BIOS and for UEFI (grub-pc-bin, grub-efi-amd64-bin),
#                made by grub-mkimage as Buildroot's grub2 package makes
#                them: the same formats, prefixes and modules (the
#                defconfig's lists)
# and into OUT/build ($BUILD_DIR) GRUB's MBR code, where post-image.sh
# looks for it in a grub2 build. Then it runs post-image.sh, unchanged,
# from this folder as Buildroot's top folder, so that the
# support/scripts/genimage.sh it calls is the stand-in here. The stick is
# OUT/images/ssdbench-VERSION.img; OUT/stick.img is a link to it.
#
# Usage: build-stick.sh OUT VERSION

set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
VERSION=$2
DEFCONFIG=$TOP/configs/ssdbench_x86_64_defconfig
IMAGES=$OUT/images
BUILD=$OUT/build

# A string option of the defconfig, without its quotes; else $2, its
# default in Buildroot.
option() {
	value=$(sed -n "s/^$1=\"\(.*\)\"\$/\1/p" "$DEFCONFIG")
	echo "${value:-${2:-}}"
}

test -f "$IMAGES/bzImage" ||
	{ echo "build-stick.sh: no $IMAGES/bzImage: run build-kernel.sh first" >&2; exit 1; }

PC_MODULES=$(option BR2_TARGET_GRUB2_BUILTIN_MODULES_PC)
EFI_MODULES=$(option BR2_TARGET_GRUB2_BUILTIN_MODULES_EFI)
mkdir -p "$IMAGES/efi-part/EFI/BOOT"
# shellcheck disable=SC2086 # the module lists are lists of words
grub-mkimage -d /usr/lib/grub/i386-pc -O i386-pc -o "$IMAGES/grub.img" \
	-p "($(option BR2_TARGET_GRUB2_BOOT_PARTITION hd0,msdos1))/boot/grub" $PC_MODULES
# shellcheck disable=SC2086
grub-mkimage -d /usr/lib/grub/x86_64-efi -O x86_64-efi -o "$IMAGES/efi-part/EFI/BOOT/bootx64.efi" \
	-p /EFI/BOOT $EFI_MODULES

GRUB_VERSION=$(grub-mkimage --version | awk '{ print $NF }')
rm -rf "$BUILD"
mkdir -p "$BUILD/grub2-$GRUB_VERSION/build-i386-pc/grub-core"
cp /usr/lib/grub/i386-pc/boot.img "$BUILD/grub2-$GRUB_VERSION/build-i386-pc/grub-core/"

# As Buildroot runs a post-image script: from its top folder, with the
# images folder as argument and these in the environment.
cd "$HERE"
BR2_CONFIG=$DEFCONFIG BUILD_DIR=$BUILD BINARIES_DIR=$IMAGES SSDBENCH_RELEASE=$VERSION \
	"$TOP/board/ssdbench/post-image.sh" "$IMAGES"

# post-image.sh leaves one stick in the images folder: this build's.
ln -f "$IMAGES"/ssdbench-*.img "$OUT/stick.img"
