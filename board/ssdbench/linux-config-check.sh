#!/bin/sh
# Checks that the kernel configuration keeps every line of linux.fragment
# (beside this script), and builds in every driver of linux.required:
# Kconfig drops a symbol without a word when one of its dependencies is
# unmet or it was renamed, and a driver the appliance counts on would be
# missing from the image.
#
#   linux-config-check.sh CONFIG
#       checks a merged configuration: make image runs it on the kernel's
#       .config before building it (external.mk)
#   linux-config-check.sh --merge SOURCE
#       merges the fragment into SOURCE's x86_64_defconfig as Buildroot
#       does (merge_config.sh, then olddefconfig), then checks the result:
#       make br-check runs it. SOURCE is a kernel source tree or its
#       .tar.xz (Debian's linux-source package): only what Kconfig reads
#       is unpacked. Needs gcc, make, flex and bison.

set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
FRAGMENT=${LINUX_FRAGMENT:-$HERE/linux.fragment}
REQUIRED=$HERE/linux.required

fail() {
	echo "linux-config-check: FAILED: $*" >&2
	exit 1
}

# Every CONFIG_ line of the fragment, and every "is not set" one, must be
# in the configuration as written; every driver of linux.required =y.
check() {
	missing=$({
		grep -E '^(CONFIG_[A-Za-z0-9_]+=|# CONFIG_[A-Za-z0-9_]+ is not set$)' "$FRAGMENT"
		grep -v '^#' "$REQUIRED" | awk 'NF { print "CONFIG_" $1 "=y" }'
	} | sort -u |
		while read -r line; do
			case "$line" in
				"# "*)
					symbol=${line#"# "}
					symbol=${symbol%" is not set"}
					if grep -q "^$symbol=" "$1"; then
						echo "  $line, but $(grep "^$symbol=" "$1")"
					fi;;
				*)
					if ! grep -qxF "$line" "$1"; then
						symbol=${line%%=*}
						found=$(grep -E "^(# )?${symbol}[= ]" "$1" || true)
						echo "  $line, but ${found:-$symbol is unknown or its dependencies unmet}"
					fi;;
			esac
		done)
	if [ -n "$missing" ]; then
		echo "linux-config-check: $1 lacks what linux.fragment sets or linux.required needs:" >&2
		echo "$missing" >&2
		fail "linux.fragment does not survive the merge"
	fi
	echo "linux-config-check: ok: all $(grep -cE '^(CONFIG_|# CONFIG_)' "$FRAGMENT") lines of linux.fragment" \
		"kept in $1, and the $(grep -cv '^#' "$REQUIRED") drivers of linux.required built in"
}

merge() {
	source=$1
	work=$(mktemp -d "${TMPDIR:-/tmp}/linux-config-check.XXXXXX")
	# shellcheck disable=SC2064 # $work is fixed now
	trap "rm -rf '$work'" EXIT
	if [ -f "$source" ]; then
		# The Makefiles, the scripts (kconfig among them) and every
		# Kconfig file; nothing is compiled but kconfig itself.
		mkdir "$work/tree"
		tar -xf "$source" -C "$work/tree" --strip-components=1 --wildcards \
			'*/Makefile' '*/scripts/*' '*/arch/x86/Makefile*' '*/arch/x86/configs/*' \
			'*/arch/x86/tools/*' '*Kconfig*' '*/include/*.h' ||
			fail "$source could not be unpacked"
		source=$work/tree
	fi
	if [ ! -f "$source/Makefile" ] || [ ! -d "$source/scripts/kconfig" ]; then
		fail "$source is not a kernel source tree"
	fi
	version=$(make -s -C "$source" kernelversion 2>/dev/null || echo unknown)
	echo "linux-config-check: merging linux.fragment into Linux $version's x86_64_defconfig"
	unset MAKEFLAGS MFLAGS MAKELEVEL
	make -s -C "$source" O="$work/out" ARCH=x86_64 x86_64_defconfig > "$work/log" 2>&1 ||
		{ cat "$work/log" >&2; fail "make x86_64_defconfig"; }
	(cd "$work/out" && "$source/scripts/kconfig/merge_config.sh" -m -O . .config "$FRAGMENT") \
		> "$work/log" 2>&1 || { cat "$work/log" >&2; fail "merge_config.sh"; }
	make -s -C "$source" O="$work/out" ARCH=x86_64 olddefconfig > "$work/log" 2>&1 ||
		{ cat "$work/log" >&2; fail "make olddefconfig"; }
	check "$work/out/.config"
}

case "${1:-}" in
	--merge)
		[ "$#" -eq 2 ] || fail "usage: $0 --merge SOURCE"
		merge "$2";;
	""|-*)
		echo "Usage: $0 CONFIG | --merge SOURCE" >&2
		exit 1;;
	*)
		check "$1";;
esac
