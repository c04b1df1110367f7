"""make bench-vm, temperature part (not in make test-vm: it measures): bench/bench_temperature_poll.py in the VM,
brought on the bench stick, on its AHCI drive (QEMU's ide-hd on ICH9 AHCI) and its NVMe drive as the control: a
QD32 random read with and without the runner's temperature read once a second. Its table is printed and kept in
build/vm-temperature-poll.txt; what is checked is only that it measured."""

import json
import os
import subprocess

from test_vm import (
    ARTIFACTS,
    NVME,
    PIN,
    SATA,
    TOP,
    VM_DIR,
    bench_in_vm,
    bench_stick,
    by_serial,
    drives,
    mtools,
    pytestmark,  # noqa: F401 (its skip without a VM image)
    qemu,
)

BENCH = os.path.join(TOP, "webui", "bench", "bench_temperature_poll.py")
TABLE = os.path.join(TOP, "build", "vm-temperature-poll.txt")
PAIRS, SECONDS = 4, 10
NVME_CONTROLLER = "/dev/nvme0"


def test_temperature_poll_on_the_vms_ahci_and_nvme_drives(tmp_path):
    """One boot on a copy of the stick, its NVMe and SATA drives empty (board/vm/qemu.sh makes them)."""
    disks = str(tmp_path)
    subprocess.run(["cp", "--sparse=always", os.path.join(VM_DIR, "stick.img"), disks], check=True)
    img, extra = bench_stick(disks, BENCH)
    os.makedirs(ARTIFACTS, exist_ok=True)
    log = os.path.join(ARTIFACTS, "vm-console-temperature-poll.log")
    if os.path.exists(log):
        os.unlink(log)
    vm = qemu(disks, log, extra)
    try:
        vm.boot(PIN)
        found = drives(vm)
        sata, nvme = (by_serial(found, want["serial"])["path"] for want in (SATA, NVME))
        # Each drive with the runner's source, and a control of each: the SATA drive beside the same smartctl
        # reading the NVMe drive (its host cost alone), the NVMe drive with nvme smart-log (a process too).
        measured = [sata, f"{sata}=smartctl:{NVME_CONTROLLER}", nvme, f"{nvme}=nvme-smart-log:{NVME_CONTROLLER}"]
        bench = (
            f"python3 /mnt/bench/{os.path.basename(BENCH)} --pairs {PAIRS} --seconds {SECONDS} "
            f"{' '.join(f'--drive {d}' for d in measured)} --json /mnt/bench/result.json"
        )
        # a deadline only: each run's fio takes SECONDS, and under TCG on a busy host as long again to start and end
        rc, seconds = bench_in_vm(vm, bench, timeout=len(measured) * PAIRS * 2 * SECONDS * 4)
        vm.poweroff()
    finally:
        vm.close()
    assert rc == "0", mtools("mtype", "-i", img, "::log.txt")[-3000:]
    table = mtools("mtype", "-i", img, "::table.txt")
    result = json.loads(mtools("mtype", "-i", img, "::result.json"))
    os.makedirs(os.path.dirname(TABLE), exist_ok=True)
    with open(TABLE, "w") as f:
        f.write(f"On the VM (TCG), {seconds:.0f} s in all:\n{table}")
    print(f"\ntemperature polling on the VM's drives, {seconds:.0f} s:\n{table}")
    assert [(d["path"], d["transport"], d["runners_source"]) for d in result["drives"]] == [
        (sata, "sata", True),
        (sata, "sata", False),
        (nvme, "nvme", True),
        (nvme, "nvme", False),
    ]
    for drive in result["drives"]:
        assert all(len(drive["runs"][side]) == PAIRS for side in ("without", "with")), drive
        # once a second through every run with the reads, each read a temperature
        assert drive["reads"] >= PAIRS * (SECONDS - 1) and not drive["unread"], drive
