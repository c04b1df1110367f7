"""The mounted file systems, as the kernel lists them (/proc/self/mounts)."""

import re


def table():
    """(source, mount point, file system type) of each mount, in the kernel's order, the last mounted last. The
    kernel writes a space, tab, newline or backslash in a field as an octal escape: each is read back."""
    with open("/proc/self/mounts") as f:
        rows = [line.split()[:3] for line in f]
    return [tuple(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field) for field in row) for row in rows]
