"""The testbed (issue 25, items 5 and 6): what a run sets, records and restores of it (the drive's write cache,
ASPM, IRQ affinity, the IOMMU, the CPU's clock, the host controller), what it flags (a link below the drive's
maximum, thermal throttling, a purge weaker than the suite asks, a fio outside the validated range), and the one
rule by which compare, the ranked bars and the bench set apart or mark runs of another testbed. On this host's
real sysfs and procfs, real loop devices, outputs captured from the real tools (tests/data), and runs the real
engine made."""

import copy
import json
import os
import re

import pytest
from conftest import ENGINE_SUITE, JUDGED, data, needs_root, queue_files, set_queue_files, ssdbench
from test_review import runs_of

from ssdbench.drives import discovery, health, tool_output
from ssdbench.results import bench, card, document, ranking, report_html, store, testbed
from ssdbench.run import environment, plan, quiet


def test_the_drives_write_cache_as_nvme_cli_and_hdparm_print_it():
    assert tool_output.nvme_feature_value(data("nvme-get-feature-vwc.txt")) == 1
    # nvme-cli prints a value of 0 without its 0x
    assert tool_output.nvme_feature_value(data("nvme-get-feature-vwc-off.txt")) == 0
    assert tool_output.hdparm_write_cache(data("hdparm-W-sata.txt")) is True
    assert tool_output.hdparm_write_cache(data("hdparm-W0-sata.txt")) is False
    assert tool_output.hdparm_write_cache(data("hdparm-W-sata-off.txt")) is False
    assert tool_output.nvme_id_ctrl(data("nvme-id-ctrl.json"))["volatile_write_cache"] is True  # QEMU's vwc=7
    with pytest.raises(Exception, match="no current value"):
        tool_output.nvme_feature_value(data("nvme-get-feature-apst.txt"))


def snapshot(name, parse):
    return health.from_log("captured", parse(data(name)))


def test_the_counters_of_time_spent_hot_are_compared_before_and_after():
    before = snapshot("nvme-smart-log.json", tool_output.nvme_smart_log)
    after = snapshot("nvme-smart-log-64mib.json", tool_output.nvme_smart_log)
    assert set(before["thermal"]) == set(tool_output.NVME_THERMAL)
    moved = health.thermal_between(before, after)
    assert moved["rose"] == [] and all(pair == [0, 0] for pair in moved["counters"].values())
    run = {"environment": {"thermal": moved}}
    assert testbed.throttled(run) is None
    # QEMU never throttles: the rise is set here, on the captured log's counters, to see it flagged
    hot = copy.deepcopy(after)
    hot["thermal"]["thm_temp1_trans_count"] = 3
    hot["thermal"]["thm_temp1_total_time"] = 42
    moved = health.thermal_between(before, hot)
    assert moved["rose"] == ["thm_temp1_trans_count", "thm_temp1_total_time"]
    flag = testbed.throttled({"environment": {"thermal": moved}})
    assert "thm_temp1_trans_count 0 to 3" in flag and "throttled" in flag
    # smartctl's NVMe log names two of them; QEMU's SATA disk has no Device Statistics, so none
    assert set(tool_output.smartctl(data("smartctl-nvme-x-64mib.json"))["thermal"]) == {
        "warning_temp_time",
        "critical_comp_time",
    }
    sata = snapshot("smartctl-sata-x.json", tool_output.smartctl)
    assert "holds no counter" in health.thermal_between(sata, sata)["unavailable"]
    assert "failed" in health.thermal_between(before, None)["unavailable"]


def captured_sysfs(root):
    """The sysfs of QEMU's NVMe and AHCI drives as sysfs-testbed.txt captured it, laid out under `root`: each block
    device's link to its folder, and each PCI function's files, driver link and MSI interrupts in its own folder."""
    lines = [line.split("=", 1) for line in data("sysfs-testbed.txt").splitlines() if "=" in line]
    functions = {path: value for path, value in lines if re.fullmatch(r"/sys/bus/pci/devices/[^/]+", path)}

    def real(path):  # a PCI function's file, in the function's own folder
        device = "/".join(path.split("/")[:6])
        return root / (functions[device] + path[len(device) :]).lstrip("/")

    for path, value in lines:
        if value == "<missing>" or path in functions:
            continue
        if path.startswith("/sys/class/block/") and path.count("/") == 4:
            (root / value.lstrip("/")).mkdir(parents=True, exist_ok=True)
            (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (root / path.lstrip("/")).symlink_to(root / value.lstrip("/"))
        elif path.startswith("/sys/bus/pci/devices/"):
            target = real(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.endswith("/driver"):
                (root / value.lstrip("/")).mkdir(parents=True, exist_ok=True)
                target.symlink_to(root / value.lstrip("/"))
            elif path.endswith("/msi_irqs"):
                target.mkdir()
                for irq in value.split():
                    (target / irq).write_text("msi\n")
            else:
                target.write_text(value + "\n")


def test_the_host_controller_of_qemus_nvme_and_ahci_drives(tmp_path, monkeypatch):
    captured_sysfs(tmp_path)
    monkeypatch.setattr(discovery, "SYS", str(tmp_path / "sys"))
    nvme = discovery.host_controller("nvme0n1")
    assert (nvme["pci"], nvme["id"], nvme["class"], nvme["driver"]) == ("0000:01:00.0", "1b36:0010", "0x010802", "nvme")
    assert nvme["mode"] == "NVMe" and nvme["irqs"] == [25, 26, 27] and nvme["iommu"] is None
    sata = discovery.host_controller("sda")
    assert (sata["pci"], sata["id"], sata["driver"], sata["mode"], sata["irqs"]) == (
        "0000:00:02.0",
        "8086:2922",
        "ahci",
        "AHCI",
        [28],
    )
    # both are the drive's own controller: the reference class of the rule
    for transport, host in (("nvme", nvme), ("sata", sata)):
        assert testbed.controller({"transport": transport, "host_controller": host})[1] == "the drive's own"
    raid = {**sata, "class": "0x010400", "mode": "RAID"}
    assert testbed.controller({"transport": "sata", "host_controller": raid})[1] == "ahci (RAID)"
    # A SAS HBA is a SAS drive's own controller; a SATA drive behind one is reached through its SCSI/ATA translation.
    hba = {**raid, "driver": "megaraid_sas"}
    behind = {"host_controller": hba, "hba": {"driver": "megaraid_sas", "scsi_address": "0:2:0:0"}}
    assert testbed.controller({**behind, "transport": "sas"})[1] == "the drive's own"
    assert testbed.controller({**behind, "transport": "sata"})[1] == "megaraid_sas (RAID)"


@needs_root()
def test_the_host_controller_on_this_hosts_sysfs(loopdev):
    dev, _ = loopdev("16M")
    assert discovery.host_controller(os.path.basename(dev)) is None  # a loop device has no PCI function
    disks = [n for n in os.listdir("/sys/block") if discovery.pci_functions(n)]
    if not disks:
        pytest.skip("this host has no disk behind a PCI function")
    name = disks[0]
    host = discovery.host_controller(name)
    pci = discovery.pci_functions(name)[0]
    assert host["pci"] == os.path.basename(pci) and os.path.realpath(f"/sys/block/{name}").startswith(pci)
    assert host["class"] == open(f"{pci}/class").read().strip()
    assert host["driver"] == os.path.basename(os.path.realpath(f"{pci}/driver"))
    if os.path.isdir(f"{pci}/msi_irqs"):
        assert host["irqs"] == sorted(int(n) for n in os.listdir(f"{pci}/msi_irqs"))


def test_the_cpu_clock_turbo_and_iommu_are_recorded_as_this_host_has_them():
    freq = environment.frequency()
    assert set(freq) == {"max_mhz"}  # the clock itself: while each step runs (test_cpu_pinning)
    if not os.path.exists("/sys/devices/system/cpu/cpu0/cpufreq"):
        assert freq["max_mhz"].startswith("unavailable") and environment.turbo().startswith("unavailable")
    cmdline = open("/proc/cmdline").read()
    for drive in ({"host_controller": None}, {"host_controller": {"iommu": "identity"}}):
        found = environment.iommu(drive, cmdline)
        assert found["passthrough"] == ("iommu=pt" in cmdline.split())
    assert environment.iommu({"host_controller": None}, cmdline)["drive_domain"].startswith("unavailable")
    assert environment.iommu({"host_controller": {"iommu": "identity"}}, "quiet iommu=pt") == {
        "kernel_line": "iommu=pt",
        "passthrough": True,
        "drive_domain": "identity",
    }


def test_secure_boot_and_lockdown_are_recorded_as_this_host_has_them():
    """The VM's boots read them with Secure Boot on and off (vmtests/test_boot.py, test_boot_sb.py)."""
    kernel = environment.host()["kernel"]
    if not os.path.isdir("/sys/firmware/efi"):
        assert kernel["secure_boot"].startswith("off: booted by BIOS")
    elif os.path.exists(environment.SECURE_BOOT_VAR):
        value = open(environment.SECURE_BOOT_VAR, "rb").read()[4]
        assert kernel["secure_boot"] == ("on" if value == 1 else "off")
    else:
        assert kernel["secure_boot"].startswith("unavailable")
    if os.path.exists(environment.LOCKDOWN):
        assert f"[{kernel['lockdown']}]" in open(environment.LOCKDOWN).read()
    else:
        assert kernel["lockdown"].startswith("unavailable")


@needs_root()
def test_the_kernels_write_cache_is_set_for_the_run_and_put_back(loopdev):
    dev, _ = loopdev("16M")
    wc = f"/sys/block/{os.path.basename(dev)}/queue/write_cache"
    with open(wc, "w") as f:
        f.write("write through")
    controls = quiet.Quiet({"path": dev, "transport": "loop", "host_controller": None})
    try:
        applied = controls.apply()
        assert applied["kernel_write_cache"] == {"state": "applied", "value": "write back", "before": "write through"}
        assert open(wc).read().strip() == "write back"
        assert "no drive cache of its own" in applied["write_cache"]["reason"]
        assert "no PCI function" in applied["irq_affinity"]["reason"]
        policy = open(quiet.ASPM_POLICY).read() if os.path.exists(quiet.ASPM_POLICY) else None
        aspm = applied["aspm"]
        if policy is None:
            assert aspm["state"] == "unavailable" and "does not exist" in aspm["reason"]
        else:
            # set where the kernel lets it (firmware that keeps ASPM refuses: EPERM, as in this VM)
            assert aspm["before"] == re.search(r"\[(\w+)\]", policy).group(1)
            assert aspm["state"] == "applied" and aspm["value"] == "performance" or "failed" in aspm["reason"]
    finally:
        restored = controls.release()
    assert restored["kernel_write_cache"] == {"state": "applied", "value": "write through"}
    assert open(wc).read().strip() == "write through"
    if policy is not None:
        assert open(quiet.ASPM_POLICY).read() == policy
    assert controls.release() == {}  # nothing left to put back


def test_the_drives_interrupts_are_pinned_to_its_node_or_recorded_as_the_kernel_keeps_them():
    disks = [n for n in os.listdir("/sys/block") if (discovery.host_controller(n) or {}).get("irqs")]
    if not disks:
        pytest.skip("this host has no disk with an interrupt of its own")
    host = discovery.host_controller(disks[0])
    found = {str(n): open(f"/proc/irq/{n}/smp_affinity_list").read().strip() for n in host["irqs"]}
    controls = quiet.Quiet({"path": f"/dev/{disks[0]}", "transport": "virtio", "host_controller": host})
    left = controls.irq_affinity()  # no NUMA node known: left as found
    assert left["state"] == "unavailable" and left["before"] == found == left["tested"]
    controls.cpus, controls.cpulist = {0}, "0"
    pinned = controls.irq_affinity()
    assert pinned["before"] == found
    if pinned["state"] == "applied":
        assert all(v == "0" or quiet.parse_cpulist(v) <= {0} for v in pinned["tested"].values())
    else:  # a kernel that keeps them (managed interrupts: EIO; this VM: EPERM) leaves them as found
        assert "failed" in pinned["reason"]
    controls.restore()
    assert {str(n): open(f"/proc/irq/{n}/smp_affinity_list").read().strip() for n in host["irqs"]} == found
    # one interrupt for every IO (AHCI's): on fio's core, with no NUMA node known
    one = {**host, "irqs": host["irqs"][:1]}
    controls = quiet.Quiet({"path": f"/dev/{disks[0]}", "transport": "sata", "host_controller": one})
    controls.fio_core = "0"
    pinned = controls.irq_affinity()
    irq = str(one["irqs"][0])
    assert controls.cpus is None and pinned["before"] == {irq: found[irq]}
    if pinned["state"] == "applied":
        assert pinned["value"] == "on fio's core, CPUs 0" and quiet.parse_cpulist(pinned["tested"][irq]) <= {0}
    else:
        assert "failed" in pinned["reason"]
    controls.restore()
    assert open(f"/proc/irq/{irq}/smp_affinity_list").read().strip() == found[irq]


@needs_root()
def test_a_run_records_the_testbed_and_puts_back_what_it_changed(loopdev, tmp_path):
    dev, _ = loopdev("256M")
    # Each file the run sets holds something else first: all three are changed, and must come back.
    set_queue_files(dev, scheduler="mq-deadline", nomerges="0", write_cache="write through")
    found = queue_files(dev)
    assert found == {"scheduler": "mq-deadline", "nomerges": "0", "write_cache": "write through"}
    data_dir = tmp_path / "data"
    ssdbench("run", *ENGINE_SUITE, "--drive", dev, "--confirm", os.path.basename(dev), data_dir=data_dir, check=True)
    assert queue_files(dev) == found
    assert not os.path.exists(data_dir / quiet.RECORD)  # the crash record goes once all is put back
    db = store.connect(data_dir)
    run = store.get_run(db, 1)
    db.close()
    env = run["environment"]
    with open(os.path.join(store.run_dir(data_dir, 1), "environment.json")) as f:
        assert json.load(f) == env  # the file in the bundle holds the restore too
    tested = {"scheduler": "none", "nomerges": "2", "kernel_write_cache": "write back"}
    for control, value in tested.items():
        was = found[control.removeprefix("kernel_")]
        assert env["controls"][control] == {"state": "applied", "value": value, "before": was}
        assert env["restored"][control] == {"state": "applied", "value": was}
    # The host's own (no cpufreq here; ASPM, which this kernel may refuse): what a control changed, it put back.
    for control in ("governor", "aspm"):
        if control in env["restored"]:
            assert env["restored"][control]["value"] == env["controls"][control]["before"]
    assert set(env["restored"]) <= {*tested, "governor", "aspm"} and "recovered" not in env
    assert env["thermal"] == {"unavailable": "no health log: a loop device has no health log"}
    assert set(env["cpu"]) >= {"frequency", "turbo"} and "iommu" in env["kernel"]
    assert run["drive"]["host_controller"] is None
    made = card.of(run)["testbed"]
    assert made["controller"].startswith("none") and made["fio"].startswith(env["tools"]["fio"])
    # the fio that make test runs (make fio): the data's patch, named in the record and on the card
    assert env["data"] == {"options": "scramble_buffers=hash", "fio_patch": plan.FIO_PATCH, "why": None}
    assert made["fio"] == f"{env['tools']['fio']} with {plan.FIO_PATCH}"
    # a loop device cannot be erased: its discard is the most it offers, flagged and yet not another testbed
    assert made["classes"]["purge"] == testbed.REFERENCE["purge"]
    assert any(w.startswith("a purge weaker than the suite asks") for w in document.run_warnings(run))
    # its L-states, read once the controls were set: no PCIe link, none
    assert env["controls"]["aspm"]["l_states"] == [] and "L-states none;" in made["classes"]["link_power"]


def pcie(speed, width, max_speed="16.0 GT/s PCIe", max_width="4"):
    return {"kind": "pcie", "speed": f"{speed} GT/s PCIe", "width": f"x{width}"} | {
        "max_speed": max_speed,
        "max_width": max_width,
    }


def test_a_link_below_the_drives_maximum_is_flagged():
    assert testbed.link({"link": pcie("16.0", 4)})[1:] == ("at the drive's maximum", None)
    shown, cls, flag = testbed.link({"link": pcie("8.0", 4)})
    assert cls == "below the drive's maximum: PCIe 8 GT/s x4" and "can 16 GT/s x4" in flag
    assert testbed.link({"link": pcie("16.0", 2)})[1] == "below the drive's maximum: PCIe 16 GT/s x2"
    sata = {"kind": "sata", "speed": "3.0 Gbps", "max": "6.0 Gb/s", "port_max": "3.0 Gbps"}
    shown, cls, flag = testbed.link({"link": sata})
    assert "SATA 3 Gb/s, where the drive can 6 Gb/s; its port can 3 Gb/s" in flag
    assert testbed.link({"link": None})[1] == testbed.NOT_RECORDED


def test_a_known_speed_with_an_unknown_maximum_is_its_class_not_verified():
    """QEMU's SATA disk reports no interface speed in its IDENTIFY: the most it can is unknown, so nothing is
    flagged, but the speed it ran at is its class: 1.5 and 6 Gb/s never share one, and two runs at 6 Gb/s compare,
    not verified."""
    slow, fast = ({"link": {"kind": "sata", "speed": f"{g} Gbps"}} for g in ("1.5", "6.0"))
    assert testbed.link(slow)[1:] == ("SATA 1.5 Gb/s; its maximum not recorded", None)
    gen3 = {"link": pcie("8.0", 4, max_speed=None)}
    assert testbed.link(gen3)[1:] == ("PCIe 8 GT/s x4; its maximum not recorded", None)

    def classes(drive):
        return {"classes": {"link": testbed.link(drive)[1]}}

    def judged(reference, drive, ideal=False):
        # the link's part alone: the other parts are unknown in both
        differs, unverified = testbed.judged(reference, drive, ideal=ideal)
        return differs, [u for u in unverified if u.startswith("not verified: link (")]

    assert judged(classes(fast)["classes"], classes(slow)) == (
        ["link: SATA 1.5 Gb/s; its maximum not recorded (the current run's: SATA 6 Gb/s; its maximum not recorded)"],
        [],
    )
    assert judged(classes(fast)["classes"], classes(fast)) == (
        [],
        ["not verified: link (SATA 6 Gb/s; its maximum not recorded)"],
    )
    # against a link known at its maximum it is not the same: it might be below it
    known = {"link": {"kind": "sata", "speed": "6.0 Gbps", "max": "6.0 Gb/s"}}
    assert testbed.differences(classes(known)["classes"], classes(fast)) == [
        "link: SATA 6 Gb/s; its maximum not recorded (the current run's: at the drive's maximum)"
    ]
    # the bench's reference is the suite's own class: against it an unknown maximum is not verified
    assert judged(testbed.REFERENCE, classes(slow), ideal=True)[1] == [
        "not verified: link (SATA 1.5 Gb/s; its maximum not recorded)"
    ]


def link_files(function, speed, width, aspm):
    """A PCI function's link files as the kernel shows them (current and most speed and width, link/*_aspm)."""
    for name, value in (("current_link_speed", speed), ("max_link_speed", speed)):
        (function / name).write_text(f"{value} GT/s PCIe\n")
    for name in ("current_link_width", "max_link_width"):
        (function / name).write_text(f"{width}\n")
    (function / "link").mkdir()
    for state, on in aspm.items():
        (function / "link" / f"{state}_aspm").write_text(f"{on}\n")


def test_a_narrow_link_above_the_drive_bounds_it_and_the_link_states_are_its_class(tmp_path, monkeypatch):
    """The PCIe path from the drive up to its root port, on QEMU's captured sysfs with the links a PC would show:
    the NVMe drive and its root port at Gen4 x4, the AHCI adapter as a Gen2 x1 card (500 MB/s, under SATA's 600).
    The SATA drive's own link runs at its 6 Gb/s, and the adapter's link bounds it all the same."""
    captured_sysfs(tmp_path)
    monkeypatch.setattr(discovery, "SYS", str(tmp_path / "sys"))
    pci = tmp_path / "sys/devices/pci0000:00"
    link_files(pci / "0000:00:01.0/0000:01:00.0", "16.0", 4, {"l0s": 0, "l1": 0})
    link_files(pci / "0000:00:01.0", "16.0", 4, {"l0s": 0, "l1": 0})
    link_files(pci / "0000:00:02.0", "5.0", 1, {"l1": 1})
    nvme = {"transport": "nvme", "link": pcie("16.0", 4), "pcie_path": discovery.pcie_path("nvme0n1")}
    assert [(hop["pci"], hop["width"], hop["aspm"]) for hop in nvme["pcie_path"]] == [
        ("0000:01:00.0", "x4", {"l0s": "0", "l1": "0"}),
        ("0000:00:01.0", "x4", {"l0s": "0", "l1": "0"}),
    ]
    assert testbed.host_path(nvme)[1:] == (testbed.REFERENCE["path"], None)
    sata_link = {"kind": "sata", "speed": "6.0 Gbps", "max": "6.0 Gb/s", "port_max": "6.0 Gbps"}
    sata = {"transport": "sata", "link": sata_link, "pcie_path": discovery.pcie_path("sda")}
    assert testbed.link(sata)[2] is None  # its own link is at its maximum
    shown, cls, flag = testbed.host_path(sata)
    assert cls == "bounded by 5.0 GT/s PCIe x1" and "carries 500 MB/s, where the drive's own link can 600 MB/s" in flag
    assert any("narrower than the drive needs" in f for f in testbed.flags({"drive": sata, "steps": []}))
    # the L-states enabled on the drive's link are part of its link power class, as read after the controls were
    # set (quiet.Quiet.apply); read at discovery only, they are not recorded; unread ones are unavailable
    aspm = {"state": "applied", "value": "performance", "l_states": discovery.link_states("sda")}
    run = {"drive": sata, "environment": {"controls": {"aspm": aspm}}}
    assert testbed.controls(run)["link_power"] == "ASPM performance, L-states l1; power saving not recorded"
    before = {"drive": sata, "environment": {"controls": {"aspm": {"state": "applied", "value": "performance"}}}}
    assert "L-states not recorded" in testbed.controls(before)["link_power"]
    nvme_run = {"drive": nvme, "environment": {"controls": {"aspm": {"l_states": discovery.link_states("nvme0n1")}}}}
    assert testbed.controls(nvme_run)["link_power"].startswith("ASPM unavailable, L-states none;")
    (pci / "0000:00:02.0/link/l1_aspm").unlink()
    (pci / "0000:00:02.0/link").rmdir()
    sata["pcie_path"] = discovery.pcie_path("sda")
    aspm["l_states"] = discovery.link_states("sda")
    assert (
        "unavailable" in sata["pcie_path"][0]["aspm"] and "L-states unavailable" in testbed.controls(run)["link_power"]
    )
    # no PCI function above it (a loop device): none, known; no path recorded (an older run): not recorded; no PCIe
    # link above a PCI function (an AHCI adapter in the chipset): no narrower link
    assert testbed.host_path({"pcie_path": []})[1] == "none"
    onboard = {"pcie_path": [], "host_controller": {"driver": "ahci"}}
    assert testbed.host_path(onboard)[1] == testbed.REFERENCE["path"]
    assert testbed.host_path({})[1] == testbed.NOT_RECORDED


def test_fio_outside_the_validated_range_is_flagged():
    def version(v):
        return testbed.fio({"environment": {"tools": {"fio": v}}})

    assert version("fio-3.33")[1:] == ("3.33 to 3.41", None) and version("fio-3.41")[1] == "3.33 to 3.41"
    assert "outside" in version("fio-3.28")[2] and version("fio-3.42")[1] == "fio-3.42: outside 3.33 to 3.41"
    assert version("not installed")[1] == testbed.NOT_RECORDED


def frozen(run):
    """The run's purges as on a SATA drive whose security erase the BIOS froze: it offers an erase, and got a
    TRIM."""
    for step in run["steps"]:
        if step["kind"] == "purge":
            step["detail"]["method"] = "ATA TRIM (whole device)"
            step["detail"]["attempts"] = [
                {"method": "ATA Security Erase", "outcome": "not available", "reason": "the drive is frozen"},
                {"method": "ATA TRIM (whole device)", "outcome": "used"},
            ]


def test_a_purge_weaker_than_the_drive_offers_is_another_testbed():
    def purged(method, *tried):
        attempts = [{"method": m, "outcome": "not available", "reason": why} for m, why in tried]
        detail = {"method": method, "attempts": [*attempts, {"method": method, "outcome": "used"}]}
        return {"steps": [{"key": "purge", "kind": "purge", "state": "done", "detail": detail}]}

    erased = testbed.purge_used(purged("NVMe Format NVM, user data erase"))
    assert erased[1:] == (testbed.REFERENCE["purge"], None)
    # a drive without the security feature set offers nothing stronger than TRIM: flagged, but its best
    lacking = testbed.purge_used(
        purged("ATA TRIM (whole device)", ("ATA Security Erase", "the drive does not support the ATA security"))
    )
    assert lacking[1] == testbed.REFERENCE["purge"] and lacking[2].startswith("a purge weaker than the suite asks")
    # frozen, or another namespace in use: the drive offers an erase that the testbed kept it from
    held = testbed.purge_used(
        purged("ATA TRIM (whole device)", ("ATA Security Erase", "the drive is frozen (the BIOS froze it)"))
    )
    assert held[1] == "ATA TRIM (whole device), where the drive offers ATA Security Erase" and held[2]


def calm(run):
    """The run as a free host would have made it: without the figures by which rules 1 and 9 judge the host (each
    job's CPU and host share, each step's CPU wait, the calibration), which this busy machine sets on one run of a
    set and not on the next. Each flag's cause is a part of the class (test_each_flags_cause_is_a_part_of_its_own); here
    the runs of one testbed must compare whatever the neighbours did meanwhile."""
    run["environment"].pop("host_cost", None)
    for step in run["steps"]:
        step["metrics"] = [m for m in step["metrics"] if not m["name"].endswith(JUDGED)]
    return run


def test_compare_sets_apart_the_runs_of_another_testbed_and_names_how(finished_repeat):
    """Three runs the engine made on one loop device: one testbed, ranked together. Each part of the rule changed
    on one of them (in memory) sets it apart from the current run, and says which part; a part a run did not
    record is a class of its own, which sets it apart too."""
    runs = [calm(r) for r in runs_of(finished_repeat[0])]
    a, b, c = runs
    assert ranking.set_apart(card.of(a), card.of(b)) == []
    for change, part in (
        (lambda r: r["environment"]["tools"].update(fio="fio-3.28"), "testbed fio: fio-3.28: outside 3.33 to 3.41"),
        (frozen, "testbed purge: ATA TRIM (whole device), where the drive offers ATA Security Erase"),
        (
            lambda r: r["drive"].update(
                host_controller={"driver": "vmd", "id": "8086:9a0b", "pci": "x"} | {"mode": "RAID (Intel VMD)"}
            ),
            "testbed host controller: vmd (RAID (Intel VMD))",
        ),
        (
            lambda r: r["environment"]["controls"].update(write_cache={"state": "applied", "value": "off"}),
            "testbed write cache: off",
        ),
        (lambda r: r["environment"]["kernel"]["iommu"].update(drive_domain="DMA-FQ"), "testbed IOMMU: DMA-FQ"),
    ):
        other = copy.deepcopy(c)
        change(other)
        why = ranking.set_apart(card.of(a), card.of(other))
        named = [w for w in why if w.startswith(part)]
        assert len(named) == 1 and f"(run {a['id']}'s: " in named[0], why
        # the VMD change gives the drive a PCI function with no link read: its link is unknown, not a loop's none,
        # and no PCIe link above it is no narrower link
        vmd = [f"testbed link: not recorded (run {a['id']}'s: none)"]
        vmd.append(f"testbed host path: no narrower link (run {a['id']}'s: none)")
        assert [w for w in why if w not in named] in ([], vmd)
    # links wider than a loop device's speed on any host (PCIe 5 x16, run at PCIe 4 x16: 31.5 GB/s), so that the
    # link's class is the one part that differs, never rule 2's "faster than the link"
    for run in runs:
        run["drive"]["link"] = pcie("32.0", 16, "32.0 GT/s PCIe", "16")
    slow = copy.deepcopy(c)
    slow["drive"]["link"] = pcie("16.0", 16, "32.0 GT/s PCIe", "16")
    cards = [card.of(r) for r in (a, b, slow)]
    assert any("link runs below its maximum" in w for w in cards[2]["warnings"])
    charts = ranking.charts(cards)
    for chart in charts:
        apart = [bar for bar in chart["bars"] if bar["apart"]]
        assert [bar["run"] for bar in apart] == [slow["id"]]
        assert apart[0]["why"] == [
            f"testbed link: below the drive's maximum: PCIe 16 GT/s x16 (run {a['id']}'s: at the drive's maximum)"
        ]
    html = report_html.bar_charts(charts, "")
    assert html.count('class="bar apart') == len(charts) and html.count(">other link</text>") == len(charts)
    listed = report_html.compare_runs(cards)
    assert listed.count('<div class="testbed">Testbed: CPU ') == 3 and "Another testbed, marked apart: link" in listed
    # a run recorded before the testbed was: what it did not record is unknown, never a match
    old = copy.deepcopy(slow)
    old["environment"] = {k: old["environment"][k] for k in ("suite", "tools")}
    old["drive"].pop("host_controller")
    old["drive"]["link"] = None
    old_card = card.of(old)
    assert old_card["testbed"]["classes"]["link"] == testbed.NOT_RECORDED
    apart = ranking.set_apart(cards[0], old_card)
    assert "testbed link: not recorded (run 1's: at the drive's maximum)" in apart
    # unknown against unknown (a loop device's write cache, which no run can read) compares, not verified
    assert not [w for w in apart if w.startswith("testbed write cache")]
    unverified = ranking.judge(cards[0], old_card)[1]
    assert "not verified: write cache (not recorded)" in unverified


def test_unknown_compares_with_unknown_not_verified_and_never_with_known(finished_repeat):
    """Two runs on one loop device know neither its write cache, nor its IOMMU domain, nor its heat: they rank
    together, and compare, the bars and the API say which parts are not verified. A run that knows one of them
    (its write cache on) is set apart, its part named."""
    a, b, _ = (card.of(calm(r)) for r in runs_of(finished_repeat[0]))
    assert ranking.judge(a, b)[0] == []
    unverified = ranking.judge(a, b)[1]
    assert {u.split(" (")[0] for u in unverified} >= {"not verified: write cache", "not verified: ran hot"}
    charts = ranking.charts([a, b])
    assert all(bar["unverified"] == unverified for chart in charts for bar in chart["bars"] if not bar["current"])
    html = report_html.bar_charts(charts, "")
    assert "not verified: write cache" in html and 'class="bar apart' not in html
    assert "Compared, not verified: write cache" in report_html.compare_runs([a, b])
    known = copy.deepcopy(b)
    known["testbed"]["classes"]["cache"] = "write back"
    why = ranking.set_apart(a, known)
    assert why == [f"testbed write cache: write back (run {a['id']}'s: unavailable)"]
    assert ranking.set_apart(known, a) == [f"testbed write cache: unavailable (run {known['id']}'s: write back)"]


def test_each_flags_cause_is_a_part_of_its_own():
    """A flag of each cause of validity's rules, and the host's calibration, is a class of its own: two runs
    flagged for different causes differ by those causes, named; heat is its own part, not a flag."""
    causes = [
        "the drive ran hot",
        "the step did not begin settled",
        "the host CPU set the pace",
        testbed.validity.HOST_CAUSE,
        "faster than the drive's link: a cache answered",
        "the busy time is not the kernel's",
        "the background fell behind its clock",
        "a sweep pass was not continuous",
    ]
    run = {"drive": {}, "steps": [], "environment": {}}
    classes = {}
    for cause in causes:
        reason = testbed.validity.Flag(f"a reason: {cause}", cause)
        classes[cause] = testbed.flagged(run, [[reason], []])
    assert classes.pop("the drive ran hot") == "none"
    assert list(classes.values()) == list(classes) and testbed.flagged(run, [[]]) == "none"
    # a rule that names no cause yet: its consequence, the words after its last colon
    assert testbed.flagged(run, [["a read of what was never written: not the drive's"]]) == "not the drive's"
    # the host's calibration flag is rule 9's cause
    slow = {**run, "environment": {"host_cost": {"jobs": [{"cpu_percent": 40.0, "us_per_io": 2.0}]}}}
    assert testbed.flagged(slow, []) == testbed.validity.HOST_CAUSE
    two = testbed.flagged(run, [[testbed.validity.Flag("x: y", "the host CPU set the pace")], ["a: b"]])
    assert two == "b; the host CPU set the pace"
    diff = testbed.differences({"flagged": two}, {"classes": {"flagged": "b; the busy time is not the kernel's"}})
    assert diff == [
        "flags: the busy time is not the kernel's (the current run's: not so)",
        "flags: not the host CPU set the pace (the current run's: the host CPU set the pace)",
    ]


def test_a_sata_and_an_nvme_drive_on_one_pc_are_one_testbed():
    """Each at its own link's maximum, on its own controller, the SATA drive on the chipset's AHCI (no PCIe link
    above it), each purged by its own erase, its own power saving off: one class."""

    def run(transport, link, path, controller, erase):
        steps = [{"key": "p", "kind": "purge", "state": "done", "detail": {"method": erase, "attempts": []}}]
        env = {
            "controls": {
                "aspm": {"state": "applied", "value": "performance", "l_states": [{"l1": "0"}] * len(path)},
                "power_management": {"state": "applied", "value": "off"},
            }
        }
        drive = {"transport": transport, "link": link, "pcie_path": path}
        drive["host_controller"] = {"driver": controller[0], "mode": controller[1], "id": "x", "pci": "y"}
        return {"drive": drive, "steps": steps, "environment": env}

    hop = {"pci": "0000:01:00.0", "speed": "16.0 GT/s PCIe", "width": "x4", "aspm": {"l1": "0"}}
    nvme = run("nvme", pcie("16.0", 4), [hop, hop], ("nvme", "NVMe"), "NVMe Format NVM, user data erase")
    sata_link = {"kind": "sata", "speed": "6.0 Gbps", "max": "6.0 Gb/s"}
    sata = run("sata", sata_link, [], ("ahci", "AHCI"), "ATA Security Erase")
    one, other = (testbed.of(r, []) for r in (nvme, sata))
    assert testbed.differences(one["classes"], other) == []


def test_the_bench_marks_a_row_whose_testbed_is_not_the_reference(finished_repeat):
    run = runs_of(finished_repeat[0])[0]
    row = bench.table([(card.of(run), 1)])["rows"][0]
    # the engine's run on a loop device: no link, no PCI function, and its suspect reads set it apart; its drive
    # cache and its heat no run can know: against the suite's class, known in every part, they are not verified.
    # What this host's own ASPM, IOMMU and cpufreq are (a VM has none of them) is one or the other.
    differs = [d.split(":")[0] for d in row["testbed_differs"]]
    unverified = [u.split(" (")[0].removeprefix("not verified: ") for u in row["testbed_unverified"]]
    assert differs[:3] == ["link", "host path", "host controller"] and differs[-1] == "flags"
    assert {"write cache", "ran hot"} <= set(unverified) and not set(differs) & set(unverified)
    assert set(differs) | set(unverified) >= {testbed.PARTS[p] for p in ("link_power", "iommu", "cpu_clock")}
    assert "purge" not in differs  # a discard is the most a loop device offers
    assert all(
        d.endswith("(the reference testbed's: " + testbed.REFERENCE[p] + ")")
        for d, p in zip(row["testbed_differs"], ("link", "path", "controller"))
    )
    assert row["testbed"].startswith("CPU ") and "controller none" in row["testbed"]
    chart = bench.chart(bench.table([(card.of(run), 1)]), bench.table([(card.of(run), 1)])["columns"][0]["id"])
    assert chart["bars"][0]["unverified"] == row["testbed_unverified"]


def test_ssdbench_compare_shows_each_runs_testbed(finished_repeat, tmp_path):
    out = tmp_path / "compare.html"
    ssdbench("compare", "2", "1", "-o", str(out), data_dir=finished_repeat[0], check=True)
    page = out.read_text()
    assert page.count('<div class="testbed">Testbed: CPU ') == 2 and "controller none (no PCI function" in page
    # one loop device, one testbed: only a flag of this busy host's (rule 9, on one run and not the other) may
    # set one apart
    apart = re.findall(r"Another testbed, marked apart: ([^<]*)", page)
    assert all(part.startswith("flags: ") for found in apart for part in found.split("; ")), apart
