"""Return a drive to its fresh state by the strongest method it supports, and time a whole-drive TRIM.

The order is the methodology's: NVMe Format with user data erase, else Sanitize (block
erase), else deallocate; SATA ATA Security Erase when supported and not frozen, else
TRIM (behind a SAS HBA, both through its SCSI/ATA translation); SAS SCSI Sanitize (block
erase), else Format Unit, else UNMAP, else zero-fill; anything else (a loop device, a USB
bridge) is discarded or zero-filled. Every method tried is recorded with why it was not
used, so the result says what happened.
"""

import json
import time

from ..errors import SsdbenchError
from ..system import tools
from . import discovery, tool_output

PURGE_TIMEOUT_S = 6 * 3600
SANITIZE_POLL_S = 5
# A throwaway password: ATA Security Erase needs one set, and a successful erase clears it.
ATA_PASSWORD = "ssdbench"


def _nvme_format(drive, busy):
    erase = drive.get("erase") or {}
    if not erase.get("format"):
        return None, "the controller does not support Format NVM"
    if erase.get("format_all_namespaces") and busy:
        return None, f"the controller formats every namespace at once, and another is in use ({'; '.join(busy)})"
    # --ses=1 is the user data erase; the LBA format stays as it is.
    argv = ["nvme", "format", drive["path"], "--ses=1", "--force", f"--timeout={PURGE_TIMEOUT_S * 1000}"]
    tools.run(argv, timeout=PURGE_TIMEOUT_S)
    return argv, None


def _nvme_sanitize(drive, busy):
    erase = drive.get("erase") or {}
    if not erase.get("sanitize_block_erase"):
        return None, "the controller does not support Sanitize block erase"
    if busy:
        return None, f"Sanitize erases every namespace of the controller, and another is in use ({'; '.join(busy)})"
    ctrl = drive.get("controller", drive["path"])
    argv = ["nvme", "sanitize", ctrl, "--sanact=2"]
    tools.run(argv, timeout=60)
    deadline = time.monotonic() + PURGE_TIMEOUT_S
    while time.monotonic() < deadline:
        log = json.loads(tools.run(["nvme", "sanitize-log", ctrl, "-o", "json"], timeout=30))
        # nvme-cli prints the log flat or keyed by the controller's name, depending on its version.
        status = log if "sstat" in log else next((v for v in log.values() if isinstance(v, dict)), {})
        state = int(status.get("sstat", 0)) & 0x7
        if state in (1, 4):  # completed (4: completed without deallocation)
            return argv, None
        if state == 3:
            raise SsdbenchError("the drive reported that Sanitize failed")
        time.sleep(SANITIZE_POLL_S)
    raise SsdbenchError(f"Sanitize did not finish in {PURGE_TIMEOUT_S} s")


def _ata_security_erase(drive, busy):
    try:
        ident = tool_output.hdparm_identify(tools.run(["hdparm", "-I", drive["path"]], timeout=30))
    except SsdbenchError as exc:
        if not drive.get("hba"):
            raise
        ident = {"model": None, "error": str(exc)}
    if drive.get("hba") and not ident["model"]:
        said = f" ({ident['error']})" if "error" in ident else ""
        return None, (
            f"the HBA ({drive['hba']['driver']}) passes no ATA command through its SCSI/ATA translation, so ATA "
            f"Security Erase cannot reach the drive: hdparm -I read no IDENTIFY{said}"
        )
    if not ident["security_supported"]:
        return None, "the drive does not support the ATA security feature set"
    if ident["security_frozen"]:
        return None, (
            "the drive is frozen (the BIOS froze its security state at boot); "
            "suspend and resume the testbed, or hot-plug the drive, to unfreeze it"
        )
    if ident["security_enabled"]:
        return None, "a user password is already set on the drive; ssdbench will not guess or override it"
    minutes = ident["security_erase_minutes"] or 60
    tools.run(["hdparm", "--user-master", "u", "--security-set-pass", ATA_PASSWORD, drive["path"]], timeout=60)
    argv = ["hdparm", "--user-master", "u", "--security-erase", ATA_PASSWORD, drive["path"]]
    tools.run(argv, timeout=minutes * 60 * 2 + 600)
    return argv, None


def _scsi_sanitize(drive, busy):
    # --quick: no 15 s countdown; sg_sanitize sets IMMED and polls the drive's progress until it is done.
    argv = ["sg_sanitize", "--block", "--quick", drive["path"]]
    tools.run(argv, timeout=PURGE_TIMEOUT_S)
    return argv, None


def _scsi_format(drive, busy):
    # The logical block size and protection stay as they are; sg_format polls the drive's progress too.
    argv = ["sg_format", "--format", "--quick", drive["path"]]
    tools.run(argv, timeout=PURGE_TIMEOUT_S)
    return argv, None


def _discard(drive, busy=()):
    if not drive.get("trim_supported"):
        return None, "the device does not support discard (TRIM / deallocate)"
    argv = ["blkdiscard", drive["path"]]
    tools.run(argv, timeout=PURGE_TIMEOUT_S)
    return argv, None


def _zero_fill(drive, busy):
    argv = ["blkdiscard", "--zeroout", drive["path"]]
    tools.run(argv, timeout=PURGE_TIMEOUT_S)
    return argv, None


METHODS = {
    "nvme": [
        ("NVMe Format NVM, user data erase", _nvme_format),
        ("NVMe Sanitize, block erase", _nvme_sanitize),
        ("NVMe deallocate (whole namespace)", _discard),
    ],
    "sata": [("ATA Security Erase", _ata_security_erase), ("ATA TRIM (whole device)", _discard)],
    "sas": [
        ("SCSI Sanitize, block erase", _scsi_sanitize),
        ("SCSI Format Unit", _scsi_format),
        ("SCSI UNMAP (whole device)", _discard),
        ("zero-fill (the device cannot discard)", _zero_fill),
    ],
}
OTHER = [("discard (whole device)", _discard), ("zero-fill (the device cannot discard)", _zero_fill)]
# The methods that erase the drive as the articles' secure erase did, which every suite's purge asks for (the
# methodology, section 1). The others only tell the drive that every block is free (deallocate, TRIM, discard) or
# write over every block (zero-fill), and leave its flash as they found it: a run purged by one is flagged.
ERASES = (
    "NVMe Format NVM, user data erase",
    "NVMe Sanitize, block erase",
    "ATA Security Erase",
    "SCSI Sanitize, block erase",
    "SCSI Format Unit",
)
# How a method's reason says the drive lacks it (the methods above, and runs recorded before this was named):
# any other reason it was not used (frozen, a password set, another namespace in use, a failure) is the testbed's.
LACKS = "does not support"


def offered(attempt):
    """Whether the drive offers a method a purge tried (an attempt as purge() records it)."""
    return not (attempt.get("outcome") == "not available" and LACKS in str(attempt.get("reason")))


def purge(drive, busy=None):
    """Purge with the first method that works; returns the method, its command and every attempt. A method
    that would reach another namespace in use (`busy`, looked up now if not given) is never used."""
    if busy is None:
        busy = discovery.namespaces_in_use(drive) if drive["transport"] == "nvme" else []
    attempts = []
    for name, method in METHODS.get(drive["transport"], OTHER):
        started = time.monotonic()
        try:
            argv, why_not = method(drive, busy)
        except SsdbenchError as exc:
            attempts.append({"method": name, "outcome": "failed", "reason": str(exc)})
            continue
        if argv is None:
            attempts.append({"method": name, "outcome": "not available", "reason": why_not})
            continue
        attempts.append({"method": name, "outcome": "used"})
        return {"method": name, "command": argv, "seconds": time.monotonic() - started, "attempts": attempts}
    raise SsdbenchError("no purge method worked: " + "; ".join(f"{a['method']}: {a['reason']}" for a in attempts))


def timed_trim(drive):
    """TRIM the whole drive and time it: the torture test's step 4."""
    started = time.monotonic()
    argv, why_not = _discard(drive)
    if argv is None:
        raise SsdbenchError(f"cannot TRIM {drive['path']}: {why_not}")
    return {"command": argv, "seconds": time.monotonic() - started}
