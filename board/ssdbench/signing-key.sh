#!/bin/sh
# The key that signs what shim starts on the stick (GRUB and the kernel),
# for a boot with Secure Boot on: shim (signed by Microsoft) trusts what
# this key signs once its certificate is in MokList, enrolled through
# MokManager from the stick's ENROLL_THIS_KEY_IN_MOKMANAGER.cer.
#
# Usage: signing-key.sh DIR
# Prints two lines: the private key's path, the certificate's (PEM).
# With SSDBENCH_SIGNING_KEY and SSDBENCH_SIGNING_CERT set, those: every
# stick signed by that key boots once its certificate is enrolled. Without
# them, a throwaway key made in DIR once (kept there: the sticks of the
# same build folder share it), and a warning: a tester must enroll it again
# for each build folder. DIR is a build folder (git-ignored): private keys
# never go into the repository, the image or a bundle.

set -eu

DIR=$1
if [ -n "${SSDBENCH_SIGNING_KEY:-}" ] || [ -n "${SSDBENCH_SIGNING_CERT:-}" ]; then
	for f in "${SSDBENCH_SIGNING_KEY:?SSDBENCH_SIGNING_CERT needs SSDBENCH_SIGNING_KEY}" \
		"${SSDBENCH_SIGNING_CERT:?SSDBENCH_SIGNING_KEY needs SSDBENCH_SIGNING_CERT}"; do
		[ -r "$f" ] || { echo "signing-key.sh: cannot read $f" >&2; exit 1; }
	done
	echo "$SSDBENCH_SIGNING_KEY"
	echo "$SSDBENCH_SIGNING_CERT"
	exit 0
fi
mkdir -p "$DIR"
if [ ! -f "$DIR/signing.key" ] || [ ! -f "$DIR/signing.crt" ]; then
	# MokManager takes RSA 2048 with SHA-256; ten years, as a stick lives.
	(umask 077 && openssl req -quiet -new -x509 -newkey rsa:2048 -sha256 -nodes -days 3650 \
		-subj "/CN=ssdbench throwaway signing key $(date -u +%Y-%m-%d)/" \
		-keyout "$DIR/signing.key" -out "$DIR/signing.crt" 2>/dev/null)
fi
{
	echo "signing-key.sh: WARNING: no SSDBENCH_SIGNING_KEY and SSDBENCH_SIGNING_CERT:"
	echo "  signing with a throwaway key, $DIR/signing.key. A stick signed by it boots"
	echo "  with Secure Boot on only once its certificate is enrolled in MokManager,"
	echo "  and no stick of another build folder shares it."
} >&2
echo "$DIR/signing.key"
echo "$DIR/signing.crt"
