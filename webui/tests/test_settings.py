"""The appliance's settings (system/settings.py): ssdbench.conf from the stick, the kernel command line over it,
each value checked. A file is whatever a tester's editor, or anyone with the stick, wrote: every bad line is
refused with a message that says where and why, never with a secret's value, and the rest applies."""

import os
import pathlib
import re
import stat

import pytest

from ssdbench.system import settings

TEMPLATE = pathlib.Path(__file__).resolve().parents[2] / "board" / "ssdbench" / "ssdbench.conf"
TOKEN = "tok_3c9f2a7e-LAB"
PIN = "80486123"
DEFAULTS = {
    "SSDBENCH_PORT": "80",
    "SSDBENCH_SERIAL": "ttyS0",
    "SSDBENCH_SERIAL_BAUD": "115200",
    "SSDBENCH_KEYMAP": "us",
}


def conf(*lines, crlf=False):
    return ("\r\n" if crlf else "\n").join(lines).encode()


def read(tmp_path, data=None, cmdline="BOOT_IMAGE=/bzImage console=ttyS0,115200"):
    """The settings, messages and CA from a settings file of `data` and the kernel command line `cmdline`."""
    path = tmp_path / "ssdbench.conf"
    if data is not None:
        path.write_bytes(data)
    (tmp_path / "cmdline").write_text(cmdline + "\n")
    env, errors, ca, _ = settings.read(str(path), str(tmp_path / "cmdline"), ca_dir=str(tmp_path))
    return env, errors, ca


def test_the_template_on_the_stick_sets_nothing_and_says_nothing(tmp_path):
    """The commented template that the image writes to the stick: every line a comment, each key it names a
    setting; uncommented, its example values all hold."""
    env, errors, _ = read(tmp_path, TEMPLATE.read_bytes())
    assert errors == [] and env == DEFAULTS
    examples = [line[2:] for line in TEMPLATE.read_text().splitlines() if re.match(r"# [a-z_]+ = ", line)]
    (tmp_path / "lab-ca.pem").write_text("a certificate\n")
    values, errors = settings.from_file("\n".join(examples).encode())
    assert errors == [] and sorted(values) == sorted(settings.SETTINGS), errors


def test_a_file_from_windows_sets_the_lab_and_the_serial_port(tmp_path):
    """Notepad's byte order mark and CRLF line ends, spaces round the =, quotes round a value, upper case keys."""
    data = b"\xef\xbb\xbf" + conf(
        "# the lab",
        "Upload = https://lab.example/",
        f'token="{TOKEN}"',
        "serial = ttyS1",
        "serial_baud = 57600",
        "",
        crlf=True,
    )
    env, errors, _ = read(tmp_path, data)
    assert errors == []
    assert env["SSDBENCH_UPLOAD"] == "https://lab.example/" and env["SSDBENCH_TOKEN"] == TOKEN
    assert (env["SSDBENCH_SERIAL"], env["SSDBENCH_SERIAL_BAUD"]) == ("ttyS1", "57600")


def test_the_kernel_command_line_overrides_the_file_and_a_bad_word_keeps_the_files_value(tmp_path):
    data = conf("upload = https://lab.example/", f"token = {TOKEN}", "serial = ttyS1", "port = 8080")
    cmdline = "console=tty1 ssdbench.stick=ABCD-1234 ssdbench.serial=none ssdbench.port=99999 ssdbench.pin=12"
    env, errors, _ = read(tmp_path, data, cmdline)
    assert env["SSDBENCH_SERIAL"] == "none" and env["SSDBENCH_PORT"] == "8080" and "SSDBENCH_PIN" not in env
    assert errors == [
        "kernel command line: port=99999 ignored: a number from 1 to 65535",
        "kernel command line: pin ignored: 6 to 32 digits",
    ]


def test_a_fixed_address_with_its_gateway_and_dns_servers(tmp_path):
    """address, gateway, dns and interface as S50ssdbench and the dhcp helper read them; each that cannot be used
    is refused with why, and neither a gateway nor a port's name nor DNS servers set anything without an address."""
    data = conf("address = 192.168.1.50/24", "gateway = 192.168.1.1", "dns = 192.168.1.1, 9.9.9.9", "interface = eth1")
    env, errors, _ = read(tmp_path, data)
    assert errors == []
    assert (env["SSDBENCH_ADDRESS"], env["SSDBENCH_GATEWAY"]) == ("192.168.1.50/24", "192.168.1.1")
    assert (env["SSDBENCH_DNS"], env["SSDBENCH_INTERFACE"]) == ("192.168.1.1,9.9.9.9", "eth1")
    data = conf(
        "address = 192.168.1.50",
        "gateway = 10.0.0.1",
        "dns = 1.1.1.1,8.8.8.8,9.9.9.9,1.0.0.1",
        "interface = eth0; reboot",
    )
    env, errors, _ = read(tmp_path, data)
    assert env == DEFAULTS
    assert errors == [
        "ssdbench.conf line 1: address=192.168.1.50 ignored: an IPv4 address with its network's prefix length, "
        "such as 192.168.1.50/24",
        "ssdbench.conf line 3: dns=1.1.1.1,8.8.8.8,9.9.9.9,1.0.0.1 ignored: three servers at most",
        "ssdbench.conf line 4: interface=eth0; reboot ignored: a network port's name, such as eth0",
        "gateway ignored: no address (the port gets its address by DHCP)",
    ]
    for bad, why in (("192.168.1.0/24", "not a host's address"), ("10.0.0.1/31", "not a host's address")):
        _, errors, _ = read(tmp_path, conf(f"address = {bad}"))
        assert len(errors) == 1 and why in errors[0], errors
    env, errors, _ = read(tmp_path, conf("address = 10.1.2.3/16", "gateway = 10.2.0.1"))
    assert env["SSDBENCH_ADDRESS"] == "10.1.2.3/16" and "SSDBENCH_GATEWAY" not in env
    assert errors == ["gateway=10.2.0.1 ignored: not in the address's network (10.1.2.3/16)"]


def test_hostile_lines_are_refused_one_by_one_with_where_and_why(tmp_path):
    """Escape sequences, shell syntax, NUL bytes, bytes that are not UTF-8, a line too long, unknown keys, a key
    set twice: each refused with its line number, shown printable; the good lines around them apply."""
    data = b"\n".join(
        [
            b"port = 8080",
            b"upload = https://lab.example/$(reboot)",
            b"auto = smoke; rm -rf /",
            b"\x1b[2J\x1b]0;owned\x07 = 1",
            b"serial = ttyS0\x00",
            b"keymap = \xff\xfe",
            b"serial_baud = " + b"9" * 2000,
            b"just some words",
            b"port = 81",
            b"insecure = maybe",
            b"serial = ../../dev/sda",
            b"token = " + TOKEN.encode() + b"'\"",
            b"pin = 1234abcd" + PIN.encode(),
            b"export = auto",
        ]
    )
    env, errors, _ = read(tmp_path, data)
    assert env == {**DEFAULTS, "SSDBENCH_PORT": "8080", "SSDBENCH_EXPORT": "auto"}
    assert errors == [
        "ssdbench.conf line 2: upload=https://lab.example/$(reboot) ignored: not a plain http(s) URL "
        "(letters, digits and : / . _ ~ % - only)",
        "ssdbench.conf line 3: auto=smoke; rm -rf / ignored: not a suite name",
        "ssdbench.conf line 4: no setting is called '?[2j?]0;owned?': ignored (see the comments at the top)",
        "ssdbench.conf line 5: serial=ttyS0? ignored: none, or a serial port's name such as ttyS0, ttyS1 or ttyUSB0",
        "ssdbench.conf line 6: not UTF-8 text: ignored",
        "ssdbench.conf line 7: longer than 1024 characters: ignored",
        "ssdbench.conf line 8: 'just some words' is not KEY = VALUE: ignored",
        "ssdbench.conf line 9: port is set on line 1 already: ignored",
        "ssdbench.conf line 10: insecure=maybe ignored: 1 (yes) or 0 (no)",
        "ssdbench.conf line 11: serial=../../dev/sda ignored: none, or a serial port's name such as ttyS0, ttyS1 or "
        "ttyUSB0",
        "and 2 more",
    ]
    _, all_errors = settings.from_file(data)
    assert all_errors[-2:] == [
        "ssdbench.conf line 12: token ignored: letters, digits, - and _ only",
        "ssdbench.conf line 13: pin ignored: digits only",
    ]
    assert not any(TOKEN in e or PIN in e for e in all_errors)


def test_no_value_that_gets_through_needs_quoting_in_a_shell():
    """The services read env with `.` and split nothing: every checked value is a plain word."""
    hostile = ["a b", "a'b", 'a"b', "a;b", "a$b", "a`b", "a\\b", "a\rb", "a|b", "a&b", "a>b", "a*b", "é"]
    for key in settings.SETTINGS:
        for value in hostile:
            values, errors = settings.from_file(f"{key} = {value}".encode())
            assert values == {} and len(errors) == 1, (key, value, values)


def test_a_file_that_is_not_a_settings_file_is_not_read(tmp_path):
    env, errors, _ = read(tmp_path, b"port = 8080\n" + b"#" * settings.MAX_FILE_BYTES)
    assert env["SSDBENCH_PORT"] == "80"
    assert errors == ["ssdbench.conf: larger than 64 KiB, not a settings file: not read"]
    (tmp_path / "ssdbench.conf").unlink()
    (tmp_path / "ssdbench.conf").mkdir()
    env, errors, _ = read(tmp_path)
    assert env["SSDBENCH_PORT"] == "80" and errors == ["ssdbench.conf: could not be read: Is a directory"]


def test_what_does_not_hold_together(tmp_path, monkeypatch):
    """An upload without a token, a keyboard layout the image lacks, a CA that is not on the stick."""
    # kbd's keymaps as the image installs them, and one named as Debian's console-data (the VM's) names it
    keymaps = tmp_path / "keymaps"
    (keymaps / "qwertz").mkdir(parents=True)
    (keymaps / "qwerty").mkdir()
    (keymaps / "qwertz" / "de.map.gz").write_bytes(b"")
    (keymaps / "qwertz" / "de-latin1.map.gz").write_bytes(b"")
    (keymaps / "qwerty" / "uk.kmap.gz").write_bytes(b"")
    (keymaps / "qwerty" / "README").write_bytes(b"")
    monkeypatch.setattr(settings, "KEYMAPS", str(keymaps))
    assert settings.keymaps() == {"us", "de", "de-latin1", "uk"}
    env, errors, ca = read(tmp_path, conf("upload = https://lab.example/", "keymap = fr", "lab_ca = mine.pem"))
    assert ca == "" and env == DEFAULTS
    assert errors == [
        "upload ignored: no token for the lab",
        "keymap=fr ignored: this image has no such layout (it has 4, such as de, de-latin1, uk, us)",
        "lab_ca=mine.pem ignored: no file of that name on the stick's SSDBENCH partition",
    ]
    (tmp_path / "mine.pem").write_text("a certificate\n")
    (tmp_path / "lab-ca.pem").write_text("another\n")
    env, errors, _ = read(tmp_path, conf("keymap = de_latin1"))
    assert errors == ["keymap=de_latin1 ignored: this image has no such layout (it has 4, such as de-latin1)"]
    env, errors, ca = read(tmp_path, conf("keymap = de", "lab_ca = mine.pem"))
    assert errors == [] and env["SSDBENCH_KEYMAP"] == "de" and ca == str(tmp_path / "mine.pem")
    # Without lab_ca, lab-ca.pem on the stick, as before the settings file; a token without a lab goes nowhere.
    env, errors, ca = read(tmp_path, conf(f"token = {TOKEN}"))
    assert ca == str(tmp_path / "lab-ca.pem") and "SSDBENCH_TOKEN" not in env


def test_env_is_roots_only_and_the_services_read_it_back(tmp_path):
    env, errors, _ = read(tmp_path, conf("upload = https://lab.example/", f"token = {TOKEN}", f"pin = {PIN}", "x"))
    settings.write(env, errors, str(tmp_path / "env"), str(tmp_path / "errors"))
    assert stat.S_IMODE(os.stat(tmp_path / "env").st_mode) == 0o600
    assert settings.services(str(tmp_path / "env")) == env and env["SSDBENCH_PIN"] == PIN
    assert settings.problems(str(tmp_path / "errors")) == ["ssdbench.conf line 4: 'x' is not KEY = VALUE: ignored"]
    assert settings.problems(str(tmp_path / "none")) == []


@pytest.mark.parametrize("word", ["ssdbench.pin", "ssdbench.bogus=1", "ssdbench.serial=ttyS0\x1b[31m"])
def test_kernel_command_line_words_that_are_no_setting(word):
    values, errors = settings.from_cmdline(word)
    assert values == {} and len(errors) == 1 and "\x1b" not in errors[0], errors
