"""Find and start the external tools: always an argv list, never a shell."""

import os
import re
import shutil
import subprocess

from ..errors import SsdbenchError
from . import redact

# What to install when a tool is missing, by the name of its command.
PACKAGES = {
    "fio": "fio",
    "nvme": "nvme-cli",
    "smartctl": "smartmontools",
    "hdparm": "hdparm",
    "sg_inq": "sg3-utils",
    "sg_sanitize": "sg3-utils",
    "sg_format": "sg3-utils",
    "lsblk": "util-linux",
    "blkdiscard": "util-linux",
    "wipefs": "util-linux",
}


def which(name):
    return shutil.which(name)


def require(name):
    path = which(name)
    if path is None:
        raise SsdbenchError(
            f"{name} is not installed (not found in PATH); install the {PACKAGES.get(name, name)} package"
        )
    return path


def run(argv, timeout=60, ok=(0,), binary=False):
    """Run a tool to completion and return its stdout; a clear error if it fails. Its stdin is /dev/null, never
    the caller's: on the appliance the services' stdin is the console, and a tool that sees a terminal may ask
    it a question nobody answers, or refuse (blkdiscard refuses to purge a drive that held a partition table).
    Its environment holds none of the caller's secrets (the PIN, a lab's token): no tool needs one. `binary`:
    its stdout as bytes (a raw data buffer), not text."""
    argv = [require(argv[0]), *argv[1:]]
    as_text = {} if binary else {"text": True, "errors": "replace"}
    try:
        proc = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            env=redact.environment(os.environ),
            capture_output=True,
            timeout=timeout,
            **as_text,
        )
    except subprocess.TimeoutExpired as exc:
        raise SsdbenchError(f"{os.path.basename(argv[0])} did not finish within {timeout} s") from exc
    if ok is not None and proc.returncode not in ok:
        said = proc.stderr or proc.stdout
        msg = (said.decode(errors="replace") if binary else said).strip().splitlines()
        raise SsdbenchError(
            f"{' '.join(argv[:1] + argv[1:4])} failed (exit {proc.returncode}): {msg[-1] if msg else 'no message'}"
        )
    return proc.stdout


def version(name):
    """The first line a tool prints of its own version, or why there is none."""
    flags = {"fio": ["--version"], "nvme": ["version"], "hdparm": ["-V"], "smartctl": ["--version"]}
    if which(name) is None:
        return "not installed"
    try:
        out = run([name, *flags.get(name, ["--version"])], timeout=10, ok=None)
    except SsdbenchError as exc:
        return f"unknown ({exc})"
    return next((line.strip() for line in out.splitlines() if line.strip()), "unknown")


def _fio_help(option):
    """fio's own help of one of its options (`fio --cmdhelp`): empty where there is no fio to ask."""
    try:
        return run([require("fio"), f"--cmdhelp={option}"], timeout=10, ok=None)
    except SsdbenchError:
        return ""


def fio_knows(option):
    """Whether fio's own help knows an option: a stock fio lacks our patches' options."""
    return re.search(rf"^\s*{re.escape(option)}:", _fio_help(option), re.M) is not None


def fio_values(option):
    """The values that fio's own help lists for one of its options: empty where it lists none."""
    out = _fio_help(option)
    # "        valid values: 0          Do not scramble buffers" and "                    : hash       Hashed ..."
    return set(re.findall(r"^\s*(?:valid values)?\s*:\s+(\S+)\s", out, re.M))
