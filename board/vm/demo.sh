#!/bin/sh
# make demo: the appliance in QEMU, with an NVMe and a SATA drive to test.
# The stick and the drives live in IMAGE_DIR/demo/ (make copies the stick
# there) and keep their results from one demo to the next; delete that
# folder to start afresh.
#
# Usage: demo.sh IMAGE_DIR
set -eu

IMAGE_DIR=$1
DISKS=$IMAGE_DIR/demo
PORT=${SSDBENCH_HOST_PORT:-8080}
# A new random PIN each start, unless one is given (make demo SSDBENCH_PIN=123456).
SSDBENCH_PIN=${SSDBENCH_PIN:-$(od -An -N4 -tu4 /dev/urandom | awk '{ printf "%06d", $1 % 1000000 }')}
export SSDBENCH_PIN SSDBENCH_HOST_PORT="$PORT"

cat <<INFO
================================================================
 ssdbench demo: booting the appliance in QEMU (emulated, no KVM)
 Web UI:  http://localhost:$PORT/   (ready in about a minute)
 PIN:     $SSDBENCH_PIN
 Below: the appliance's serial console. Ctrl-C stops the VM.
================================================================
INFO
exec "$(dirname "$0")/qemu.sh" "$IMAGE_DIR" "$DISKS" \
	-chardev stdio,id=console,signal=on -serial chardev:console
