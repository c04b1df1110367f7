"""The appliance's settings, from two places: ssdbench.conf on the stick's FAT partition (SSDBENCH), plain text
that a tester edits on any PC, and the kernel command line (ssdbench.KEY=VALUE, at GRUB's `e`), which overrides
the file key by key. Every value is checked: a bad line or word is refused with a message that says where and
why (never a secret's value), and what it would have set keeps the file's value or the default, so that the
appliance boots whatever the file holds.

S50ssdbench (`ssdbench settings`) writes what is set to ENV_FILE, KEY=VALUE lines readable by root only, for the
services (/usr/libexec/ssdbench/service), and the messages to ERRORS_FILE, which the console, the status screen
and the web UI's drives page show. Every value that gets through is made of characters that need no quoting in a
shell, and none holds a space, so that the services can read ENV_FILE with `.` and anything with one split."""

import difflib
import ipaddress
import os
import re

from ..human import printable

# Where S30stick copies ssdbench.conf and the CA certificates (*.pem) from the stick's FAT partition.
STICK_COPY = "/run/ssdbench/stick"
CONF_NAME = "ssdbench.conf"
ENV_FILE = "/run/ssdbench/env"
ERRORS_FILE = "/run/ssdbench/settings-errors"
CMDLINE = "/proc/cmdline"
# The console's keyboard layouts: kbd's keymaps for PC keyboards, i386/GROUP/NAME.map.gz (Debian's console-data
# names them NAME.kmap.gz), which loadkeys finds by NAME; us is the kernel's own.
KEYMAPS = "/usr/share/keymaps/i386"
KEYMAP_SUFFIXES = (".map.gz", ".map", ".kmap.gz", ".kmap")
# A settings file is a few lines: a larger one is not ours (or not text), and is not read.
MAX_FILE_BYTES = 64 * 1024
MAX_LINE = 1024
# More messages than a screen holds say nothing more.
MAX_ERRORS = 10
BAUDS = ("1200", "2400", "4800", "9600", "19200", "38400", "57600", "115200", "230400", "460800", "921600")
# Kernel command line words that are ssdbench's but no setting of the file: the stick's partition (S30stick).
NOT_SETTINGS = ("stick",)


def _pattern(regex, why):
    def check(value):
        if not re.fullmatch(regex, value):
            raise ValueError(why)
        return value

    return check


def _pin(value):
    if not value.isascii() or not value.isdigit():
        raise ValueError("digits only")
    if not 6 <= len(value) <= 32:
        raise ValueError("6 to 32 digits")
    return value


def _port(value):
    if not (value.isascii() and value.isdigit() and 1 <= int(value) <= 65535):
        raise ValueError("a number from 1 to 65535")
    return str(int(value))


def _upload(value):
    if not re.fullmatch(r"https?://.+", value):
        raise ValueError("not an http:// or https:// URL")
    if len(value) > 512 or not re.fullmatch(r"[A-Za-z0-9:/._~%-]+", value):
        raise ValueError("not a plain http(s) URL (letters, digits and : / . _ ~ % - only)")
    return value


def _flag(value):
    if value.lower() in ("1", "yes", "true", "on"):
        return "1"
    if value.lower() in ("0", "no", "false", "off"):
        return ""
    raise ValueError("1 (yes) or 0 (no)")


def _serial(value):
    if value.lower() == "none":
        return "none"
    if not re.fullmatch(r"tty[A-Za-z]{1,8}[0-9]{1,3}", value):
        raise ValueError("none, or a serial port's name such as ttyS0, ttyS1 or ttyUSB0")
    return value


def _address(value):
    """An IPv4 address with its prefix length, as 192.168.1.50/24."""
    why = "an IPv4 address with its network's prefix length, such as 192.168.1.50/24"
    if "/" not in value:
        raise ValueError(why)
    try:
        found = ipaddress.IPv4Interface(value)
    except ValueError:
        raise ValueError(why) from None
    if found.network.prefixlen > 30 or found.ip in (found.network.network_address, found.network.broadcast_address):
        raise ValueError("not a host's address in a network of two hosts or more")
    return str(found)


def _ipv4(value):
    try:
        return str(ipaddress.IPv4Address(value))
    except ValueError:
        raise ValueError("an IPv4 address, such as 192.168.1.1") from None


def _servers(value):
    """Up to three DNS servers, separated by commas."""
    servers = [x.strip() for x in value.split(",")]
    if len(servers) > 3:
        raise ValueError("three servers at most")
    return ",".join(_ipv4(x) for x in servers)


def _baud(value):
    if value not in BAUDS:
        raise ValueError(f"one of {', '.join(BAUDS)}")
    return value


# Each setting: its key (in the file, and after ssdbench. on the kernel command line), the variable the services
# read, its check, its default, and whether it is a secret (never shown, nor written anywhere but ENV_FILE).
SETTINGS = {
    "upload": ("SSDBENCH_UPLOAD", _upload, "", False),
    "token": ("SSDBENCH_TOKEN", _pattern(r"[A-Za-z0-9_-]{1,256}", "letters, digits, - and _ only"), "", True),
    "insecure": ("SSDBENCH_INSECURE", _flag, "", False),
    "lab_ca": ("", _pattern(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}\.pem", "a .pem file's name"), "", False),
    "pin": ("SSDBENCH_PIN", _pin, "", True),
    "port": ("SSDBENCH_PORT", _port, "80", False),
    "serial": ("SSDBENCH_SERIAL", _serial, "ttyS0", False),
    "serial_baud": ("SSDBENCH_SERIAL_BAUD", _baud, "115200", False),
    # A fixed address in place of DHCP, on the first wired port (or the one named): a network without a DHCP
    # server, or a lab's that wants to know where each testbed is.
    "address": ("SSDBENCH_ADDRESS", _address, "", False),
    "gateway": ("SSDBENCH_GATEWAY", _ipv4, "", False),
    "dns": ("SSDBENCH_DNS", _servers, "", False),
    "interface": (
        "SSDBENCH_INTERFACE",
        _pattern(r"[a-z][a-z0-9_-]{0,14}", "a network port's name, such as eth0"),
        "",
        False,
    ),
    "keymap": (
        "SSDBENCH_KEYMAP",
        _pattern(r"[A-Za-z][A-Za-z0-9_.-]{0,31}", "a layout's name, such as de or uk"),
        "us",
        False,
    ),
    "auto": ("SSDBENCH_AUTO", _pattern(r"[a-z0-9_-]{1,64}", "not a suite name"), "", False),
    "export": ("SSDBENCH_EXPORT", _pattern(r"auto", "only auto"), "", False),
}


def shown(value, limit=40):
    """A value as a message may show it: printable, and short."""
    value = printable(value)
    return value if len(value) <= limit else value[:limit] + "..."


def _checked(key, value, where, errors):
    """The value of `key` once checked, or None with a message in `errors`."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1].strip()  # quotes that a tester may put round a value, as in other files
    try:
        return SETTINGS[key][1](value)
    except ValueError as exc:
        said = f"{key} ignored" if SETTINGS[key][3] else f"{key}={shown(value)} ignored"
        errors.append(f"{where}: {said}: {exc}")
        return None


def from_file(data, name=CONF_NAME):
    """The settings of ssdbench.conf's bytes `data`, and the messages about its bad lines."""
    values, errors, seen = {}, [], {}
    if len(data) > MAX_FILE_BYTES:
        return {}, [f"{name}: larger than {MAX_FILE_BYTES // 1024} KiB, not a settings file: not read"]
    if data.startswith(b"\xef\xbb\xbf"):  # the mark Windows' Notepad may put first
        data = data[3:]
    for number, raw in enumerate(data.split(b"\n"), 1):
        where = f"{name} line {number}"
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            errors.append(f"{where}: not UTF-8 text: ignored")
            continue
        if not line or line[0] in "#;":
            continue
        if len(line) > MAX_LINE:
            errors.append(f"{where}: longer than {MAX_LINE} characters: ignored")
            continue
        key, equals, value = line.partition("=")
        key = key.strip().lower()
        if not equals:
            errors.append(f"{where}: {shown(line)!r} is not KEY = VALUE: ignored")
            continue
        if key not in SETTINGS:
            errors.append(f"{where}: no setting is called {shown(key)!r}: ignored (see the comments at the top)")
            continue
        if key in seen:
            errors.append(f"{where}: {key} is set on line {seen[key]} already: ignored")
            continue
        checked = _checked(key, value.strip(), where, errors)
        if checked is not None:
            values[key], seen[key] = checked, number
    return values, errors


def from_cmdline(text):
    """The settings of the kernel command line `text` (its ssdbench.KEY=VALUE words), and the messages about
    bad ones."""
    values, errors = {}, []
    for word in text.split():
        if not word.startswith("ssdbench."):
            continue
        key, equals, value = word[len("ssdbench.") :].partition("=")
        if key in NOT_SETTINGS:
            continue
        where = "kernel command line"
        if key not in SETTINGS:
            errors.append(f"{where}: ssdbench.{shown(key)} is no setting: ignored")
            continue
        if not equals:
            errors.append(f"{where}: ssdbench.{key} without =VALUE: ignored")
            continue
        checked = _checked(key, value, where, errors)
        if checked is not None:
            values[key] = checked
    return values, errors


def _listing(folder):
    try:
        return os.listdir(folder)
    except OSError:
        return []


def keymaps():
    """The names of the keyboard layouts that loadkeys finds on this system."""
    names = {"us"}
    for group in _listing(KEYMAPS):
        for name in _listing(os.path.join(KEYMAPS, group)):
            names.update(name[: -len(suffix)] for suffix in KEYMAP_SUFFIXES if name.endswith(suffix))
    return names


def merge(conf, cmdline, ca_dir=STICK_COPY):
    """The settings of the file and of the command line, the command line's first, as the services get them
    ({variable: value}), the messages about what does not hold together, and the lab's CA certificate to trust
    (a path in ca_dir, or "")."""
    values, errors = {**conf, **cmdline}, []
    if values.get("upload") and not values.get("token"):
        errors.append("upload ignored: no token for the lab")
        del values["upload"]
    keymap = values.get("keymap", "us")
    have = keymaps() if keymap != "us" else {"us"}
    if keymap not in have:
        # a hundred and more: the nearest names, as a tester who typed "german" or "gb" needs them
        near = difflib.get_close_matches(keymap, have, n=5, cutoff=0.4) or sorted(have)[:5]
        errors.append(
            f"keymap={keymap} ignored: this image has no such layout (it has {len(have)}, such as {', '.join(near)})"
        )
        del values["keymap"]
    address = values.get("address")
    for key in ("gateway", "dns", "interface"):
        if values.get(key) and not address:
            errors.append(f"{key} ignored: no address (the port gets its address by DHCP)")
            del values[key]
    gateway = values.get("gateway")
    if address and gateway and ipaddress.IPv4Address(gateway) not in ipaddress.IPv4Interface(address).network:
        errors.append(f"gateway={gateway} ignored: not in the address's network ({address})")
        del values["gateway"]
    # The lab's CA: the file named, else lab-ca.pem when the stick holds one.
    ca = values.pop("lab_ca", "")
    if ca and not os.path.isfile(os.path.join(ca_dir, ca)):
        errors.append(f"lab_ca={ca} ignored: no file of that name on the stick's SSDBENCH partition")
        ca = ""
    if not ca and os.path.isfile(os.path.join(ca_dir, "lab-ca.pem")):
        ca = "lab-ca.pem"
    env = {variable: values.get(key, default) for key, (variable, _, default, _) in SETTINGS.items() if key != "lab_ca"}
    if not env["SSDBENCH_UPLOAD"]:
        env["SSDBENCH_TOKEN"] = ""  # a token with no lab to send to is of no use to any service
    return {name: value for name, value in env.items() if value}, errors, os.path.join(ca_dir, ca) if ca else ""


def read(conf_path, cmdline_path=CMDLINE, ca_dir=STICK_COPY):
    """The settings, messages and CA (as merge gives them) from the file at conf_path, if there is one, and the
    kernel command line at cmdline_path; and which keys each set, for the console."""
    errors = []
    try:
        with open(conf_path, "rb") as f:
            conf, errors = from_file(f.read(MAX_FILE_BYTES + 1))
    except FileNotFoundError:
        conf = {}
    except OSError as exc:
        conf, errors = {}, [f"{CONF_NAME}: could not be read: {exc.strerror}"]
    with open(cmdline_path, errors="replace") as f:
        cmdline, more = from_cmdline(f.read())
    env, merged, ca = merge(conf, cmdline, ca_dir)
    errors += more + merged
    if len(errors) > MAX_ERRORS:
        errors = errors[:MAX_ERRORS] + [f"and {len(errors) - MAX_ERRORS} more"]
    sources = ((CONF_NAME, conf), ("kernel command line", cmdline))
    said = [f"{where}: {', '.join(keys)}" for where, keys in sources if keys]
    return env, errors, ca, "; ".join(said) or "the defaults"


def write(env, errors, env_file=ENV_FILE, errors_file=ERRORS_FILE):
    """ENV_FILE (root's only: it may hold the PIN and the token) and ERRORS_FILE, each whole or not at all."""
    for path, text, mode in (
        (env_file, "".join(f"{name}={value}\n" for name, value in env.items()), 0o600),
        (errors_file, "".join(f"{error}\n" for error in errors), 0o644),
    ):
        part = path + ".part"
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(part, path)


def services(env_file=None):
    """The settings as S50ssdbench wrote them for the services: {variable: value}."""
    with open(env_file or ENV_FILE) as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)


def problems(errors_file=ERRORS_FILE):
    """The messages about the settings that were refused at boot, for a page to show."""
    try:
        with open(errors_file, errors="replace") as f:
            return [printable(line.rstrip("\n")) for line in f if line.strip()]
    except OSError:
        return []
