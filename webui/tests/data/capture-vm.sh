#!/bin/bash
# Provenance of the VM-captured parser fixtures in this directory.
#
# Boots a stock Debian kernel in QEMU (TCG) with an emulated NVMe, AHCI SATA
# and USB mass-storage disk, runs nvme-cli / smartctl / hdparm / lsblk inside
# the guest and writes their literal stdout here.  Documentation only: the
# test suite never runs it.
#
# Needs (Debian 12, root): qemu-system-x86, busybox-static, cpio, kmod,
# fdisk, dosfstools, udev, nvme-cli, smartmontools, hdparm, util-linux.
#
# Usage: sudo ./capture-vm.sh [OUTDIR]     (OUTDIR defaults to this directory)
set -euo pipefail

OUT=$(realpath "${1:-$(dirname "$0")}")
WORK=$(mktemp -d /tmp/ssdbench-capture.XXXXXX)
ROOT=$WORK/initramfs
echo "scratch dir: $WORK"

# --- Kernel --------------------------------------------------------------
# The host kernel may have no modules (containers), so boot the current
# Debian 12 kernel instead; its drivers are modules we load ourselves.
KPKG=${KPKG:-$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')}
# _apt cannot write into a mktemp dir (mode 0700).
chmod 755 "$WORK"
mkdir -m 777 "$WORK/deb"
(cd "$WORK/deb" && apt-get download "$KPKG")
dpkg-deb -x "$WORK"/deb/"$KPKG"_*.deb "$WORK/kernel"
KVER=${KPKG#linux-image-}
# The .deb ships no modules.dep (postinst generates it); we need it to
# resolve the dependency order.
depmod -b "$WORK/kernel" "$KVER"

# --- Initramfs -----------------------------------------------------------
mkdir -p "$ROOT"/{bin,sbin,etc,proc,sys,dev,run,tmp,mnt/usb,lib64,modules}
cp /bin/busybox "$ROOT/bin/busybox"
ln -s busybox "$ROOT/bin/sh"
ln -s /proc/self/mounts "$ROOT/etc/mtab"
# udev rules name groups such as "disk"; without these files udevd warns.
cp /etc/passwd /etc/group "$ROOT/etc/"

# Host binaries plus every shared library ldd reports, at the same paths,
# so the guest runs exactly the tool versions installed on the host.
# udevadm doubles as systemd-udevd: a real system has the udev database
# that lsblk reads SERIAL, FSTYPE and PTTYPE from, so we run udev too.
BINS="/usr/sbin/nvme /usr/sbin/smartctl /usr/sbin/hdparm /usr/bin/lsblk
      /bin/udevadm /lib/udev/ata_id /lib/udev/scsi_id"
for b in $BINS; do
    mkdir -p "$ROOT$(dirname "$b")"
    cp -L "$b" "$ROOT$b"
    for lib in $(ldd "$b" | grep -o '/[^ ]*'); do
        mkdir -p "$ROOT$(dirname "$lib")"
        cp -L "$lib" "$ROOT$lib"
    done
done
ln -s /bin/udevadm "$ROOT/bin/systemd-udevd"
# Only the udev package's own rules: others (e.g. hdparm's) would change
# drive settings behind our back.
mkdir -p "$ROOT/lib/udev/rules.d"
cp $(dpkg -L udev | grep '^/lib/udev/rules.d/.*\.rules$') "$ROOT/lib/udev/rules.d/"
# smartctl reads its updatable drive database from here, as on the host.
if [ -f /var/lib/smartmontools/drivedb/drivedb.h ]; then
    mkdir -p "$ROOT/var/lib/smartmontools/drivedb"
    cp /var/lib/smartmontools/drivedb/drivedb.h "$ROOT/var/lib/smartmontools/drivedb/"
fi

# Modules in insmod order.  Two groups so that the AHCI disk is always
# probed (sda) before the USB disk (sdb).  The *_generic crypto modules are
# not hard dependencies but back the CRC algorithms t10-pi asks for.
GROUP1="crc64_rocksoft_generic crct10dif_generic nvme ahci sd_mod"
GROUP2="xhci-pci usb-storage uas vfat nls_cp437 nls_ascii"
modlist() {
    for m in "$@"; do
        modprobe -d "$WORK/kernel" -S "$KVER" --show-depends "$m"
    done | awk '$1 == "insmod" && !seen[$2]++ {print $2}'
}
for g in 1 2; do
    eval mods=\$GROUP$g
    for path in $(modlist $mods); do
        # group 2 shares scsi_mod etc. with group 1; load each module once
        [ -e "$ROOT/modules/$(basename "$path")" ] && continue
        cp "$path" "$ROOT/modules/"
        echo "$(basename "$path")" >> "$ROOT/modules/group$g"
    done
done

# The guest side.  Every output goes base64-encoded between marker lines on
# the second serial port (ttyS1), so kernel messages on the console (ttyS0)
# and tty newline translation cannot corrupt the bytes.
cat > "$ROOT/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /run

waitfor() {  # device node, seconds
    i=0
    while [ ! -b "$1" ] && [ $i -lt $2 ]; do sleep 1; i=$((i+1)); done
    [ -b "$1" ] || echo "SSDB: timeout waiting for $1"
}
load() { for m in $(cat /modules/$1); do insmod /modules/$m || echo "SSDB: insmod $m failed"; done; }

load group1
waitfor /dev/nvme0n1 120
waitfor /dev/sda 120
load group2
waitfor /dev/sdb1 180

# A mounted partition makes lsblk's MOUNTPOINTS column non-null.
mount -t vfat -o ro /dev/sdb1 /mnt/usb

CAP=/dev/ttyS1
stty -F $CAP raw -echo
emit() {  # name rc
    { echo "@@SSDB-BEGIN $1@@"; base64 /tmp/out
      echo "@@SSDB-STDERR $1@@"; base64 /tmp/err
      echo "@@SSDB-END $1 rc=$2@@"; } > $CAP
}
cap() {  # name cmd...: stdout only
    n=$1; shift
    "$@" > /tmp/out 2> /tmp/err; emit "$n" $?
}
cap_merged() {  # name cmd...: stdout and stderr interleaved
    n=$1; shift
    "$@" > /tmp/out 2>&1; rc=$?; : > /tmp/err; emit "$n" $rc
}

show() {  # print path=contents, or <missing>
    if [ -e "$1" ]; then echo "$1=$(cat "$1" 2>/dev/null || echo '<unreadable>')"
    else echo "$1=<missing>"; fi
}
link() {  # print path=resolved target
    if [ -e "$1" ]; then echo "$1=$(readlink -f "$1")"; else echo "$1=<missing>"; fi
}
sysfs_dump() {
    for d in nvme0n1 sda sdb; do
        b=/sys/class/block/$d
        link $b
        for f in size removable queue/logical_block_size queue/physical_block_size \
                 queue/rotational queue/discard_max_bytes queue/scheduler \
                 device/model device/serial device/firmware_rev device/vendor device/rev; do
            show $b/$f
        done
    done
    for f in model serial firmware_rev; do show /sys/class/nvme/nvme0/$f; done
    link /sys/class/nvme/nvme0/device
    pci=$(readlink -f /sys/class/nvme/nvme0/device)
    for f in current_link_speed current_link_width max_link_speed max_link_width; do
        show $pci/$f
    done
    for l in /sys/class/ata_link/*; do show $l/sata_spd; show $l/sata_spd_limit; done
    for h in /sys/class/hwmon/hwmon*; do link $h; show $h/name; done
    for h in /sys/class/scsi_host/host*; do show $h/link_power_management_policy; done
}
testbed_dump() {  # what the run records of the testbed: the PCI devices above the drives, their
                  # interrupts and where those go, the kernel's view of each write cache, ASPM,
                  # and each function's PCIe link (speed, width, the L-states enabled on it)
    show /proc/cmdline
    show /sys/module/pcie_aspm/parameters/policy
    for d in nvme0n1 sda sdb; do link /sys/class/block/$d; show /sys/class/block/$d/queue/write_cache; done
    for s in /sys/class/scsi_disk/*; do show $s/cache_type; done
    for p in /sys/bus/pci/devices/*; do
        link $p
        for f in class vendor device irq numa_node local_cpulist \
                 current_link_speed current_link_width max_link_speed max_link_width; do
            show $p/$f
        done
        for a in $p/link/*_aspm; do show $a; done
        link $p/driver
        link $p/iommu_group
        if [ -d $p/msi_irqs ]; then echo "$p/msi_irqs=$(ls $p/msi_irqs | sort -n | tr '\n' ' ')"
        else echo "$p/msi_irqs=<missing>"; fi
    done
    for i in /proc/irq/[0-9]*; do show $i/smp_affinity_list; done
}

echo "SSDB: uptime before capture: $(cat /proc/uptime)"
cap nvme-list.json           nvme list -o json
cap nvme-id-ctrl.json        nvme id-ctrl /dev/nvme0 -o json
cap nvme-id-ns.json          nvme id-ns /dev/nvme0n1 -o json
cap nvme-smart-log.json      nvme smart-log /dev/nvme0 -o json
cap_merged nvme-get-feature-apst.txt nvme get-feature /dev/nvme0 -f 0x0c -H
cap smartctl-nvme.json       smartctl -j -a /dev/nvme0
cap smartctl-sata.json       smartctl -j -a /dev/sda
cap smartctl-sata-x.json     smartctl -j -x /dev/sda
# QEMU's disk has no host-writes attribute.  -v ID,FORMAT,NAME names an
# attribute exactly as smartctl's drive database does for a known model,
# and the name is what says the unit.  Attribute 4 has raw value 100 in
# QEMU, so each unit's multiplier shows in the bytes.
cap smartctl-sata-x-lbas.json    smartctl -j -x -v 4,raw48,Total_LBAs_Written /dev/sda
cap smartctl-sata-x-32mib.json   smartctl -j -x -v 4,raw48,Host_Writes_32MiB /dev/sda
cap smartctl-sata-x-mib.json     smartctl -j -x -v 4,raw48,Host_Writes_MiB /dev/sda
cap smartctl-sata-x-gib.json     smartctl -j -x -v 4,raw48,Lifetime_Writes_GiB /dev/sda
cap smartctl-sata-x-gb.json      smartctl -j -x -v 4,raw48,Total_Writes_GB /dev/sda
cap smartctl-sata-x-nounit.json  smartctl -j -x -v 4,raw48,Host_Writes /dev/sda
cap smartctl-sata-x-nounit2.json smartctl -j -x -v 4,raw48,Total_Host_Writes /dev/sda
# A NAND counter listed before the host one, as on drives with both.
cap smartctl-sata-x-nand.json    smartctl -j -x -v 4,raw48,NAND_Writes_1GiB -v 9,raw48,Host_Writes_GiB /dev/sda
# A counter without a unit before one with, as on OCZ drives with 232
# Lifetime_Writes and smartctl's default name for 241.
cap smartctl-sata-x-two.json     smartctl -j -x -v 4,raw48,Lifetime_Writes -v 9,raw48,Total_LBAs_Written /dev/sda
cap smartctl-usb.json        smartctl -j -a /dev/sdb
# The same bridge with SAT passthrough forced: QEMU's usb-storage has no
# ATA PASS-THROUGH, as many cheap bridges, so only the bridge's identity.
cap smartctl-usb-sat.json    smartctl -j -a -d sat /dev/sdb
# ATA IDENTIFY as the kernel's SAT layer hands it out (VPD page 89h), read
# from sysfs without any tool (usb-storage reads no VPD page at all).
cap vpd-pg89-sata.bin        cat /sys/class/block/sda/device/vpd_pg89
cap hdparm-I-sata.txt        hdparm -I /dev/sda
# Once without the udev database (as in a bare container), then with it.
cap lsblk-noudev.json        lsblk -J -b -o NAME,KNAME,PATH,TYPE,SIZE,MODEL,SERIAL,REV,TRAN,LOG-SEC,PHY-SEC,ROTA,DISC-MAX,MOUNTPOINTS,FSTYPE,PTTYPE,HOTPLUG,RM,PKNAME,SUBSYSTEMS
systemd-udevd --daemon
udevadm trigger --action=add --type=subsystems
udevadm trigger --action=add --type=devices
udevadm settle --timeout=120 || echo "SSDB: udevadm settle timed out"
cap lsblk.json               lsblk -J -b -o NAME,KNAME,PATH,TYPE,SIZE,MODEL,SERIAL,REV,TRAN,LOG-SEC,PHY-SEC,ROTA,DISC-MAX,MOUNTPOINTS,FSTYPE,PTTYPE,HOTPLUG,RM,PKNAME,SUBSYSTEMS
cap sysfs-vm.txt             sysfs_dump
# The testbed: each drive's volatile write cache as nvme-cli (feature 6) and hdparm show it, as QEMU
# starts it (on), then turned off and shown again, then back on; and the sysfs the run reads of it.
cap nvme-get-feature-vwc.txt nvme get-feature /dev/nvme0 -f 6
cap_merged nvme-set-feature-vwc-off.txt nvme set-feature /dev/nvme0 -f 6 -v 0
cap nvme-get-feature-vwc-off.txt nvme get-feature /dev/nvme0 -f 6
nvme set-feature /dev/nvme0 -f 6 -v 1 > /dev/null 2>&1 || echo "SSDB: nvme set-feature -f 6 -v 1 failed"
cap hdparm-W-sata.txt        hdparm -W /dev/sda
cap_merged hdparm-W0-sata.txt hdparm -W0 /dev/sda
cap hdparm-W-sata-off.txt    hdparm -W /dev/sda
hdparm -W1 /dev/sda > /dev/null 2>&1 || echo "SSDB: hdparm -W1 failed"
cap sysfs-testbed.txt        testbed_dump
# The NVMe counters again after the host wrote 64 MiB, so that they are
# not 0.  Last, so that every output above shows a disk never written to.
dd if=/dev/zero of=/dev/nvme0n1 bs=1M count=64 conv=fsync 2> /dev/null \
    || echo "SSDB: dd to /dev/nvme0n1 failed"
cap nvme-smart-log-64mib.json nvme smart-log /dev/nvme0 -o json
cap smartctl-nvme-x-64mib.json smartctl -j -x /dev/nvme0
# diag-* outputs are kept in the scratch dir only, to explain the others.
cap diag-hdparm-V.txt        hdparm -V
cap diag-smartctl-sata-x.txt smartctl -x /dev/sda
cap diag-udev-sda.txt        udevadm info --query=property /dev/sda
cap diag-udev-sdb.txt        udevadm info --query=property /dev/sdb
cap diag-udev-sdb1.txt       udevadm info --query=property /dev/sdb1
cap diag-udev-nvme0n1.txt    udevadm info --query=property /dev/nvme0n1
echo "@@SSDB-DONE@@" > $CAP
echo "SSDB: uptime after capture: $(cat /proc/uptime)"
umount /mnt/usb
poweroff -f
EOF
chmod 755 "$ROOT/init"
(cd "$ROOT" && find . | cpio -o -H newc --quiet | gzip -1) > "$WORK/initramfs.cpio.gz"

# --- Disks ---------------------------------------------------------------
truncate -s 1G "$WORK/nvme.img"
truncate -s 1G "$WORK/sata.img"
truncate -s 256M "$WORK/usb.img"
# USB stick: MBR with one FAT32 partition, like a typical flash drive.  The
# filesystem is made in a separate file and spliced in, so no loop device
# is needed.  Fixed disk and volume ids keep udev/lsblk output stable.
printf 'label: dos\nlabel-id: 0x55db0001\nstart=2048, type=c\n' | sfdisk --quiet "$WORK/usb.img"
start=2048
sectors=$(( $(stat -c %s "$WORK/usb.img") / 512 - start ))
truncate -s $((sectors * 512)) "$WORK/usb-part.img"
mkfs.vfat -F 32 -n SSDBUSB -i 55DB0001 "$WORK/usb-part.img" > /dev/null
dd if="$WORK/usb-part.img" of="$WORK/usb.img" bs=512 seek=$start conv=notrunc,sparse status=none

# --- Boot ----------------------------------------------------------------
# TCG only: KVM is not assumed to work.  q35 + a PCIe root port gives the
# NVMe controller a real PCIe link (current_link_speed etc.).  -nodefaults
# avoids q35's default CD-ROM and NIC, which would pollute the listings.
# rotation_rate=1 makes the SATA disk identify as a solid state device
# (QEMU's default 0 means "not reported", so Linux would call it rotational).
# removable=on sets the SCSI RMB bit, as most USB flash drives do.
QEMU=(qemu-system-x86_64
    -machine q35 -accel tcg -smp 2 -m 1024
    -nodefaults -display none -no-reboot
    -kernel "$WORK/kernel/boot/vmlinuz-$KVER"
    -initrd "$WORK/initramfs.cpio.gz"
    -append "console=ttyS0 panic=-1"
    -serial "file:$WORK/console.log"
    -serial "file:$WORK/capture.log"
    -device pcie-root-port,id=rp0,chassis=1,slot=1
    -drive "file=$WORK/nvme.img,if=none,id=nv0,format=raw"
    -device nvme,drive=nv0,serial=SSDB-NVME-0001,bus=rp0
    -device ahci,id=ahci0
    -drive "file=$WORK/sata.img,if=none,id=sd0,format=raw"
    -device ide-hd,drive=sd0,bus=ahci0.0,model=SSDB-SATA-MODEL,serial=SSDB-SATA-0001,rotation_rate=1
    -device qemu-xhci,id=xhci0
    -drive "file=$WORK/usb.img,if=none,id=us0,format=raw"
    -device usb-storage,drive=us0,serial=SSDB-USB-0001,removable=on
)
printf '%q ' "${QEMU[@]}" > "$WORK/qemu-cmdline.txt"; echo >> "$WORK/qemu-cmdline.txt"
t0=$(date +%s)
timeout 3600 "${QEMU[@]}"
echo "boot+capture took $(( $(date +%s) - t0 )) s (TCG)"

# --- Split ---------------------------------------------------------------
grep -q '^@@SSDB-DONE@@' <(tr -d '\r' < "$WORK/capture.log") \
    || { echo "capture incomplete, see $WORK/console.log" >&2; exit 1; }
mkdir -p "$WORK/split"
tr -d '\r' < "$WORK/capture.log" | awk -v dir="$WORK/split" '
    /^@@SSDB-BEGIN / { name = $2; sub(/@@$/, "", name); f = dir "/" name ".out.b64"; printf "" > f; next }
    /^@@SSDB-STDERR / { f = dir "/" name ".err.b64"; printf "" > f; next }
    /^@@SSDB-END /   { rc = $3; sub(/^rc=/, "", rc); sub(/@@$/, "", rc); print name "=" rc > (dir "/exit-codes"); f = ""; next }
    f != ""          { print > f }
'
: > "$OUT/capture-exit-codes.txt"
while IFS== read -r name rc; do
    case $name in diag-*)
        base64 -d "$WORK/split/$name.out.b64" > "$WORK/$name"; continue ;;
    esac
    base64 -d "$WORK/split/$name.out.b64" > "$OUT/$name"
    base64 -d "$WORK/split/$name.err.b64" > "$WORK/split/$name.stderr"
    echo "$name=$rc" >> "$OUT/capture-exit-codes.txt"
done < "$WORK/split/exit-codes"
echo "written to $OUT; stderr of each command in $WORK/split/*.stderr"
# $WORK (about 3 GB, mostly sparse) is kept for inspection; delete it by hand.
