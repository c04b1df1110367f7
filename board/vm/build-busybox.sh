#!/bin/sh
# The VM test image's BusyBox, built as the appliance's: Debian's busybox
# source package (apt-get source, from Debian's unstable, which has the
# BusyBox version Buildroot 2026.05.1 builds) with the appliance's own
# configuration, board/ssdbench/busybox.config, as it is. Only Debian's
# archive is reached, through an apt configuration of its own in OUT.d:
# the host's apt is left alone.
#
# Usage: build-busybox.sh OUT (the busybox program)
set -eu

TOP=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
WORK=$OUT.d
CONFIG=$TOP/board/ssdbench/busybox.config
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

rm -rf "$WORK"
mkdir -p "$WORK/lists/partial" "$WORK/cache/archives/partial" "$WORK/sources.list.d"
echo "deb-src $MIRROR unstable main" > "$WORK/sources.list"
set -- -o Dir::Etc::SourceList="$WORK/sources.list" -o Dir::Etc::SourceParts="$WORK/sources.list.d" \
	-o Dir::State::Lists="$WORK/lists" -o Dir::Cache="$WORK/cache"
apt-get "$@" update -qq
(cd "$WORK" && apt-get "$@" -o APT::Sandbox::User=root source -qq busybox > "$WORK/source.log" 2>&1) || {
	cat "$WORK/source.log" >&2
	exit 1
}
SRC=$(find "$WORK" -mindepth 1 -maxdepth 1 -type d -name 'busybox-*')
[ -d "$SRC" ] || { echo "build-busybox.sh: apt-get source busybox gave no source tree" >&2; exit 1; }

# The configuration is whole for its BusyBox version: make oldconfig (as
# Buildroot runs it) keeps it as it is. Another version of Debian's source
# may add symbols; they are shown, with their defaults, but the VM still
# builds, so that a new upload to unstable does not stop the tests.
WANTED=$(sed -n 's/^# ssdbench: .*Busybox version: //p' "$CONFIG")
HAVE=$(sed -n 's/^VERSION = //p;s/^PATCHLEVEL = //p;s/^SUBLEVEL = //p' "$SRC/Makefile" | paste -sd.)
cp "$CONFIG" "$SRC/.config"
yes '' | make -C "$SRC" oldconfig > "$WORK/oldconfig.log" 2>&1
settings() {
	grep -E '^(CONFIG_|# CONFIG_[A-Za-z0-9_]+ is not set$)' "$1" | sort
}
settings "$SRC/.config" > "$WORK/config.sorted"
if ! settings "$CONFIG" | diff - "$WORK/config.sorted" > "$WORK/config.diff"; then
	echo "build-busybox.sh: WARNING: BusyBox $HAVE is not $WANTED, the version of board/ssdbench/busybox.config;" \
		"make oldconfig changed these settings:" >&2
	sed 's/^/  /' "$WORK/config.diff" >&2
fi
make -C "$SRC" -j"$(nproc)" busybox > "$WORK/make.log" 2>&1 || {
	tail -40 "$WORK/make.log" >&2
	exit 1
}
echo "build-busybox.sh: BusyBox $HAVE from $(basename "$SRC") ($(sed -n 's/^Version: //p' "$WORK"/*.dsc))," \
	"$("$SRC/busybox" --list | wc -l) applets"
cp "$SRC/busybox" "$OUT.part"
mv "$OUT.part" "$OUT"
rm -rf "$WORK"
