"""The web UI's PIN, session key and session epoch, made on first use and kept in the data directory,
readable by root only.

The appliance shows the PIN on its console (`ssdbench pin`), so whoever sits at the
testbed can hand it out; a browser elsewhere on the network needs it to log in.
A session is valid only for the epoch it logged in under: logging out, or a new PIN,
starts a new epoch and so ends every session at once.
"""

import hashlib
import hmac
import os
import re
import secrets

from ..errors import SsdbenchError
from ..system import durable

PIN_FILE = "web-pin"
KEY_FILE = "web-secret-key"
EPOCH_FILE = "web-sessions"
PIN_DIGITS = 6
PIN_PATTERN = re.compile(rf"[0-9]{{{PIN_DIGITS},32}}")


def _write(data_dir, name, value, replace):
    """`value` into the file, whole and on the disk: written beside it with mode 0600, synced, then moved
    into place (replace) or linked there if it is still missing, so that two processes starting at once
    agree on one value."""
    os.makedirs(data_dir, exist_ok=True)
    path = os.path.join(data_dir, name)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")
        f.flush()
        os.fsync(f.fileno())
    try:
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
    except FileExistsError:
        pass  # another process was first: use its value
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    durable.sync_dir(data_dir)


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def _read_or_make(data_dir, name, make, valid):
    """The file's value, or a new one if the file is missing, or empty or not `valid` (cut off by a power
    cut, or edited by hand)."""
    path = os.path.join(data_dir, name)
    value = _read(path)
    if value is None or not valid(value):
        # A missing file is linked into place, so the first of two processes wins; a broken one is replaced.
        _write(data_dir, name, make(), replace=value is not None)
        value = _read(path)
    return value


def _new_token():
    return secrets.token_hex(16)


def _long_enough(value):
    return len(value) >= 32


def _random_pin():
    return f"{secrets.randbelow(10**PIN_DIGITS):0{PIN_DIGITS}d}"


def check_pin_value(value, origin):
    """A PIN given by hand: digits only, at least six of them (a million guesses)."""
    if not PIN_PATTERN.fullmatch(value):
        raise SsdbenchError(f"{origin}: a PIN is {PIN_DIGITS} to 32 digits, nothing else")
    return value


def pin(data_dir, override=None):
    """The login PIN: `override` (config or $SSDBENCH_PIN) if given, else six random digits kept in data_dir."""
    if override:
        return check_pin_value(str(override), "the configured PIN")
    if os.environ.get("SSDBENCH_PIN"):
        return check_pin_value(os.environ["SSDBENCH_PIN"], "$SSDBENCH_PIN")
    return _read_or_make(data_dir, PIN_FILE, _random_pin, PIN_PATTERN.fullmatch)


def new_pin(data_dir):
    """A new random PIN in place of the old one; every session ends with the old PIN."""
    value = _random_pin()
    _write(data_dir, PIN_FILE, value, replace=True)
    end_sessions(data_dir)
    return value


def secret_key(data_dir):
    """The key that signs session cookies: random, and kept so that a restart does not log everyone out."""
    return _read_or_make(data_dir, KEY_FILE, lambda: secrets.token_hex(32), _long_enough)


def end_sessions(data_dir):
    """A new epoch: every session logged in before now is over."""
    _write(data_dir, EPOCH_FILE, _new_token(), replace=True)


def session_epoch(data_dir, current_pin):
    """What a session must carry to be valid: it changes with a new epoch and with a new PIN."""
    token = _read_or_make(data_dir, EPOCH_FILE, _new_token, _long_enough)
    return hmac.new(token.encode(), current_pin.encode(), hashlib.sha256).hexdigest()[:32]
