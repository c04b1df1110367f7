"""Read the small text files of sysfs and procfs, where a missing file is an answer, not an error."""


def read(path, missing=None):
    """The file's text without surrounding whitespace, or `missing` when it cannot be read."""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return missing


def read_bytes(path):
    """The file's bytes (a binary attribute, such as a SCSI VPD page), or None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None
