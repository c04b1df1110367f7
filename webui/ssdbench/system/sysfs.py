"""Read the small text files of sysfs and procfs, where a missing file is an answer, not an error."""


def read(path, missing=None):
    """The file's text without surrounding whitespace, or `missing` when it cannot be read."""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return missing
