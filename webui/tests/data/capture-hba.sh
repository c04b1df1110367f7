#!/bin/sh
# captures for webui/tests/data (issue 43, item 2): the SAS disk behind QEMU's megasas is sda, the AHCI disk sdb
# Run as /mnt/c/cap.sh in the VM test image booted with QEMU's megasas and a scsi-hd disk
# (see README.md); it writes into the cap/ folder on the stick's FAT partition.
cd /mnt/c/cap || exit 1
sg_inq /dev/sda > sg_inq-sas.txt 2>&1; echo sg_inq=$? >> rc
sg_inq --version > sg_inq-version.txt 2>&1
smartctl -j -a /dev/sda > smartctl-sas.json; echo smartctl-a=$? >> rc
smartctl -j -A /dev/sda > smartctl-sas-A.json; echo smartctl-A=$? >> rc
smartctl -j -x /dev/sda > smartctl-sas-x.json; echo smartctl-x=$? >> rc
smartctl -j -a -d sat /dev/sda > smartctl-sas-sat.json; echo smartctl-sat=$? >> rc
hdparm -I /dev/sda > hdparm-I-sas.txt 2>&1; echo hdparm=$? >> rc
cat /sys/block/sda/device/vpd_pg80 > vpd-pg80-sas.bin
cat /sys/block/sda/device/vendor > vendor-sas.txt
cat /sys/block/sdb/device/vendor > vendor-sata.txt
sg_logs --page=temp /dev/sda > sg_logs-temp-sas.txt 2>&1; echo sg_logs=$? >> rc
lsblk -J -b -o NAME,KNAME,PATH,TYPE,SIZE,MODEL,SERIAL,REV,TRAN,LOG-SEC,PHY-SEC,ROTA,DISC-MAX,MOUNTPOINTS,FSTYPE,PTTYPE,LABEL,UUID,HOTPLUG,RM,RO,PKNAME > lsblk-megasas.json
cat /sys/bus/pci/devices/0000:00:06.0/class > pci-class.txt; readlink -f /sys/bus/pci/devices/0000:00:06.0/driver >> pci-class.txt
cat /sys/block/sda/queue/discard_max_bytes > discard-sas.txt; cat /sys/block/sda/device/scsi_disk/*/provisioning_mode >> discard-sas.txt
dd if=/dev/urandom of=/dev/sda bs=1M count=1 2>/dev/null; sync
sg_sanitize --block --quick /dev/sda > sg_sanitize-sas.txt 2>&1; echo sg_sanitize=$? >> rc
sg_format --format --quick /dev/sda > sg_format-sas.txt 2>&1; echo sg_format=$? >> rc
dd if=/dev/sda bs=1M count=1 2>/dev/null | od -An -tx1 | head -2 > after-format.txt
sync
echo done >> rc
