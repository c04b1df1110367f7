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


def replace_file(path, text):
    """`text` into the file at `path`, whole or not at all: written beside it, synced, renamed over it, and the
    rename synced. A power cut leaves the old file or the new one, never part of one."""
    folder = os.path.dirname(path) or "."
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    sync_dir(folder)


def remove_file(path):
    """The file gone, and its going on the disk; a file already gone is fine."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    sync_dir(os.path.dirname(path) or ".")
