#!/bin/sh
# Post-build script: runs on the finished target tree ($1, the same as
# $TARGET_DIR) before the root file system image is made.
#
# Writes /etc/ssdbench-release. The release name comes from git describe,
# passed down by the top-level Makefile or external.mk as SSDBENCH_RELEASE.

set -eu

TARGET="${1:-$TARGET_DIR}"
RELEASE="${SSDBENCH_RELEASE:-unknown}"

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
