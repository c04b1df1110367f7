#!/bin/sh
# Boots a USB stick image in QEMU as a PC boots it: through its firmware
# (SeaBIOS for bios, OVMF for uefi) and the boot loader on the stick, the
# stick on USB (xHCI), one network card. Used by make test-boot; with
# "-serial mon:stdio" added, it shows the boot on this terminal.
#
# Usage: qemu.sh bios|uefi|uefi-sb STICK [QEMU OPTION...]
#   STICK  the image; the VM writes to it (SSDB-DATA), so boot a copy
# Environment: SSDBENCH_HOST_PORT, the host port forwarded to the web UI
# (default 8080); SSDBENCH_STICK_BOOTINDEX, the stick's place in the
# firmware's boot order (default 0: first), for a test that puts a disk of
# its own before it; SSDBENCH_OVMF_VARS, for uefi-sb, OVMF's variables
# (Microsoft's keys enrolled, Secure Boot on: OVMF_VARS_4M.ms.fd, or a copy
# that virt-fw-vars gave a MokList).

set -eu

FIRMWARE=$1
STICK=$2
shift 2

case $FIRMWARE in
	bios)
		# QEMU's own firmware is SeaBIOS.
		;;
	uefi)
		# OVMF's variables go to a throwaway overlay: each boot starts
		# from the firmware's defaults, as on a PC never booted before.
		set -- -drive if=pflash,format=raw,unit=0,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd \
			-drive if=pflash,format=raw,unit=1,snapshot=on,file=/usr/share/OVMF/OVMF_VARS_4M.fd "$@";;
	uefi-sb)
		# OVMF with Secure Boot needs SMM, which QEMU's q35 machine has,
		# to keep its variables from the OS.
		set -- -machine q35,smm=on -global driver=cfi.pflash01,property=secure,value=on \
			-drive if=pflash,format=raw,unit=0,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.secboot.fd \
			-drive if=pflash,format=raw,unit=1,snapshot=on,file="${SSDBENCH_OVMF_VARS:-/usr/share/OVMF/OVMF_VARS_4M.ms.fd}" "$@";;
	*)
		echo "Usage: $0 bios|uefi|uefi-sb STICK [QEMU OPTION...]" >&2
		exit 1;;
esac

# TCG, never KVM: the same on every machine, CI included. A graphics card,
# as every PC has (GRUB and the kernel draw on it, unseen). The network
# card has no boot ROM, so that neither firmware spends time on a network
# boot.
exec qemu-system-x86_64 -accel tcg -m 1024 -smp 2 \
	-nodefaults -no-user-config -display none -device VGA \
	-device qemu-xhci,id=xhci \
	-drive if=none,id=stick,file="$STICK",format=raw \
	-device usb-storage,bus=xhci.0,drive=stick,serial=SSDBENCH-STICK,bootindex="${SSDBENCH_STICK_BOOTINDEX:-0}" \
	-netdev user,id=net,hostfwd=tcp:127.0.0.1:"${SSDBENCH_HOST_PORT:-8080}"-:80 \
	-device virtio-net-pci,netdev=net,romfile= \
	"$@"
