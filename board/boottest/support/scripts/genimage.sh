#!/bin/sh
# make test-boot's stand-in for Buildroot's support/scripts/genimage.sh,
# which board/ssdbench/post-image.sh calls by that path from Buildroot's
# top folder (build-stick.sh runs it from board/boottest/). It does what
# Buildroot's does: genimage with an empty root path, its temporary files
# in $BUILD_DIR/genimage.tmp, its inputs and outputs in $BINARIES_DIR;
# then, when $BR2_CONFIG enables host bmap-tools, a .bmap beside each
# image that the configuration names.
#
# Usage: support/scripts/genimage.sh -c GENIMAGE_CFG

set -eu

if [ "$#" -ne 2 ] || [ "$1" != "-c" ]; then
	echo "Usage: $0 -c GENIMAGE_CFG" >&2
	exit 1
fi
CFG=$2

ROOTPATH=$(mktemp -d)
trap 'rm -rf "$ROOTPATH"' EXIT
rm -rf "$BUILD_DIR/genimage.tmp"
genimage --rootpath "$ROOTPATH" --tmppath "$BUILD_DIR/genimage.tmp" \
	--inputpath "$BINARIES_DIR" --outputpath "$BINARIES_DIR" --config "$CFG"

if grep -q '^BR2_PACKAGE_HOST_BMAP_TOOLS=y$' "$BR2_CONFIG"; then
	# Temporary images are not in $BINARIES_DIR.
	sed -n 's/^image \([^ ]*\) {$/\1/p' "$CFG" | while read -r image; do
		if [ -f "$BINARIES_DIR/$image" ]; then
			bmaptool create "$BINARIES_DIR/$image" -o "$BINARIES_DIR/$image.bmap"
		fi
	done
fi
