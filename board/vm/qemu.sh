#!/bin/sh
# Boots the VM test image in QEMU, as the appliance boots on a testbed:
# the stick on USB, an NVMe drive and a SATA drive (AHCI) to test, one
# network card. Used by make demo and make test-vm.
#
# The VM has no GRUB: QEMU loads the kernel and the initramfs itself, from
# the build directory (the same files as on the stick's FAT partition), and
# passes the kernel command line. The root file system is the initramfs, as
# on the appliance: nothing to mount at boot, and under emulation unpacking
# it from RAM is much faster than reading a root file system through the
# emulated USB stick.
#
# Usage: qemu.sh IMAGE_DIR DISK_DIR [QEMU OPTION...]
#   IMAGE_DIR  holds vmlinuz and initrd.img (make vm-image)
#   DISK_DIR   holds stick.img (a copy of the built one: the VM writes to
#              it), nvme.img and sata.img (made here if missing, sparse)
# Environment: SSDBENCH_PIN (the login PIN), SSDBENCH_HOST_PORT (the host
# port forwarded to the web UI, default 8080), SSDBENCH_APPEND (more
# kernel command line), SSDBENCH_TAP (the network card on this tap device
# instead of QEMU's user network, which then is not there: no forwarded
# port), SSDBENCH_STICK (the stick's drive as QEMU opens it, such as
# nbd:unix:SOCKET for a stick served by the test, instead of stick.img,
# which still gives its FAT's UUID). The rest of the command line is
# grub.cfg's. The NVMe controller is nvme0: a test can add a
# namespace to it (-device nvme-ns,bus=nvme0,nsid=2,...).
set -eu

IMAGE_DIR=$1
DISK_DIR=$2
shift 2
# Small drives keep the smoke suite short: its fill covers the whole drive.
DRIVE_SIZE=2G

for drive in nvme sata; do
	if [ ! -f "$DISK_DIR/$drive.img" ]; then
		truncate -s "$DRIVE_SIZE" "$DISK_DIR/$drive.img"
	fi
done

# On a PC, GRUB passes the UUID of the partition it booted from
# (grub.cfg): the appliance's stick is the disk that holds it.
STICK_UUID=$(blkid -p -O 1048576 -o value -s UUID "$DISK_DIR/stick.img")

if [ -n "${SSDBENCH_TAP:-}" ]; then
	NIC="tap,ifname=$SSDBENCH_TAP,script=no,downscript=no,model=virtio-net-pci"
else
	# to the address DHCP gives, or to SSDBENCH_GUEST_ADDRESS (a fixed one)
	NIC="user,model=virtio-net-pci,hostfwd=tcp:127.0.0.1:${SSDBENCH_HOST_PORT:-8080}-${SSDBENCH_GUEST_ADDRESS:-}:80"
fi

# TCG, never KVM: the same on every machine, CI included. usb-storage
# waits a second per device by default before it scans.
# The SATA model fills all 40 characters of ATA IDENTIFY: the SCSI INQUIRY
# string that sysfs and lsblk show holds only 16 of them.
SATA_MODEL="SSDB-SATA-SSD 1TB MODEL NAME OF 40 CHARS"
exec qemu-system-x86_64 -accel tcg -m 1024 -smp 2 \
	-nodefaults -no-user-config -display none \
	-kernel "$IMAGE_DIR/vmlinuz" -initrd "$IMAGE_DIR/initrd.img" \
	-append "console=ttyS0,115200 net.ifnames=0 ssdbench.stick=$STICK_UUID iommu=pt usb-storage.delay_use=0 ${SSDBENCH_PIN:+ssdbench.pin=$SSDBENCH_PIN} ${SSDBENCH_APPEND:-}" \
	-device qemu-xhci,id=xhci \
	-drive if=none,id=stick,file="${SSDBENCH_STICK:-$DISK_DIR/stick.img}",format=raw \
	-device usb-storage,bus=xhci.0,drive=stick,serial=SSDBENCH-STICK \
	-drive if=none,id=nvme,file="$DISK_DIR/nvme.img",format=raw,discard=unmap \
	-device nvme,id=nvme0,drive=nvme,serial=SSDB-NVME-0001 \
	-device ahci,id=ahci \
	-drive if=none,id=sata,file="$DISK_DIR/sata.img",format=raw,discard=unmap \
	-device ide-hd,bus=ahci.0,drive=sata,model="$SATA_MODEL",serial=SSDB-SATA-0001,rotation_rate=1 \
	-nic "$NIC" \
	"$@"
