"""Return a drive to its fresh state, recording which method was used and how long it took.

The engine's method is a whole-device discard (NVMe deallocate, SATA TRIM, hole
punching on a loop device), or zero-filling where the device cannot discard.
"""

import time

from . import tools

PURGE_TIMEOUT_S = 6 * 3600


def purge(drive):
    if drive.get("trim_supported"):
        method, argv = "discard (whole device: NVMe deallocate / ATA TRIM)", ["blkdiscard", drive["path"]]
    else:
        method, argv = "zero-fill (the device cannot discard)", ["blkdiscard", "--zeroout", drive["path"]]
    started = time.monotonic()
    tools.run(argv, timeout=PURGE_TIMEOUT_S)
    return {"method": method, "command": argv, "seconds": round(time.monotonic() - started, 3)}
