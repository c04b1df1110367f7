"""The web UI's PIN and session key, made on first use and kept in the data directory, readable by root only.

The appliance shows the PIN on its console (`ssdbench pin`), so whoever sits at the
testbed can hand it out; a browser elsewhere on the network needs it to log in.
"""

import os
import secrets

PIN_FILE = "web-pin"
KEY_FILE = "web-secret-key"


def _read_or_make(data_dir, name, make):
    """The file's content, or a new value written with mode 0600. The file appears whole (written
    beside it, then linked into place), so two processes starting at once agree on one value."""
    path = os.path.join(data_dir, name)
    if not os.path.exists(path):
        os.makedirs(data_dir, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(make() + "\n")
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process was first: use its value
        finally:
            os.unlink(tmp)
    with open(path) as f:
        return f.read().strip()


def pin(data_dir, override=None):
    """The login PIN: `override` (config or $SSDBENCH_PIN) if given, else six random digits kept in data_dir."""
    override = override or os.environ.get("SSDBENCH_PIN")
    if override:
        return override
    return _read_or_make(data_dir, PIN_FILE, lambda: f"{secrets.randbelow(10**6):06d}")


def secret_key(data_dir):
    """The key that signs session cookies: random, and kept so that a restart does not log everyone out."""
    return _read_or_make(data_dir, KEY_FILE, lambda: secrets.token_hex(32))
