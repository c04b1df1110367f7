"""ssdbench: a bootable SSD test appliance built around locked fio suites.

The release name has one source, git describe. An image carries it in /etc/ssdbench-release
(board/ssdbench/post-build.sh writes it at build time); a package build is given it as
$SSDBENCH_VERSION (package/ssdbench/ssdbench.mk); a checkout asks git.
"""

import os
import re
import subprocess

RELEASE_FILE = "/etc/ssdbench-release"


def _release():
    try:
        with open(RELEASE_FILE) as f:
            for line in f:
                if line.startswith("VERSION="):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    if os.environ.get("SSDBENCH_VERSION"):
        return os.environ["SSDBENCH_VERSION"]
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        proc = subprocess.run(
            ["git", "-C", checkout, "describe", "--tags", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else "unknown"


def pep440(release):
    """git describe's name as a Python package version: v1.2-3-gabc1234-dirty is 1.2.post3+gabc1234.dirty,
    and a bare commit abc1234 (no tag yet) is 0+gabc1234."""
    m = re.fullmatch(r"v?(\d+(?:\.\d+)*)(?:-(\d+)-g([0-9a-f]+))?(-dirty)?", release)
    if m:
        local = ".".join(filter(None, [m[3] and f"g{m[3]}", m[4] and "dirty"]))
        return m[1] + (f".post{m[2]}" if m[2] else "") + (f"+{local}" if local else "")
    local = re.sub(r"[^A-Za-z0-9]+", ".", release).strip(".")
    return f"0+g{local}" if re.fullmatch(r"[0-9a-f]+(\.dirty)?", local) else f"0+{local or 'unknown'}"


__version__ = _release()
PACKAGE_VERSION = pep440(__version__)
