#!/bin/sh
# make test-boot: the stand-in for the kernel that Buildroot builds for the
# release image. Debian's Linux source (linux-source-6.1), configured the
# way Buildroot's linux package configures it from
# configs/ssdbench_x86_64_defconfig: the kernel's defconfig, the
# defconfig's fragments merged into it, then Buildroot's fixups (the
# kernel compression the defconfig names, and images/rootfs.cpio as the
# built-in initramfs). rootfs.cpio is the VM image's root file system
# (make vm-image), so the stand-in bzImage, like the appliance's, holds
# the whole system and boots with no initrd.
#
# Usage: build-kernel.sh LINUX_TARBALL ROOTFS OUT
#   LINUX_TARBALL  /usr/src/linux-source-6.1.tar.xz
#   ROOTFS         build/vm/initrd.img: a zstd-compressed cpio
#   OUT            the kernel tree goes to OUT/linux, unpacked and built
#                  once, then only relinked; OUT/images gets rootfs.cpio
#                  and bzImage

set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
TARBALL=$1
ROOTFS=$2
OUT=$(mkdir -p "$3" && cd "$3" && pwd)
LINUX=$OUT/linux
IMAGES=$OUT/images
DEFCONFIG=$TOP/configs/ssdbench_x86_64_defconfig

# A string option of the defconfig, without its quotes, the external
# tree's path put in.
option() {
	sed -n "s/^$1=\"\(.*\)\"\$/\1/p" "$DEFCONFIG" | sed "s|\$(BR2_EXTERNAL_SSDBENCH_PATH)|$TOP|g"
}

# A new tarball (a Debian update) starts a new tree.
if [ ! -f "$LINUX/.unpacked" ] || [ "$TARBALL" -nt "$LINUX/.unpacked" ]; then
	rm -rf "$LINUX" "$LINUX.part"
	mkdir -p "$LINUX.part"
	tar -xf "$TARBALL" -C "$LINUX.part" --strip-components=1
	touch "$LINUX.part/.unpacked"
	mv "$LINUX.part" "$LINUX"
fi

mkdir -p "$IMAGES"
zstd -q -d -c "$ROOTFS" > "$IMAGES/rootfs.cpio.part"
mv "$IMAGES/rootfs.cpio.part" "$IMAGES/rootfs.cpio"

# Buildroot gives the kernel's make the images folder as BR_BINARIES_DIR:
# the initramfs source names it. The compiler's temporary files stay here,
# out of other programs' way in /tmp.
export BR_BINARIES_DIR="$IMAGES" TMPDIR="$OUT/tmp"
mkdir -p "$TMPDIR"
kmake() {
	make -C "$LINUX" -s "$@"
}

kmake "$(option BR2_LINUX_KERNEL_DEFCONFIG)_defconfig"
# shellcheck disable=SC2046 # the fragments are a list of paths without blanks
"$LINUX/scripts/kconfig/merge_config.sh" -m -O "$LINUX" "$LINUX/.config" \
	$(option BR2_LINUX_KERNEL_CONFIG_FRAGMENT_FILES) > /dev/null
kmake olddefconfig

# Buildroot's fixups (linux/linux.mk), those that apply to this defconfig.
# The compression: the one the defconfig chooses (gzip, the first of
# Buildroot's choice, if none), the others off.
COMPRESSION=$(sed -n 's/^BR2_LINUX_KERNEL_\(GZIP\|LZ4\|LZMA\|LZO\|XZ\|ZSTD\|UNCOMPRESSED\)=y$/\1/p' "$DEFCONFIG")
for c in GZIP LZ4 LZMA LZO XZ ZSTD UNCOMPRESSED; do
	"$LINUX/scripts/config" --file "$LINUX/.config" --disable "KERNEL_$c"
done
# shellcheck disable=SC2016 # the kernel's make expands ${BR_BINARIES_DIR}
"$LINUX/scripts/config" --file "$LINUX/.config" --enable "KERNEL_${COMPRESSION:-GZIP}" \
	--set-str INITRAMFS_SOURCE '${BR_BINARIES_DIR}/rootfs.cpio' \
	--set-val INITRAMFS_ROOT_UID 0 --set-val INITRAMFS_ROOT_GID 0
kmake olddefconfig

kmake -j "$(nproc)" bzImage
cp "$LINUX/arch/x86/boot/bzImage" "$IMAGES/bzImage"
