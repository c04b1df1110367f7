"""Interrupts and CPU (issue 32, item 6; issue 44, item 4): the drive's NUMA node from its PCI function (a SATA
drive's AHCI adapter, as QEMU's captured sysfs has it), fio on one fixed CPU for every step (the first thread of
the best-ranked core not CPU 0's, on the CPU files of an Alder Lake, a Zen 4 and a two-socket Xeon), and the
clock of that CPU recorded while each step runs."""

import json
import os
import re
import time

from conftest import ENGINE_SUITE, data, needs_root, start_run
from test_testbed import captured_sysfs

from ssdbench.drives import discovery
from ssdbench.results import store
from ssdbench.run import environment, quiet


def write(root, path, text):
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text + "\n")


def test_a_sata_drives_node_is_its_ahci_adapters(tmp_path, monkeypatch):
    captured_sysfs(tmp_path)
    monkeypatch.setattr(discovery, "SYS", str(tmp_path / "sys"))
    sata = tmp_path / "sys/class/block/sda"
    # the SCSI device (and the block device) a SATA disk's `device` is: no node file of its own
    assert not (sata / "device/numa_node").exists() and not (sata / "device/device/numa_node").exists()
    allowed = os.sched_getaffinity(0)
    # QEMU reports no node (-1), as a single-node board does: fio still gets its one CPU, the IRQs none
    controls = quiet.Quiet({"path": "/dev/sda", "transport": "sata"})
    found = controls.numa_cpus("sda")
    assert found["node"] is None and "no NUMA node (its PCI function 0000:00:02.0)" in found["why"]
    assert controls.cpus is None and controls.fio_cpus == {found["cpu"]} and found["cpu"] in allowed
    # on a board that gives the AHCI function a node, that node's CPUs take its interrupts, and fio one of them
    functions = {name: discovery.pci_functions(name)[0] for name in ("sda", "nvme0n1")}
    assert {n: os.path.basename(f) for n, f in functions.items()} == {"sda": "0000:00:02.0", "nvme0n1": "0000:01:00.0"}
    node_cpus = ",".join(str(c) for c in sorted(allowed))
    write(tmp_path, "/sys/devices/system/node/node0/cpulist", node_cpus)
    for name, function in functions.items():
        with open(f"{function}/numa_node", "w") as f:
            f.write("0\n")
        controls = quiet.Quiet({"path": f"/dev/{name}", "transport": "sata"})
        found = controls.numa_cpus(name)
        assert found["state"] == "applied" and (found["node"], found["node_cpus"]) == (0, node_cpus)
        assert controls.cpus == allowed and controls.cpulist == node_cpus  # what irq_affinity pins them to
        assert f"from {os.path.basename(function)}" in found["why"]
        assert controls.fio_cpus == {found["cpu"]} == {min(allowed - {0}) if len(allowed) > 1 else 0}


def test_fios_cpu_is_not_cpu_0_and_of_the_fastest_where_no_topology_is_shown(tmp_path, monkeypatch):
    monkeypatch.setattr(discovery, "SYS", str(tmp_path / "sys"))
    every = set(range(16))
    # all alike, no cpufreq, no topology (this VM): each CPU a core of its own, the lowest but 0
    assert quiet.fio_cpu(every, every)[0] == 1
    assert quiet.fio_cpu({0}, every)[0] == 0  # CPU 0 where it is the only one
    assert quiet.fio_cpu({4, 5}, {0, 1})[0] is None  # none the runner may use
    # some CPUs clock higher and nothing else ranks them: one of the fastest
    for cpu in every:
        khz = "5700000" if cpu in (6, 7) else "4800000"
        write(tmp_path, f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/cpuinfo_max_freq", khz)
    cpu, why = quiet.fio_cpu(every, every)
    assert cpu == 6 and "by cpuinfo_max_freq (5700000" in why


def topology(root, name):
    """A machine's CPU files (tests/data/cpu-NAME.txt, as `grep -r .` prints them) laid out under `root`."""
    for line in data(f"cpu-{name}.txt").splitlines():
        path, value = line.rsplit(":", 1)
        write(root, path, value)
    return quiet.parse_cpulist((root / "sys/devices/system/cpu/online").read_text().strip())


def without(root, every, ranking):
    """fio's CPU once every CPU's `ranking` file is gone (a firmware or a kernel without it)."""
    for c in every:
        (root / f"sys/devices/system/cpu/cpu{c}/{ranking}").unlink()
    return quiet.fio_cpu(every, every)


def test_fios_cpu_on_alder_lake_is_the_first_thread_of_a_favoured_p_core(tmp_path, monkeypatch):
    """i9-12900K: CPU 1 is CPU 0's SMT sibling (what the lowest CPU but 0 was); CPPC ranks two P-cores first."""
    monkeypatch.setattr(discovery, "SYS", str(tmp_path / "sys"))
    every = topology(tmp_path, "alder-lake")
    cpu, why = quiet.fio_cpu(every, every)
    assert cpu == 4 and quiet.siblings(cpu) == {4, 5}
    assert "not CPU 0's core (CPUs 0,1" in why and "a P-core (hybrid" in why
    assert "by ACPI CPPC highest_perf (68, where the others have 64 to 68)" in why
    assert why.endswith("the first thread of its core (CPUs 4,5)")
    # a firmware without CPPC: the P-cores' top clock ranks them (the favoured ones clock higher)
    cpu, why = without(tmp_path, every, "acpi_cppc/highest_perf")
    assert cpu == 4 and "by cpuinfo_max_freq (5200000" in why
    # the runner held to E-cores: no P-core among them, the first E-core but none of CPU 0's
    assert quiet.fio_cpu(every, set(range(16, 24)))[0] == 16


def test_fios_cpu_on_zen_4_is_the_preferred_core(tmp_path, monkeypatch):
    """Ryzen 9 7950X: CPU N and N+16 share a core; amd-pstate ranks core 3 with core 0 at the top."""
    monkeypatch.setattr(discovery, "SYS", str(tmp_path / "sys"))
    every = topology(tmp_path, "zen4")
    cpu, why = quiet.fio_cpu(every, every)
    assert cpu == 3 and "not CPU 0's core (CPUs 0,16" in why
    assert "by AMD's preferred-core ranking (236" in why and why.endswith("(CPUs 3,19)")
    # a kernel before amd-pstate's ranking: CPPC's highest_perf ranks the same cores
    cpu, why = without(tmp_path, every, "cpufreq/amd_pstate_prefcore_ranking")
    assert cpu == 3 and "by ACPI CPPC highest_perf (236" in why
    # the second threads alone open to the runner: the best of them, CPU 3's sibling
    assert quiet.fio_cpu(every, set(range(17, 32)))[0] == 19


def test_fios_cpu_on_a_two_socket_xeon_is_on_the_drives_node(tmp_path, monkeypatch):
    """2 x Xeon Gold 6248: CPU N and N+40 share a core; nothing ranks the cores, so the first of the node's, and
    on node 0 not CPU 0's (CPU 40 is its sibling)."""
    monkeypatch.setattr(discovery, "SYS", str(tmp_path / "sys"))
    every = topology(tmp_path, "xeon-2s")
    nodes = [quiet.parse_cpulist((tmp_path / f"sys/devices/system/node/node{n}/cpulist").read_text()) for n in (0, 1)]
    cpu, why = quiet.fio_cpu(nodes[0], every)
    assert cpu == 1 and "not CPU 0's core (CPUs 0,40" in why and "ranked alike" in why
    cpu, why = quiet.fio_cpu(nodes[1], every)
    assert cpu == 20 and "CPU 0" not in why and why.endswith("(CPUs 20,60)")
    assert quiet.fio_cpu(nodes[0] - {0, 1}, every)[0] == 2


def fio_processes(data_dir):
    """{pid: (the step folder it runs in, its Cpus_allowed_list)} of every fio process of the run in `data_dir`
    (fio and its job processes: all run in the step's folder)."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.path.basename(os.readlink(f"/proc/{pid}/exe")) != "fio":
                continue
            cwd = os.readlink(f"/proc/{pid}/cwd")
            with open(f"/proc/{pid}/status") as f:
                allowed = next(line.split(":", 1)[1].strip() for line in f if line.startswith("Cpus_allowed_list"))
        except (OSError, StopIteration):
            continue  # gone meanwhile, or not ours to read
        if cwd.startswith(str(data_dir)):
            found[int(pid)] = (os.path.basename(cwd), allowed)
    return found


@needs_root()
def test_every_fio_of_a_run_runs_on_the_one_recorded_cpu(loopdev, tmp_path):
    dev, _ = loopdev("512M")
    data_dir = tmp_path / "data"
    proc = start_run(dev, data_dir, suite=ENGINE_SUITE)
    seen = {}
    while proc.poll() is None:  # the steps of 3 s each are each seen several times over
        seen.update(fio_processes(data_dir))
        time.sleep(0.05)
    assert proc.returncode == 0, proc.stderr.read()
    db = store.connect(data_dir)
    env = store.get_run(db, 1)["environment"]
    steps = {k: json.loads(d) for k, d in db.execute("SELECT key, detail_json FROM steps WHERE kind = 'fio'")}
    db.close()
    pinned = env["controls"]["cpu_affinity"]
    cpu = pinned["cpu"]
    expected = quiet.fio_cpu(quiet.parse_cpulist(open("/sys/devices/system/cpu/online").read()))[0]
    assert pinned["state"] == "applied" and cpu == expected and pinned["node"] is None  # a loop device: no node
    folders = {folder for folder, _ in seen.values()}
    timed = ("rand-read-4k", "rand-write-4k", "seq-read-128k", "seq-write-128k")
    assert all(any(f.endswith(key) for f in folders) for key in timed), folders
    assert {allowed for _, allowed in seen.values()} == {str(cpu)}, seen
    assert "irq_affinity" in env["controls"] and "mhz" not in env["cpu"]["frequency"]  # no idle reading
    has_cpufreq = os.path.exists(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq")
    for key, detail in steps.items():
        clock = detail["cpu_clock"]
        assert clock["cpu"] == cpu
        if has_cpufreq and key in timed:  # 3 s of fio: sampled twice a second from 1 s in
            assert clock["samples"] >= 2 and clock["min_mhz"] <= clock["mean_mhz"] <= clock["max_mhz"]
        elif not has_cpufreq and "source" not in clock:
            assert "no cpufreq driver" in clock["unavailable"] or "too short" in clock["unavailable"]
    print(f"fio on CPU {cpu} ({pinned['why']}); {len(seen)} fio processes seen; clocks:", steps)


def test_the_step_clock_reads_this_hosts_cpu_as_it_has_it():
    listed = re.findall(r"^cpu MHz\s*:\s*([\d.]+)", open("/proc/cpuinfo").read(), re.M)
    if listed:  # one processor's block of /proc/cpuinfo
        assert environment._cpuinfo_mhz(0)[0] == float(listed[0])
    clock = environment.StepClock({0})
    if clock.source is None:
        assert "no cpufreq driver" in clock.why
        assert clock.record() == {"cpu": 0, "unavailable": clock.why}
        return
    clock.started -= 1.0
    for _ in range(3):
        clock.sample()
    taken = clock.record()
    assert taken["samples"] == 2 and taken["source"] == clock.source and taken["mean_mhz"] > 0
    assert environment.StepClock({0, 1}).record()["unavailable"].startswith("fio ran on no one CPU")
