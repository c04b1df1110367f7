"""Writes that survive a power cut: the appliance's only disk is a USB stick someone may pull, or a testbed
whose power may go, so a result is on the disk before anything says it is there."""

import os


def sync_dir(path):
    """A folder's entries (a new or renamed file in it) to the disk."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_folder(folder):
    """Every file in a folder, and the folder itself, to the disk."""
    if not os.path.isdir(folder):
        return
    for name in os.listdir(folder):
        fd = os.open(os.path.join(folder, name), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    sync_dir(folder)
