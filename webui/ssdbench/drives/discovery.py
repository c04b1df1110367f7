"""Find the NVMe, SATA and SAS drives, describe them, and say which may be tested and why.

Identity comes from lsblk and sysfs, enriched by nvme-cli, smartctl, hdparm and sg3_utils
where they are installed and we are root. This module knows nothing of suites.
"""

import glob
import json
import os
import re
from typing import NamedTuple

from ..errors import SsdbenchError
from ..system import sysfs, tools
from . import tool_output

SYS = "/sys"
LSBLK_COLUMNS = (
    "NAME,KNAME,PATH,TYPE,SIZE,MODEL,SERIAL,REV,TRAN,LOG-SEC,PHY-SEC,ROTA,DISC-MAX,"
    "MOUNTPOINTS,FSTYPE,PTTYPE,LABEL,UUID,HOTPLUG,RM,RO,PKNAME"
)
# The partition labels of an ssdbench image (board/ssdbench/genimage.cfg).
BOOT_LABELS = ("SSDBENCH", "SSDB-DATA")
# The disks the boot flow took for the stick (overlay/etc/init.d/S30stick), one a line.
BOOT_DISK_FILE = "/run/ssdbench/boot-disk"
CMDLINE = "/proc/cmdline"
PCIE_GEN = {"2.5": 1, "5.0": 2, "8.0": 3, "16.0": 4, "32.0": 5, "64.0": 6}
SATA_GEN = {"1.5": 1, "3.0": 2, "6.0": 3}
# A PCI function's folder in sysfs: domain (four hex digits, five behind an Intel VMD), bus, device, function.
PCI_ADDRESS = re.compile(r"[0-9a-f]{4,5}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
# The mode a drive's PCI function says it runs in, by its class code (class, subclass, programming interface).
PCI_MODES = {"0x010802": "NVMe", "0x010601": "AHCI"}
PCI_RAID = "0x0104"
# The drivers of SAS host bus adapters, and of RAID controllers in JBOD or HBA mode. lsblk says `sas` for every disk
# behind mpt3sas or smartpqi, SATA drives included, and nothing for megaraid_sas's JBOD: a SATA drive behind one is
# reached through the adapter's SCSI/ATA translation (SAT), a SAS drive speaks SCSI itself.
SAS_HBA_DRIVERS = ("mpt3sas", "mptsas", "megaraid_sas", "smartpqi", "hpsa", "aacraid")
# What SAT makes a SATA drive's INQUIRY say it is (SAT-4, 12.4.1).
SAT_VENDOR = "ATA"


def _lsblk(paths=()):
    return tool_output.lsblk(tools.run(["lsblk", "-J", "-b", "-o", LSBLK_COLUMNS, *paths]))


def _mounts(node):
    """Every mount point in a device's tree (its partitions, and whatever sits on them)."""
    found = [(node["name"], m) for m in node.get("mountpoints") or [] if m]
    for child in node.get("children", []):
        found += _mounts(child)
    return found


def mounts(node):
    return [f"/dev/{dev} on {mnt}" for dev, mnt in _mounts(node)]


def _file_systems(node):
    """(label, UUID) of every file system in a device's tree."""
    own = [(node.get("label"), node.get("uuid"))]
    return own + [fs for c in node.get("children", []) for fs in _file_systems(c)]


class Boot(NamedTuple):
    """What names the appliance's own stick: the disks the boot flow took for it, and the UUID of the
    partition GRUB booted from (ssdbench.stick= on the kernel line, board/ssdbench/grub.cfg)."""

    disks: frozenset = frozenset()
    uuid: str = None


NO_BOOT = Boot()


def boot_stick():
    names = os.environ.get("SSDBENCH_BOOT_DISK") or sysfs.read(BOOT_DISK_FILE) or ""
    words = (sysfs.read(CMDLINE) or "").split()
    uuid = next((w.partition("=")[2] for w in words if w.startswith("ssdbench.stick=")), "")
    return Boot(frozenset(os.path.basename(n) for n in names.split()), uuid.upper() or None)


def is_boot_stick(name, file_systems, boot):
    """Whether disk `name`, holding `file_systems` ((label, UUID) each), is the appliance's own stick: a disk the
    boot flow took for it, or one that holds the partition GRUB booted from. A system not booted by the stick's
    GRUB knows no UUID: then any disk with an ssdbench image's labels may be the stick."""
    if name in boot.disks:
        return True
    if boot.uuid:
        return any((uuid or "").upper() == boot.uuid for _, uuid in file_systems)
    return holds_an_image(file_systems)


def holds_an_image(file_systems):
    """Whether a disk's file systems carry an ssdbench image's labels."""
    return any(label in BOOT_LABELS for label, _ in file_systems)


def _transport(node):
    if node["type"] == "loop":
        return "loop"
    tran = node.get("tran")
    if tran:
        return tran
    if node["name"].startswith("nvme"):
        return "nvme"
    subsystem = os.path.realpath(f"{SYS}/class/block/{node['name']}/device/subsystem")
    return os.path.basename(subsystem) if os.path.exists(subsystem) else "unknown"


def _hwmon_for(name):
    """hwmon temperature input whose device is this drive or its controller (nvme, drivetemp)."""
    candidates = {
        os.path.realpath(f"{SYS}/class/block/{name}/device"),
        os.path.realpath(f"{SYS}/class/block/{name}/device/device"),
    }
    for hwmon in sorted(glob.glob(f"{SYS}/class/hwmon/hwmon*")):
        if os.path.realpath(f"{hwmon}/device") in candidates and os.path.exists(f"{hwmon}/temp1_input"):
            return f"{hwmon}/temp1_input"
    return None


def _pcie_link(name):
    pci = f"{SYS}/class/block/{name}/device/device"
    speed, width = sysfs.read(f"{pci}/current_link_speed"), sysfs.read(f"{pci}/current_link_width")
    if not speed:
        return None
    m = re.match(r"([\d.]+) GT/s", speed)
    gen = PCIE_GEN.get(m.group(1)) if m else None
    return {
        "kind": "pcie",
        "speed": speed,
        "width": f"x{width}" if width else None,
        "generation": f"PCIe Gen{gen}" if gen else None,
        "max_speed": sysfs.read(f"{pci}/max_link_speed"),
        "max_width": sysfs.read(f"{pci}/max_link_width"),
    }


def _sata_link(name):
    """The SATA link as the kernel negotiated it, and the most the host's port can (hw_sata_spd_limit); the
    most the drive can comes from its IDENTIFY (smartctl, _enrich_ata)."""
    m = re.search(r"/(ata\d+)/", os.path.realpath(f"{SYS}/class/block/{name}"))
    if not m:
        return None
    link = f"{SYS}/class/ata_link/link{m.group(1)[3:]}"
    port_max = sysfs.read(f"{link}/hw_sata_spd_limit")
    found = {"kind": "sata", "port": m.group(1), "port_max": None if port_max in (None, "<unknown>") else port_max}
    spd = sysfs.read(f"{link}/sata_spd")
    if not spd or spd == "<unknown>":
        return {**found, "speed": None, "generation": None}
    g = SATA_GEN.get(spd.split()[0])
    return {**found, "speed": spd, "generation": f"SATA Gen{g}" if g else None}


def pci_functions(name):
    """The sysfs folders of the PCI functions above a block device, nearest first: an NVMe drive's own
    controller, a SATA drive's host adapter, then the bridges and root ports above them. Empty for a device with
    no PCI function above it (a loop device)."""
    path, found = os.path.realpath(f"{SYS}/class/block/{name}"), []
    while path not in ("/", ""):
        path = os.path.dirname(path)
        if PCI_ADDRESS.fullmatch(os.path.basename(path)):
            found.append(path)
    return found


def _aspm_states(pci):
    """The ASPM states enabled on a function's link ({"l0s": "1", "l1": "0", ...}: its link/*_aspm files, on
    kernels since 5.5 built with PCIEASPM), or why they are unknown."""
    files = sorted(glob.glob(f"{pci}/link/*_aspm"))
    if not files:
        return "unavailable: no link/*_aspm in sysfs (no ASPM control on this link, or a kernel before 5.5)"
    return {os.path.basename(f).removesuffix("_aspm"): sysfs.read(f, "?") for f in files}


def pcie_path(name):
    """Every PCIe link from the drive's nearest PCI function up to its root port, nearest first: each function's
    address, its link's current and most speed and width, and its ASPM states. A SATA drive's path starts at its
    host adapter, so a Gen2 x1 adapter shows as the link that bounds it. Empty without a PCI function (a loop
    device), or where the functions show no link (a virtual machine's conventional PCI)."""
    path = []
    for pci in pci_functions(name):
        speed = sysfs.read(f"{pci}/current_link_speed")
        if not speed or speed.startswith("Unknown"):
            continue
        width = sysfs.read(f"{pci}/current_link_width")
        path.append(
            {
                "pci": os.path.basename(pci),
                "speed": speed,
                "width": f"x{width}" if width else None,
                "max_speed": sysfs.read(f"{pci}/max_link_speed"),
                "max_width": sysfs.read(f"{pci}/max_link_width"),
                "aspm": _aspm_states(pci),
            }
        )
    return path


def link_states(name):
    """The ASPM states enabled on a drive's link, at both its ends (the first two functions of its PCIe path):
    what the ASPM policy left them at when this is read. Empty: no PCIe link."""
    return [hop["aspm"] for hop in pcie_path(name)[:2]]


def _driver(pci):
    link = f"{pci}/driver"
    return os.path.basename(os.path.realpath(link)) if os.path.exists(link) else None


def host_controller(name):
    """The PCI function a drive is reached through (the nearest above it), as the run records it: its address,
    vendor:device id, class code, driver and the mode that says (NVMe, AHCI, or RAID: a RAID class code, or an
    Intel VMD domain above it), its MSI or legacy interrupts, NUMA node and IOMMU domain type. None without one."""
    functions = pci_functions(name)
    if not functions:
        return None
    pci = functions[0]
    cls = sysfs.read(f"{pci}/class") or ""
    vmd = any(_driver(above) == "vmd" for above in functions[1:])
    mode = "RAID (Intel VMD)" if vmd else "RAID" if cls.startswith(PCI_RAID) else PCI_MODES.get(cls, f"class {cls}")
    irqs = sorted(int(n) for n in os.listdir(f"{pci}/msi_irqs")) if os.path.isdir(f"{pci}/msi_irqs") else []
    legacy = sysfs.read(f"{pci}/irq")
    ids = [(sysfs.read(f"{pci}/{key}") or "?").removeprefix("0x") for key in ("vendor", "device")]
    return {
        "pci": os.path.basename(pci),
        "id": ":".join(ids),
        "class": cls,
        "driver": _driver(pci),
        "mode": mode,
        "irqs": irqs or ([int(legacy)] if legacy and legacy.isdigit() and int(legacy) > 0 else []),
        "numa_node": int(sysfs.read(f"{pci}/numa_node") or -1),
        # identity: the IOMMU passes the device through (iommu=pt); DMA or DMA-FQ: it translates every DMA
        "iommu": sysfs.read(f"{pci}/iommu_group/type"),
    }


def hba_transport(tran, driver, vendor, vpd_pg89):
    """What a disk that lsblk shows with transport `tran` (None: none) is, when it sits behind a SAS HBA run by
    `driver`: "sata" for a SATA drive behind the HBA's SCSI/ATA translation (its INQUIRY vendor is "ATA", or it
    has VPD page 89h, ATA Information), "sas" for a drive that speaks SCSI; None when it is not behind a SAS HBA."""
    if tran not in ("sas", None) or (tran is None and driver not in SAS_HBA_DRIVERS):
        return None
    ata = (vendor or "").strip() == SAT_VENDOR or tool_output.vpd_ata_information(vpd_pg89 or b"") is not None
    return "sata" if ata else "sas"


def _hba(name, node, host):
    """(transport, the HBA it sits behind) of a disk behind a SAS HBA, else None: the HBA's driver and PCI
    address, the disk's SCSI address (host:channel:target:LUN) and what lsblk says of it."""
    device = f"{SYS}/class/block/{name}/device"
    tran = node.get("tran") or None
    driver = (host or {}).get("driver")
    transport = hba_transport(tran, driver, sysfs.read(f"{device}/vendor"), sysfs.read_bytes(f"{device}/vpd_pg89"))
    if transport is None:
        return None
    return transport, {
        "driver": driver,
        "pci": (host or {}).get("pci"),
        "scsi_address": os.path.basename(os.path.realpath(device)),
        "lsblk_transport": tran,
        "translation": "SCSI/ATA translation (SAT) in the HBA" if transport == "sata" else None,
    }


def _partitions(name):
    return sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(f"{SYS}/class/block/{name}/*/partition"))


def _signatures(path, notes):
    if os.geteuid() != 0:
        notes.append("not root: file system signatures were not probed")
        return []
    try:
        out = tools.run(["wipefs", "--no-act", "--json", path], timeout=30)
    except SsdbenchError as exc:
        notes.append(str(exc))
        return []
    if not out.strip():
        return []
    return [s.get("type") for s in json.loads(out).get("signatures", [])]


def _enrich_nvme(drive, notes):
    ctrl = re.sub(r"n\d+$", "", drive["name"])
    if tools.which("nvme") is None:
        notes.append("nvme-cli is not installed: identity comes from sysfs only")
        return
    try:
        ids = tool_output.nvme_id_ctrl(tools.run(["nvme", "id-ctrl", f"/dev/{ctrl}", "-o", "json"]))
    except SsdbenchError as exc:
        notes.append(str(exc))
        return
    drive.update({k: ids[k] or drive.get(k) for k in ("model", "serial", "firmware")})
    drive["identity_source"] = "NVMe Identify Controller (nvme-cli)"
    drive["erase"] = {
        "format": ids["format_supported"],
        "sanitize": ids["sanitize_supported"],
        "sanitize_block_erase": ids["sanitize_block_erase"],
        "crypto_erase": ids["crypto_erase_supported"],
        "format_all_namespaces": ids["format_all_namespaces"],
        "ata_security": None,
    }
    drive["apst_supported"] = ids["apst_supported"]
    drive["volatile_write_cache"] = ids["volatile_write_cache"]
    drive["warning_temp_c"] = ids["warning_temp_k"] - 273 if ids["warning_temp_k"] else None
    drive["trim_supported"] = ids["dataset_management"]
    drive["controller"] = f"/dev/{ctrl}"
    busy = namespaces_in_use(drive)
    if busy:
        notes.append(
            f"another namespace of this controller is in use ({'; '.join(busy)}): a purge uses only "
            "methods that act on this namespace alone"
        )


def _smartctl(drive, notes):
    """`smartctl -a`; on a USB drive whose bridge smartctl's database does not know, again with SAT
    passthrough forced (-d sat), which many bridges carry; behind a SAS HBA, with -d sat only: the HBA's SCSI/ATA
    translation. None when smartctl is not there or fails."""
    if tools.which("smartctl") is None:
        notes.append("smartctl is not installed: no SMART identity or health")
        return None
    sat = ["-d", "sat"]
    tries = [sat] if drive.get("hba") else [[], sat] if drive["transport"] == "usb" else [[]]
    smart = None
    for extra in tries:
        try:
            smart = tool_output.smartctl(tools.run(["smartctl", "-j", "-a", *extra, drive["path"]], ok=None))
        except SsdbenchError as exc:
            notes.append(str(exc))
            continue
        if smart["model"]:
            break
    return smart


def _hdparm(drive, notes):
    if tools.which("hdparm") is None:
        notes.append("hdparm is not installed: ATA security state unknown")
        return None
    try:
        return tool_output.hdparm_identify(tools.run(["hdparm", "-I", drive["path"]]))
    except SsdbenchError as exc:
        notes.append(str(exc))
        return None


def _ata_identity(drive, notes, smart, ident):
    """Model, serial and firmware from ATA IDENTIFY, whichever source has it: smartctl, hdparm -I, or the
    kernel's SAT layer (VPD page 89h in sysfs). lsblk shows the SCSI INQUIRY strings instead, whose model
    is cut to 16 characters. A USB bridge that passes no ATA command leaves only its own INQUIRY strings."""
    vpd = tool_output.vpd_ata_information(sysfs.read_bytes(f"{SYS}/class/block/{drive['name']}/device/vpd_pg89") or b"")
    for source, ids in (("smartctl", smart), ("hdparm -I", ident), ("sysfs VPD page 89h", vpd)):
        if ids and ids.get("model"):
            drive.update({key: ids[key] or drive[key] for key in ("model", "serial", "firmware")})
            drive["identity_source"] = f"ATA IDENTIFY ({source})"
            return
    if drive.get("hba"):
        notes.append(
            f"the HBA ({drive['hba']['driver']}) passed no ATA command through its SCSI/ATA translation: no ATA "
            "identity, SMART or security erase; the identity shown is what its SCSI INQUIRY says"
        )
    elif drive["transport"] == "usb":
        drive["identity_source"] = "the USB bridge only (SCSI INQUIRY)"
        notes.append(
            "identity from the bridge only: the USB bridge passes no ATA command (SAT), so the model and "
            "serial shown are the bridge's, not the drive's"
        )


def _enrich_ata(drive, notes):
    smart, ident = _smartctl(drive, notes), _hdparm(drive, notes)
    _ata_identity(drive, notes, smart, ident)
    if smart:
        if drive["link"] is None or drive["link"].get("speed") is None and smart["link_current"]:
            g = SATA_GEN.get((smart["link_current"] or "").split()[0] if smart["link_current"] else "")
            drive["link"] = {
                "kind": "sata",
                "speed": smart["link_current"],
                "generation": f"SATA Gen{g}" if g else None,
                "max": smart["link_max"],
            }
        if drive["link"] is not None and smart["link_max"]:
            drive["link"]["max"] = smart["link_max"]  # the most the drive can, from its IDENTIFY
        if smart["trim_supported"] is not None:
            drive["trim_supported"] = smart["trim_supported"]
    if not ident:
        return
    security = (
        "not supported"
        if not ident["security_supported"]
        else "frozen"
        if ident["security_frozen"]
        else "enabled"
        if ident["security_enabled"]
        else "supported"
    )
    drive["erase"] = {
        "format": False,
        "sanitize": False,
        "ata_security": security,
        "ata_erase_minutes": ident["security_erase_minutes"],
    }
    drive["trim_supported"] = ident["trim_supported"] or drive.get("trim_supported")


def _enrich_scsi(drive, notes):
    """A SAS drive's model (vendor and product), serial and firmware from its standard INQUIRY and VPD page 80h
    (Unit Serial Number), as sg_inq prints them."""
    if tools.which("sg_inq") is None:
        notes.append("sg3_utils is not installed: identity comes from lsblk only")
        return
    try:
        ids = tool_output.sg_inq(tools.run(["sg_inq", drive["path"]], timeout=30))
    except SsdbenchError as exc:
        notes.append(str(exc))
        return
    model = " ".join(part for part in (ids["vendor"], ids["product"]) if part)
    drive.update({"model": model or drive["model"], "serial": ids["serial"] or drive["serial"]})
    drive["firmware"] = ids["revision"] or drive["firmware"]
    drive["identity_source"] = "SCSI INQUIRY and VPD page 80h (sg_inq)"


def describe(node, named=False, allow_usb=False, root_disks=(), boot=NO_BOOT):
    """One drive's identity and verdict, from its lsblk node."""
    name = node["name"]
    notes = []
    transport = _transport(node)
    host = host_controller(name)
    behind = _hba(name, node, host) if transport not in ("nvme", "sata", "usb", "loop") else None
    if behind:
        transport = behind[0]
    drive = {
        "name": name,
        "path": node["path"],
        "transport": transport,
        "model": (node.get("model") or "").strip() or None,
        "serial": (node.get("serial") or "").strip() or None,
        "firmware": (node.get("rev") or "").strip() or sysfs.read(f"{SYS}/class/block/{name}/device/firmware_rev"),
        # What lsblk shows: sysfs, which for a SATA or USB disk holds the SCSI INQUIRY strings.
        "identity_source": "lsblk" if transport != "loop" else None,
        "capacity_bytes": node["size"],
        "logical_block_size": node["log-sec"],
        "physical_block_size": node["phy-sec"],
        "rotational": node["rota"],
        "link": _pcie_link(name) if transport == "nvme" else _sata_link(name) if transport == "sata" else None,
        "host_controller": host,
        "hba": behind[1] if behind else None,
        "pcie_path": pcie_path(name),
        "trim_supported": bool(node.get("disc-max")),
        "erase": {"format": False, "sanitize": False, "ata_security": None},
        "temperature_source": None,
        "partitions": _partitions(name),
        "mounts": mounts(node),
    }
    if transport == "nvme":
        _enrich_nvme(drive, notes)
    elif transport in ("sata", "usb") and os.geteuid() == 0:
        _enrich_ata(drive, notes)
    elif transport == "sas" and os.geteuid() == 0:
        _enrich_scsi(drive, notes)
    hwmon = _hwmon_for(name)
    if hwmon:
        drive["temperature_source"] = f"hwmon:{hwmon}"
    elif transport == "nvme" and tools.which("nvme"):
        drive["temperature_source"] = f"nvme-smart-log:{drive.get('controller', node['path'])}"
    elif transport in ("sata", "usb", "sas") and tools.which("smartctl"):
        # a SAS drive's: smartctl reads its Temperature log page (0Dh)
        drive["temperature_source"] = f"smartctl:{node['path']}"
    # A mounted drive is refused anyway, and probing it can fail while it is busy.
    drive["signatures"] = [] if drive["mounts"] else _signatures(node["path"], notes)
    drive["confirm_id"] = drive["serial"] or name
    drive["development_target"] = transport == "loop"
    drive["notes"] = notes
    drive.update(verdict(drive, node, named, allow_usb, root_disks, boot))
    if not drive["eligible"] or not holds_an_image(_file_systems(node)):
        return drive
    notes.append("holds an ssdbench image that this system did not boot from: a drive like any other")
    return drive


def verdict(drive, node, named, allow_usb, root_disks, boot):
    name, transport = drive["name"], drive["transport"]

    def no(reason):
        return {"eligible": False, "needs_wipe_confirmation": False, "reason": reason}

    if name in root_disks:
        return no("holds the running system: never a target")
    if is_boot_stick(name, _file_systems(node), boot):
        return no("this is the ssdbench boot stick: never a target")
    if drive["mounts"]:
        return no(f"has mounted file systems ({', '.join(drive['mounts'])}): unmount them first")
    if node.get("ro"):
        return no("is read-only")
    if not drive["capacity_bytes"]:
        return no("has no medium (0 bytes)")
    if transport == "loop" and not named:
        return no("loop device: accepted only when named explicitly")
    if transport == "usb" and not allow_usb:
        return no("USB-attached: not a target by default (pass --allow-usb to test it anyway)")
    if transport == "scsi":
        return no(
            "a SCSI disk on no SAS HBA (a virtual machine's disk, iSCSI or Fibre Channel): ssdbench tests NVMe, "
            "SATA and SAS drives"
        )
    if transport not in ("nvme", "sata", "sas", "loop", "usb"):
        return no(f"not an NVMe, SATA or SAS drive (transport {transport})")
    existing = [f"partition {p}" for p in drive["partitions"]] + [f"{s} signature" for s in drive["signatures"]]
    if existing:
        return {
            "eligible": True,
            "needs_wipe_confirmation": True,
            "reason": f"holds data ({', '.join(existing)}): testing destroys it, so it needs --destroy-data",
        }
    if transport == "loop":
        return {
            "eligible": True,
            "needs_wipe_confirmation": False,
            "reason": "loop device: a development target, results are not comparable with drives",
        }
    return {"eligible": True, "needs_wipe_confirmation": False, "reason": f"empty {transport.upper()} drive"}


def _root_disks(tree):
    """Disks under the mount of / (on the appliance / is in RAM, so there are none)."""
    found = set()
    for node in tree:
        if any(m == "/" for _, m in _mounts(node)):
            found.add(node["name"])
    return found


def discover(named=(), allow_usb=False, only=None):
    """Every NVMe, SATA, SAS and USB disk, plus the devices named explicitly (loop devices only then); with `only`
    (a path), of these that one alone, the others not asked."""
    tree = _lsblk()
    by_path = {n["path"]: n for n in tree}
    roots = _root_disks(tree)
    boot = boot_stick()
    named_paths = []
    for path in named:
        real = os.path.realpath(path)
        if real not in by_path:
            if not os.path.exists(path):
                raise SsdbenchError(f"unknown drive {path}: no such device")
            nodes = [n for n in tree if n["name"] == os.path.basename(real)]
            if not nodes:
                raise SsdbenchError(f"unknown drive {path}: not a whole block device (a partition?)")
            by_path[real] = nodes[0]
        named_paths.append(real)
    drives = []
    for node in tree:
        is_named = node["path"] in named_paths
        if node["type"] not in ("disk", "loop") or (node["type"] == "loop" and not is_named):
            continue
        # memory, not drives; null_blk (nullb) is the host-cost calibration's device, with no media at all
        if re.match(r"(zram|ram|nullb)\d", node["name"]):
            continue
        if named and not is_named or only is not None and node["path"] != os.path.realpath(only):
            continue
        drives.append(describe(node, named=is_named, allow_usb=allow_usb, root_disks=roots, boot=boot))
    return drives


def find(path, allow_usb=False):
    found = discover(named=[path], allow_usb=allow_usb)
    if not found:
        raise SsdbenchError(f"{path} is not a drive ssdbench can test (memory, a partition or another kind of device)")
    return found[0]


def namespaces_in_use(drive):
    """The other namespaces of an NVMe drive's controller that are in use, each as "nvme0n2: why": mounted
    file systems, or held by another device (RAID, LVM, dm-crypt). Format and Sanitize can reach them."""
    controller = os.path.basename(drive.get("controller") or "")
    if not controller:
        return []
    found = []
    for name in sorted(os.listdir(f"{SYS}/block")):
        if name == drive["name"] or not re.fullmatch(rf"{controller}n\d+", name):
            continue
        uses = mounts(_lsblk([f"/dev/{name}"])[0])
        uses += [f"held by {h}" for h in sorted(os.listdir(f"{SYS}/block/{name}/holders"))]
        if uses:
            found.append(f"{name}: {', '.join(uses)}")
    return found


def serial_now(drive):
    """The serial of whatever is on the drive's device node now, read the same way every time, so that a run
    can tell when its drive was swapped: an NVMe controller's serial, a SATA drive's IDENTIFY serial and a SAS
    drive's Unit Serial Number (VPD page 80h) from sysfs (no process, no command to the drive), a loop
    device's backing file, else lsblk's SERIAL (a USB bridge's). None when the node is empty or says nothing."""
    name = os.path.basename(os.path.realpath(drive["path"]))
    block = f"{SYS}/class/block/{name}"
    if drive["transport"] == "loop":
        return sysfs.read(f"{block}/loop/backing_file")
    if drive["transport"] == "nvme":
        return sysfs.read(f"{block}/device/serial")
    ids = tool_output.vpd_ata_information(sysfs.read_bytes(f"{block}/device/vpd_pg89") or b"")
    if ids and ids["serial"]:
        return ids["serial"]
    if drive["transport"] == "sas":
        return tool_output.vpd_unit_serial(sysfs.read_bytes(f"{block}/device/vpd_pg80") or b"")
    if not os.path.exists(block):
        return None
    try:
        nodes = _lsblk([drive["path"]])
    except SsdbenchError:
        return None
    return (nodes[0].get("serial") or "").strip() or None


def io_ticks(path):
    """(stat file, ms) of the kernel's io_ticks for the device at `path`: the time, in ms, during which it had
    at least one IO in flight (field 10 of its stat file), or None when the kernel does not count it.

    The stat file is that of the device itself, as fio opens it: a partition's or a dm device's own counts
    only the IOs sent to it, where its disk's, or the disks under it, also count others. A queue whose
    iostats is off counts nothing."""
    name = os.path.basename(os.path.realpath(path))
    stat = f"{SYS}/class/block/{name}/stat"
    fields = (sysfs.read(stat) or "").split()
    if sysfs.read(f"{SYS}/class/block/{name}/queue/iostats") == "0" or len(fields) < 10 or not fields[9].isdigit():
        return None
    return stat, int(fields[9])


def capacity(path):
    """The size now, from sysfs: 0 or missing when the drive is gone."""
    size = sysfs.read(f"{SYS}/class/block/{os.path.basename(os.path.realpath(path))}/size")
    return int(size) * 512 if size else 0
