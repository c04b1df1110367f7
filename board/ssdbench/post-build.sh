#!/bin/sh
# Post-build script: runs on the finished target tree ($1, the same as
# $TARGET_DIR) before the root file system image is made.
#
# Writes /etc/ssdbench-release. The release name comes from git describe,
# passed down by the top-level Makefile or external.mk as SSDBENCH_RELEASE.

set -eu

BOARD_DIR=$(cd "$(dirname "$0")" && pwd)
TARGET="${1:-$TARGET_DIR}"
RELEASE="${SSDBENCH_RELEASE:-unknown}"

# The initscripts package installs S11modules with rcS and rcK: the
# appliance's drivers are built in, and no module list exists to load.
rm -f "$TARGET/etc/init.d/S11modules"

# The init scripts the image will run are exactly the appliance's list
# (init-scripts beside this script): a package that adds a daemon or a
# timer job to the boot fails the build here, by name.
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
grep -v '^#' "$BOARD_DIR/init-scripts" | sort > "$WORK/wanted"
(cd "$TARGET/etc/init.d" && find . -maxdepth 1 -name 'S??*' | sed 's|^\./||' | sort) > "$WORK/found"
if ! unexpected=$(diff "$WORK/wanted" "$WORK/found"); then
	echo "post-build.sh: /etc/init.d differs from board/ssdbench/init-scripts" \
		"(< listed but missing, > present but not listed):" >&2
	echo "$unexpected" | grep '^[<>]' >&2
	exit 1
fi
echo "post-build.sh: init scripts: $(grep -v '^#' "$BOARD_DIR/init-scripts" | paste -sd ' ' -)"

# A build ID: when this image was built (UTC), or SOURCE_DATE_EPOCH for a
# reproducible build.
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
	BUILD_ID=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%dT%H%M%SZ)
else
	BUILD_ID=$(date -u +%Y%m%dT%H%M%SZ)
fi

cat > "$TARGET/etc/ssdbench-release" <<RELEASE
NAME=ssdbench
VERSION=$RELEASE
BUILD_ID=$BUILD_ID
BUILDROOT_VERSION=${BR2_VERSION:-unknown}
RELEASE
chmod 0644 "$TARGET/etc/ssdbench-release"
