"""The block device the host-cost calibration plays its jobs through, so that the kernel's cost of each IO (the
system call, the block layer, the completion) is measured with fio's (docs/methodology.md, "The host's share of
a figure").

null_blk (/dev/nullb0, built into the appliance's kernel) completes every IO at once, with no media and no data
moved: what is left is the host's path. Where it is missing (a tester's own Linux, a CI host), the stand-in is a
loop device on a file in tmpfs, with direct IO where the loop takes it: the same path down to the loop driver,
whose own work runs in its kernel worker, off fio's time. What was used, and why, is said in the run.
"""

import contextlib
import os
import subprocess

from ..errors import SsdbenchError
from ..system import mounts

NULL_BLK = "/dev/nullb0"
# A span the stand-in's file in RAM can hold on any PC: 64 MiB, sparse until written.
SPAN = 64 * 2**20
SHM = "/dev/shm"


def tmpfs(path):
    """Whether `path` is a tmpfs mount point."""
    try:
        return any((point, fstype) == (path, "tmpfs") for _, point, fstype in mounts.table())
    except OSError:
        return False


def losetup(*args):
    done = subprocess.run(["losetup", *args], capture_output=True, text=True)
    if done.returncode:
        raise SsdbenchError(f"losetup {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout.strip()


@contextlib.contextmanager
def stand_in(name):
    """A loop device on a SPAN-byte file `name` in tmpfs, with direct IO if the loop takes it; detached and the
    file removed on leaving. Yields (device, what it is in words)."""
    if not tmpfs(SHM):
        raise SsdbenchError(f"null_blk is not in this kernel ({NULL_BLK} absent), and {SHM} is no tmpfs")
    image = os.path.join(SHM, name)
    with open(image, "wb") as f:
        f.truncate(SPAN)
    try:
        try:
            dev = losetup("--find", "--show", "--direct-io=on", image)
        except SsdbenchError:  # a loop that takes no direct IO (or a losetup without the option): buffered
            dev = losetup("--find", "--show", image)
        try:
            with open(f"/sys/block/{os.path.basename(dev)}/loop/dio") as f:
                dio = "direct IO" if f.read().strip() == "1" else "buffered IO (the loop took no direct IO)"
            yield (
                dev,
                f"stand-in: {dev}, a loop device with {dio} on a {SPAN // 2**20} MiB file in tmpfs ({SHM}): "
                f"null_blk is not in this kernel ({NULL_BLK} absent)",
            )
        finally:
            subprocess.run(["losetup", "-d", dev], capture_output=True)
    finally:
        os.unlink(image)


@contextlib.contextmanager
def device(name):
    """The device to calibrate through: null_blk where the kernel has it, else the stand-in. Yields (device,
    what it is in words); SsdbenchError where neither can be had."""
    if os.path.exists(NULL_BLK):
        yield NULL_BLK, f"null_blk: {NULL_BLK}, the kernel's null block device"
        return
    with stand_in(name) as found:
        yield found
