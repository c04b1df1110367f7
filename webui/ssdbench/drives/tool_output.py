"""Turn the text that nvme-cli, smartctl, hdparm, lsblk and blkid print into plain values.

Nothing here starts a process or touches a device, so every function is tested on outputs captured
from the real tools (tests/data/).
"""

import json
import re

from ..errors import SsdbenchError


def _load_json(text, tool):
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SsdbenchError(f"{tool} did not print valid JSON: {exc}") from exc


def lsblk(text):
    """The block device tree from `lsblk -J -b -o ...`."""
    return _load_json(text, "lsblk").get("blockdevices", [])


def blkid(text):
    """What `blkid -p -o export DEV` found on a device (TYPE, LABEL, ...); empty when it found nothing."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def nvme_list(text):
    """Devices from `nvme list -o json`, flattened to one dict per namespace."""
    return _load_json(text, "nvme list").get("Devices", [])


def nvme_id_ctrl(text):
    doc = _load_json(text, "nvme id-ctrl")
    oacs = int(doc.get("oacs", 0))
    sanicap = int(doc.get("sanicap", 0))
    return {
        "model": str(doc.get("mn", "")).strip(),
        "serial": str(doc.get("sn", "")).strip(),
        "firmware": str(doc.get("fr", "")).strip(),
        "format_supported": bool(oacs & 0x2),
        # FNA bit 2: cryptographic erase; Format with SES=1 (user data erase) is always allowed when Format is.
        "crypto_erase_supported": bool(int(doc.get("fna", 0)) & 0x4),
        # FNA bits 0 and 1: a Format, or its secure erase, acts on every namespace of the controller.
        "format_all_namespaces": bool(int(doc.get("fna", 0)) & 0x3),
        "sanitize_supported": bool(sanicap & 0x7),
        "sanitize_block_erase": bool(sanicap & 0x2),
        "sanitize_crypto_erase": bool(sanicap & 0x1),
        "sanitize_overwrite": bool(sanicap & 0x4),
        "apst_supported": bool(int(doc.get("apsta", 0)) & 0x1),
        "warning_temp_k": int(doc.get("wctemp", 0)) or None,
        "critical_temp_k": int(doc.get("cctemp", 0)) or None,
        "dataset_management": bool(int(doc.get("oncs", 0)) & 0x4),
        # VWC bit 0: the controller has a volatile write cache, which Set Features 06h turns on and off.
        "volatile_write_cache": bool(int(doc.get("vwc", 0)) & 0x1),
    }


# The health log's counters that rise while an NVMe drive is hot: minutes above its warning and critical
# temperatures, and how often and for how many seconds it throttled (thermal management temperatures 1 and 2,
# NVMe 1.3+), as nvme-cli names them.
NVME_THERMAL = (
    "warning_temp_time",
    "critical_comp_time",
    "thm_temp1_trans_count",
    "thm_temp2_trans_count",
    "thm_temp1_total_time",
    "thm_temp2_total_time",
)
# ATA Device Statistics, page 5 (ACS-3): the minutes the drive ran above its specified operating temperature.
ATA_OVER_TEMPERATURE = "Time in Over-Temperature"


def nvme_smart_log(text):
    doc = _load_json(text, "nvme smart-log")
    writes = _nvme_host_writes(int(doc.get("data_units_written", 0)))
    return {
        "temperature_c": int(doc["temperature"]) - 273 if "temperature" in doc else None,
        "data_units_written": writes["raw"],
        "host_bytes_written": writes["bytes"],
        "host_writes": writes,
        "percent_used": doc.get("percent_used"),
        "thermal": {key: int(doc[key]) for key in NVME_THERMAL if key in doc},
        "raw": doc,
    }


def smartctl(text):
    """The fields of `smartctl -j -a` that identity and health need.

    smartctl's exit status is a bit mask that is often non-zero on healthy drives,
    so the JSON, not the status, says whether it worked.
    """
    doc = _load_json(text, "smartctl")
    messages = [m.get("string", "") for m in doc.get("smartctl", {}).get("messages", [])]
    speed = doc.get("interface_speed", {})
    writes = _smartctl_host_writes(doc)
    return {
        "model": doc.get("model_name"),
        "serial": doc.get("serial_number"),
        "firmware": doc.get("firmware_version"),
        "capacity_bytes": doc.get("user_capacity", {}).get("bytes"),
        "logical_block_size": doc.get("logical_block_size"),
        "physical_block_size": doc.get("physical_block_size"),
        "protocol": doc.get("device", {}).get("protocol"),
        "link_current": speed.get("current", {}).get("string"),
        "link_max": speed.get("max", {}).get("string"),
        "sata_version": doc.get("sata_version", {}).get("string"),
        "trim_supported": doc.get("trim", {}).get("supported"),
        "temperature_c": doc.get("temperature", {}).get("current"),
        "host_bytes_written": writes["bytes"] if writes else None,
        "host_writes": writes,
        "messages": messages,
        "thermal": _smartctl_thermal(doc),
        "raw": doc,
    }


def _smartctl_thermal(doc):
    """The counters of time spent hot that smartctl printed: an NVMe drive's health log's, or an ATA drive's
    Device Statistics entry (only where the drive marks it valid)."""
    nvme = doc.get("nvme_smart_health_information_log") or {}
    found = {key: int(nvme[key]) for key in NVME_THERMAL if key in nvme}
    for page in (doc.get("ata_device_statistics") or {}).get("pages", []):
        for entry in page.get("table", []):
            if entry.get("name") == ATA_OVER_TEMPERATURE and (entry.get("flags") or {}).get("valid"):
                found[ATA_OVER_TEMPERATURE] = int(entry["value"])
    return found


# Bytes per unit of the host-writes attributes named in smartctl's drive database (drivedb.h 7.3/5319).
# The database names each attribute per drive model, and the name is all that says the unit, so a
# counter is read by its name, never by its id. GB is decimal: the database writes GiB where a drive
# counts binary units and notes where a GB counter is not one. Total_LBAs_Written is in logical blocks,
# sized per drive.
_HOST_WRITES_UNITS = {
    "Host_Writes_32MiB": ("32 MiB", 32 << 20),
    "Host_Writes_MiB": ("MiB", 1 << 20),
    "Host_Writes_GiB": ("GiB", 1 << 30),
    "Lifetime_Writes_GiB": ("GiB", 1 << 30),
    "Total_Writes_GiB": ("GiB", 1 << 30),
    "Total_Writes_GB": ("GB", 10**9),
    "Lifetime_Wts_Frm_Hst_GB": ("GB", 10**9),
}
# Names that count host writes without saying in what (Host_Writes, Lifetime_Writes, Total_Host_Writes,
# the low half Total_LBAs_Written_Low of a split counter), kept raw. NAND and flash counters
# (NAND_Writes_1GiB, Flash_Writes_GiB) are what the drive wrote to its media, not what the host sent,
# and do not match.
_HOST_WRITES_NAME = re.compile(r"(Host|Total|Lifetime)_(Host_)?(Writes|LBAs_Written)")


def _host_writes(attribute, name, raw, unit, unit_bytes):
    return {
        "attribute": attribute,
        "name": name,
        "raw": raw,
        "unit": unit,
        "bytes": None if unit_bytes is None else raw * unit_bytes,
    }


def _nvme_host_writes(data_units):
    return _host_writes("data_units_written", "Data Units Written", data_units, "data units of 512000 B", 512000)


def _smartctl_host_writes(doc):
    nvme = doc.get("nvme_smart_health_information_log")
    if nvme and "data_units_written" in nvme:
        return _nvme_host_writes(nvme["data_units_written"])
    block = doc.get("logical_block_size") or 512
    found = [_ata_host_writes(attr, block) for attr in doc.get("ata_smart_attributes", {}).get("table", [])]
    # A drive can carry a counter that does not say its unit besides one that does (OCZ's 232
    # Lifetime_Writes next to 241 under smartctl's default name): the first one in a known unit wins.
    return min((w for w in found if w), key=lambda w: w["bytes"] is None, default=None)


def _ata_host_writes(attr, block):
    name = attr.get("name", "")
    if name == "Total_LBAs_Written":
        unit, unit_bytes = f"logical blocks of {block} B", block
    elif name in _HOST_WRITES_UNITS:
        unit, unit_bytes = _HOST_WRITES_UNITS[name]
    elif _HOST_WRITES_NAME.match(name):
        unit, unit_bytes = "unit unknown", None
    else:
        return None
    return _host_writes(attr["id"], name, attr["raw"]["value"], unit, unit_bytes)


def nvme_feature_value(text):
    """The current value of a feature from `nvme get-feature DEV -f ID`: nvme-cli 2.3 prints "Current
    value:0x00000001", and a value of 0 as "00000000" (C's %#x leaves out the 0x of a zero)."""
    m = re.search(r"Current value:\s*(?:0x)?([0-9a-fA-F]+)", text)
    if not m:
        raise SsdbenchError(f"nvme get-feature printed no current value: {text.strip()[:200]!r}")
    return int(m.group(1), 16)


def hdparm_write_cache(text):
    """Whether the drive's write cache is on, from `hdparm -W DEV` (" write-caching =  1 (on)")."""
    m = re.search(r"write-caching\s*=\s*([01])\b", text)
    if not m:
        raise SsdbenchError(f"hdparm -W printed no write-caching state: {text.strip()[:200]!r}")
    return m.group(1) == "1"


_HDPARM_FIELDS = {
    "model": re.compile(r"^\s*Model Number:\s*(.*?)\s*$", re.M),
    "serial": re.compile(r"^\s*Serial Number:\s*(.*?)\s*$", re.M),
    "firmware": re.compile(r"^\s*Firmware Revision:\s*(.*?)\s*$", re.M),
    "logical_block_size": re.compile(r"^\s*Logical\s+Sector size:\s*(\d+) bytes", re.M),
    "physical_block_size": re.compile(r"^\s*Physical Sector size:\s*(\d+) bytes", re.M),
}


def hdparm_identify(text):
    """The identity, TRIM, link and ATA security state from `hdparm -I`."""
    out = {}
    for key in ("model", "serial", "firmware"):
        m = _HDPARM_FIELDS[key].search(text)
        out[key] = m.group(1) if m else None
    for key in ("logical_block_size", "physical_block_size"):
        m = _HDPARM_FIELDS[key].search(text)
        out[key] = int(m.group(1)) if m else None
    m = re.search(r"^\s*LBA48\s+user addressable sectors:\s*(\d+)", text, re.M) or re.search(
        r"^\s*LBA\s+user addressable sectors:\s*(\d+)", text, re.M
    )
    out["sectors"] = int(m.group(1)) if m else None
    out["trim_supported"] = bool(re.search(r"Data Set Management TRIM supported", text))
    gens = re.findall(r"Gen(\d) signaling speed \(([\d.]+Gb/s)\)", text)
    out["sata_generations"] = [f"SATA Gen{g} ({s})" for g, s in gens]
    security = text.split("Security:", 1)[1] if "Security:" in text else ""
    security = security.split("Logical Unit WWN", 1)[0].split("Checksum:", 1)[0]

    def flag(word):
        # hdparm prints "\tnot\tfrozen" or "\t\tfrozen": the word "not" comes before it.
        m = re.search(rf"^\s*(not)?\s*{word}\s*$", security, re.M)
        return None if m is None else m.group(1) is None

    out["security_supported"] = flag("supported")
    out["security_enabled"] = flag("enabled")
    out["security_frozen"] = flag("frozen")
    out["security_erase_minutes"] = _erase_minutes(security)
    return out


def _erase_minutes(security):
    m = re.search(r"(\d+)min for SECURITY ERASE UNIT", security)
    return int(m.group(1)) if m else None


def _ata_string(data, first_word, words):
    """An ATA IDENTIFY string: each 16-bit word holds two characters, the first in its high byte."""
    raw = data[first_word * 2 : (first_word + words) * 2]
    swapped = bytes(raw[i ^ 1] for i in range(len(raw)))
    return swapped.decode("ascii", "replace").strip() or None


def vpd_ata_information(data):
    """Model, serial and firmware from SCSI VPD page 89h (ATA Information), which carries the drive's own
    512-byte IDENTIFY DEVICE data from byte 60 (SAT-4, 12.4.2): the whole 40-character model, where the
    INQUIRY string that lsblk shows holds only 16. None when the page is not an ATA Information page."""
    if len(data) < 60 + 512 or data[1] != 0x89:
        return None
    identify = data[60 : 60 + 512]
    return {
        "serial": _ata_string(identify, 10, 10),
        "firmware": _ata_string(identify, 23, 4),
        "model": _ata_string(identify, 27, 20),
    }


_SG_INQ_FIELDS = {
    "vendor": "Vendor identification",
    "product": "Product identification",
    "revision": "Product revision level",
    "serial": "Unit serial number",
}


def sg_inq(text):
    """Vendor, product, revision (standard INQUIRY) and serial (VPD page 80h, Unit Serial Number) from `sg_inq
    DEV`; each None when sg_inq printed none."""
    found = {}
    for key, label in _SG_INQ_FIELDS.items():
        m = re.search(rf"^\s*{label}:[ \t]*(.*?)\s*$", text, re.M)
        found[key] = (m.group(1) if m else "") or None
    if not any(found.values()):
        raise SsdbenchError(f"sg_inq printed no INQUIRY data: {text.strip()[:200]!r}")
    return found


def vpd_unit_serial(data):
    """The serial from SCSI VPD page 80h (Unit Serial Number: a 4-byte header, then the serial in ASCII, SPC-5
    7.7.21), as sysfs holds it; None when the page is not that page or holds no serial."""
    if len(data) < 4 or data[1] != 0x80:
        return None
    length = int.from_bytes(data[2:4], "big")
    return data[4 : 4 + length].decode("ascii", "replace").strip(" \0") or None
