"""make test-vm: the appliance's boot flow in QEMU (board/vm/qemu.sh), tested from the host over HTTP.

The VM image comes from make vm-image. Each test boots it on copies in a temporary folder: the stick on
USB, an NVMe and a SATA drive; the serial console goes to webui/tests/artifacts/. The two tests share the
stick and drives and run in order: the first grows the stick's SSDB-DATA and leaves two runs on them, the
second cuts the power.
"""

import json
import os
import pathlib
import re
import subprocess
import sys
import time
import zipfile

import pytest
from vm import RUN_TIMEOUT_S, VM

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VM_DIR = os.path.join(TOP, "build", "vm")
QEMU_SH = os.path.join(TOP, "board", "vm", "qemu.sh")
ARTIFACTS = os.path.join(TOP, "webui", "tests", "artifacts")
PIN = "271828"
# As board/vm/qemu.sh names them; QEMU 7.2 has no option for an NVMe model, so it is its own.
NVME = {"serial": "SSDB-NVME-0001", "model": "QEMU NVMe Ctrl", "transport": "nvme"}
# The SATA model has 40 characters, all that ATA IDENTIFY holds; lsblk shows its first 16.
SATA = {"serial": "SSDB-SATA-0001", "model": "SSDB-SATA-SSD 1TB MODEL NAME OF 40 CHARS", "transport": "sata"}
STICK_OFFSET = 1024 * 1024  # partition 1, SSDBENCH (board/vm/build-image.sh)
STICK_SIZE = "4G"  # the stick of the two tests that share it: the image is 513 MiB, SSDB-DATA 256 MiB of it

pytestmark = pytest.mark.skipif(
    not os.path.exists(os.path.join(VM_DIR, "stick.img")), reason="no VM image: make vm-image"
)


def qemu(disks, console_log, extra=(), append=""):
    """A boot of the VM image on the stick and drives in disks (board/vm/qemu.sh), with the test's PIN."""
    env = {"SSDBENCH_PIN": PIN, "SSDBENCH_APPEND": append}
    return VM([QEMU_SH, VM_DIR, disks, *extra], disks, console_log, env)


@pytest.fixture(scope="module")
def disks(tmp_path_factory):
    """The stick (a copy of the built one, on a larger stick: the rest of it is a sparse hole) and empty
    drives, for both tests."""
    folder = tmp_path_factory.mktemp("vm")
    subprocess.run(["cp", "--sparse=always", os.path.join(VM_DIR, "stick.img"), str(folder)], check=True)
    subprocess.run(["truncate", "-s", STICK_SIZE, os.path.join(folder, "stick.img")], check=True)
    return str(folder)


@pytest.fixture
def boot(disks, request):
    os.makedirs(ARTIFACTS, exist_ok=True)
    log = os.path.join(ARTIFACTS, f"vm-console-{request.node.name}.log")
    if os.path.exists(log):
        os.unlink(log)
    vms = []

    def start(*extra):
        vms.append(qemu(disks, log, extra))
        vms[-1].boot(PIN)
        return vms[-1]

    yield start
    for vm in vms:
        vm.close()


def by_serial(found, serial):
    matches = [d for d in found if d.get("serial") == serial]
    assert len(matches) == 1, f"{serial} not listed once: {[(d['path'], d.get('serial')) for d in found]}"
    return matches[0]


def drives(vm):
    status, body = vm.api("GET", "/api/drives")
    assert status == 200, body
    return body["drives"]


def second_namespace(folder):
    """A second namespace on the NVMe controller, with a FAT file system holding one file."""
    img = os.path.join(folder, "ns2.img")
    subprocess.run(["mkfs.vfat", "-C", "-n", "OTHER", img, str(32 * 1024)], check=True, capture_output=True)
    keep = os.path.join(folder, "keep.txt")
    with open(keep, "w") as f:
        f.write("another namespace's data\n")
    mtools("mcopy", "-i", img, keep, "::keep.txt")
    return img, ["-drive", f"if=none,id=ns2,file={img},format=raw", "-device", "nvme-ns,drive=ns2,bus=nvme0,nsid=2"]


def namespace_4kn(folder):
    """A namespace of 4096 B logical (and physical) blocks on the NVMe controller: a 4Kn drive. Small, as smoke
    fills it whole."""
    img = os.path.join(folder, "ns4k.img")
    subprocess.run(["truncate", "-s", "256M", img], check=True)
    return [
        "-drive",
        f"if=none,id=ns4k,file={img},format=raw,discard=unmap",
        "-device",
        "nvme-ns,drive=ns4k,bus=nvme0,nsid=2,logical_block_size=4096,physical_block_size=4096",
    ]


def busy_times(run):
    """The trace step's busy time as rebuilt from fio's logs and as the kernel counted it, for the log."""
    trace = {m["name"]: m["value"] for m in next(s for s in run["steps"] if s["kind"] == "trace")["metrics"]}
    return f"busy {trace['all.busy_s']:.3f} s rebuilt from fio's logs, {trace.get('kernel.busy_s')} s by io_ticks"


def test_boot_runs_export_and_verify(boot, disks, tmp_path):
    ns2_img, extra = second_namespace(disks)
    vm = boot(*extra)
    # The stick's first boot: SSDB-DATA, 256 MiB in the image, grew to the end of the 4 GiB stick, its
    # partition first (3839 MiB: the stick less 1 MiB before SSDBENCH and its 256 MiB), then its file system.
    console = vm.console_text()
    assert re.search(r"SSDB-DATA: partition 2 of sd[a-z] grown to the end of the stick: 256 MiB -> 3839 MiB", console)
    assert "SSDB-DATA: file system grown online: 256 MiB -> " in console and "not grown" not in console
    blocks, block = vm.shell("stat -f -c '%b %S' /var/lib/ssdbench").split()
    print(f"SSDB-DATA on a {STICK_SIZE} stick: {int(blocks) * int(block) / 1e9:.2f} GB")
    assert int(blocks) * int(block) > 3.5e9
    # Another namespace of the drive's controller in use: a purge of nvme0n1 must not reach it.
    # And the settings file, which holds the PIN, is root's alone.
    vm.shell("mount -t vfat /dev/nvme0n2 /mnt")
    assert vm.shell("stat -c %a /run/ssdbench/env") == "600"

    found = drives(vm)
    other = next(d for d in found if d["path"] == "/dev/nvme0n2")
    assert not other["eligible"] and "mounted" in other["reason"]
    found.remove(other)  # the same controller, so the same serial as nvme0n1
    assert any("nvme0n2: /dev/nvme0n2 on /mnt" in note for note in by_serial(found, NVME["serial"])["notes"])
    for want in (NVME, SATA):
        drive = by_serial(found, want["serial"])
        assert (drive["model"], drive["transport"], drive["eligible"]) == (want["model"], want["transport"], True)
    assert by_serial(found, SATA["serial"])["identity_source"] == "ATA IDENTIFY (smartctl)"
    assert by_serial(found, NVME["serial"])["identity_source"] == "NVMe Identify Controller (nvme-cli)"
    sticks = [d for d in found if d["transport"] == "usb"]
    assert len(sticks) == 1 and not sticks[0]["eligible"], sticks
    assert "boot stick" in sticks[0]["reason"]
    # QEMU's usb-storage passes no ATA command, as many bridges: its identity is the bridge's, and says so.
    assert sticks[0]["identity_source"] == "the USB bridge only (SCSI INQUIRY)"
    assert any(note.startswith("identity from the bridge only") for note in sticks[0]["notes"]), sticks[0]["notes"]

    # The status screen on the serial console: the URL (QEMU's user network gives 10.0.2.15) and the drives.
    start = vm.wait_console("Web UI: http://10.0.2.15/")
    screen = vm.console_text()[start : vm.wait_console("Press Enter for a shell.", after=start)]
    for text in (f"PIN:    {PIN}", "nvme0n1", NVME["serial"], SATA["serial"], "this is the ssdbench boot stick"):
        assert text in screen, text

    run_ids = []
    for want in (NVME, SATA):
        run_id = vm.start_run(by_serial(found, want["serial"]))
        state, seconds = vm.wait_run(run_id)
        print(f"smoke on {want['transport']}: {state} in {seconds:.0f} s; {busy_times(vm.run(run_id))}")
        assert state == "done", vm.run(run_id)["error"]
        run_ids.append(run_id)
    # QEMU formats one namespace at a time (FNA 0): Format is used, and says nothing of nvme0n2.
    nvme_run = vm.run(run_ids[0])
    purge = next(s for s in nvme_run["steps"] if s["kind"] == "purge")["detail"]
    print(f"NVMe purge with nvme0n2 mounted: {purge['method']}; attempts {purge['attempts']}")
    assert purge["method"] == "NVMe Format NVM, user data erase"
    # QEMU's NVMe reports a temperature: it is sampled beside the steps, once a second, through the purge and
    # the TRIM too, where no fio status ticks. A step of 2 s or more holds a point; a shorter one may fall
    # between two, and is then covered by the rule for the whole: no gap over 5 s (TCG is slow) from the first
    # step's start to the last one's end.
    temperature = [s for s in nvme_run["series"] if s["step_id"] is None and s["name"] == "temperature"]
    assert len(temperature) == 1 and temperature[0]["x"], temperature
    xs = temperature[0]["x"]

    def at_ms(t):
        return (t - nvme_run["started_at"]) * 1000

    for step in (s for s in nvme_run["steps"] if s["kind"] in ("purge", "trim")):
        start, end = at_ms(step["started_at"]), at_ms(step["finished_at"])
        inside = [x for x in xs if start <= x <= end]
        print(f"NVMe {step['key']}: {end - start:.0f} ms, {len(inside)} temperature points inside")
        assert inside or end - start < 2000, (step["key"], start, end, xs)
    edges = sorted([at_ms(nvme_run["steps"][0]["started_at"]), at_ms(nvme_run["steps"][-1]["finished_at"]), *xs])
    gap = max(b - a for a, b in zip(edges, edges[1:]))
    print(f"NVMe temperature: {len(xs)} points over the run, the longest gap {gap:.0f} ms")
    assert gap <= 5000, xs

    status, body = vm.api("POST", "/api/export", {})
    assert status == 200, body
    assert sorted(item["run"] for item in body["exported"]) == run_ids
    vm.poweroff()

    # The stick from the host, without mounting it: mtools reads its FAT partition at its offset.
    bundles = stick_bundles(os.path.join(disks, "stick.img"), str(tmp_path / "results"))
    assert len(bundles) == 2 and {b.split("_")[1] for b in bundles} == {NVME["serial"], SATA["serial"]}, bundles
    assert mtools("mtype", "-i", ns2_img, "::keep.txt") == "another namespace's data\n"


def stick_bundles(stick_img, folder):
    """The bundles on the stick's FAT partition, copied out with mtools (no mount), each checked by verify."""
    fat = f"{stick_img}@@{STICK_OFFSET}"
    os.makedirs(folder)
    subprocess.run(
        ["mcopy", "-s", "-n", "-i", fat, "::/ssdbench-results", folder],
        check=True,
        env={**os.environ, "MTOOLS_SKIP_CHECK": "1"},
    )
    bundles = sorted(str(p) for p in pathlib.Path(folder).rglob("*.zip"))
    for path in bundles:
        proc = subprocess.run([sys.executable, "-m", "ssdbench.cli", "verify", path], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        print(proc.stdout.strip())
        # The VM booted with ssdbench.pin=PIN: no member of any bundle names it.
        with zipfile.ZipFile(path) as zf:
            env = json.loads(zf.read("environment.json"))
            assert "ssdbench.pin=<redacted>" in env["kernel"]["cmdline"]
            leaks = [n for n in zf.namelist() if re.search(rf"(?i)pin\W{{0,3}}{PIN}", zf.read(n).decode("latin-1"))]
            assert not leaks, leaks
    return [os.path.basename(p) for p in bundles]


def mtools(*argv):
    return subprocess.run(
        argv, check=True, capture_output=True, text=True, env={**os.environ, "MTOOLS_SKIP_CHECK": "1"}
    ).stdout


def full_stick(folder, free=200_000):
    """A second USB stick: FAT on the whole device (no partition table, as many sticks come), with a filler
    file that leaves less room than a bundle needs."""
    img = os.path.join(folder, "full.img")
    subprocess.run(["mkfs.vfat", "-C", "-n", "FULL", img, str(32 * 1024)], check=True, capture_output=True)
    left = int(mtools("mdir", "-i", img, "::").strip().splitlines()[-1].split("bytes free")[0].replace(" ", ""))
    filler = os.path.join(folder, "filler")
    subprocess.run(["truncate", "-s", str(left - free), filler], check=True)
    mtools("mcopy", "-i", img, filler, "::filler")
    return img, [
        "-drive",
        f"if=none,id=full,file={img},format=raw",
        "-device",
        "usb-storage,bus=xhci.0,drive=full,serial=SSDB-FULL-STICK",
    ]


def test_power_cut_leaves_the_run_interrupted_with_its_steps(boot, disks):
    full_img, extra = full_stick(disks)
    vm = boot(*extra)
    # The stick's second boot: its SSDB-DATA already fills it, and is left alone.
    assert "Looking for the ssdbench stick: sd" in vm.console_text() and "grown" not in vm.console_text()

    # Export to a vfat stick that fills up partway through a bundle (the Debian kernel's vfat driver):
    # a clear error, and nothing left on the stick under the bundle's name or a temporary one.
    status, body = vm.api("GET", "/api/sticks")
    full = [s for s in body["sticks"] if s["label"] == "FULL"]
    assert status == 200 and len(full) == 1 and full[0]["fstype"] == "vfat", body
    status, body = vm.api("POST", "/api/export", {"runs": [1], "device": full[0]["device"]})
    assert status == 409 and "No space left on device" in body["error"], body
    print(f"export to a full vfat stick: {body['error']}")

    nvme = by_serial(drives(vm), NVME["serial"])
    run_id = vm.start_run(nvme)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while len(done := [s["key"] for s in vm.run(run_id)["steps"] if s["state"] == "done"]) < 3:
        assert vm.progress(run_id)["state"] in ("queued", "running")
        assert time.monotonic() < deadline, "the run did not get through three steps"
        time.sleep(1)
    # A step shows as done only once it is on the disk (synchronous=FULL, fio's files synced first):
    # cut the power at once.
    vm.kill()
    print(f"power cut after the steps {', '.join(done)}")

    # Booted again, with a 4Kn namespace beside the interrupted run's.
    vm = boot(*namespace_4kn(disks))
    # The runner service marks the run when it starts, which may be just after the web UI.
    deadline = time.monotonic() + 120
    while (run := vm.run(run_id))["state"] == "running" and time.monotonic() < deadline:
        time.sleep(1)
    assert run["state"] == "interrupted", run["state"]
    steps = {s["key"]: s for s in run["steps"]}
    for key in done:
        assert steps[key]["state"] == "done", steps[key]
    assert any(s["metrics"] for s in run["steps"] if s["key"] in done)
    assert "interrupted" in [s["state"] for s in run["steps"]]

    # And fio's own files of those steps survived too.
    for key in done:
        if steps[key]["job_file"]:
            assert vm.file_status(run_id, f"{os.path.basename(steps[key]['out_dir'])}/fio.json") == 200, key

    # Then smoke to the end, on the 4Kn namespace: the trace's 512 B IOs run widened to whole 4096 B blocks, and
    # the run says so.
    drive = next(d for d in drives(vm) if d["path"] == "/dev/nvme0n2")
    assert drive["eligible"] and (drive["logical_block_size"], drive["physical_block_size"]) == (4096, 4096), drive
    run_id = vm.start_run(drive)
    state, seconds = vm.wait_run(run_id)
    run = vm.run(run_id)
    print(f"smoke on a 4Kn NVMe namespace after the power cut: {state} in {seconds:.0f} s; {busy_times(run)}")
    assert state == "done", run["error"]
    trace = next(s for s in run["steps"] if s["kind"] == "trace")
    print(f"4Kn: {'; '.join(trace['detail']['adapted'])}")
    assert trace["detail"]["trace"]["widened"]["block_bytes"] == 4096 and trace["detail"]["trace"]["widened"]["ios"]
    assert [s["key"] for s in run["steps"] if "adapted" in (s["detail"] or {})] == ["trace"]
    assert any(w.startswith("adapted to the drive's 4096 B logical blocks: in trace,") for w in run["warnings"])
    vm.poweroff()
    assert mtools("mdir", "-b", "-i", full_img, "::").split() == ["::/filler", "::/ssdbench-results/"]
    assert mtools("mdir", "-b", "-i", full_img, "::ssdbench-results").split() == []


def test_unattended_mode_runs_exports_and_powers_off(tmp_path):
    """ssdbench.auto=smoke: the empty NVMe drive is tested, the SATA drive is skipped because it holds a
    partition table (nobody is there to agree to wipe it), the run is exported, and the VM powers off."""
    disks = str(tmp_path)
    subprocess.run(["cp", "--sparse=always", os.path.join(VM_DIR, "stick.img"), disks], check=True)
    subprocess.run(["truncate", "-s", "2G", os.path.join(disks, "sata.img")], check=True)
    subprocess.run(["sfdisk", "-q", os.path.join(disks, "sata.img")], input="label: dos\n,,L\n", text=True, check=True)
    os.makedirs(ARTIFACTS, exist_ok=True)
    log = os.path.join(ARTIFACTS, "vm-console-unattended.log")
    if os.path.exists(log):
        os.unlink(log)
    vm = qemu(disks, log, append="ssdbench.auto=smoke")
    try:
        started = time.monotonic()
        assert vm.proc.wait(timeout=RUN_TIMEOUT_S) == 0, "the VM did not power itself off"
        print(f"unattended smoke on NVMe, export and power-off: {time.monotonic() - started:.0f} s from QEMU's start")
    finally:
        vm.close()
    console = vm.console_text()
    assert "skipped: holds data (partition" in console and "ssdbench.auto: done, powering off" in console
    bundles = stick_bundles(os.path.join(disks, "stick.img"), str(tmp_path / "results"))
    assert len(bundles) == 1 and bundles[0].split("_")[1] == NVME["serial"], bundles
