"""make test-boot-sb: the release stick booted with Secure Boot on, as a PC with Microsoft's keys boots it.

OVMF's Secure Boot firmware (OVMF_CODE_4M.secboot.fd) with Microsoft's keys enrolled (OVMF_VARS_4M.ms.fd) starts
the stick's shim, which Microsoft signed; shim starts GRUB only if the key that signed it is in MokList, and GRUB
starts the kernel only if shim trusts the kernel's signature too (board/ssdbench/post-image.sh signs both with the
build's key). virt-fw-vars (PyPI's virt-firmware) writes MokList into a copy of the variables, as MokManager
leaves it once a tester has enrolled the stick's ENROLL_THIS_KEY_IN_MOKMANAGER.cer.

1. The certificate in MokList: the stick boots to the web UI, the kernel runs with Secure Boot on and in lockdown,
   and a run's testbed says so.
2. An empty MokList (the first boot on a PC): shim refuses GRUB and opens MokManager, and nothing boots. Its
   screen is saved to docs/screenshots/ with SSDBENCH_SCREENSHOTS set (make test-boot-sb does).
3. GRUB, or the kernel, signed by another key: refused, with nothing unsigned to fall back on.

The boots without Secure Boot are test_boot.py's. Each boot's serial console goes to
webui/tests/artifacts/boot-sb-console-*.log.
"""

import os
import subprocess
import time

import pytest
from ppm import ppm_to_png
from test_boot import ARTIFACTS, QEMU_SH, STICK
from vm import VM

pytestmark = pytest.mark.skipif(not os.path.exists(STICK), reason="no boot test stick: make test-boot builds it")

CERT_NAME = "ENROLL_THIS_KEY_IN_MOKMANAGER.cer"
# shim's GUID, the owner it gives the certificates that MokManager enrolls.
SHIM_GUID = "605dab50-e046-4300-abb6-3dd810dd8b23"
FAT = "@@1M"  # SSDBENCH starts 1 MiB into the stick (genimage.cfg), as mtools addresses it
# shim's message when the firmware's or MokList's keys do not cover what it is to start.
REFUSED = "Verification failed: (0x1A) Security Violation"


def stick_copy(tmp_path):
    stick = str(tmp_path / "stick.img")
    subprocess.run(["cp", "--sparse=always", STICK, stick], check=True)
    return stick


def variables(tmp_path, *certs):
    """OVMF's variables with Microsoft's keys and Secure Boot on, MokList holding `certs`."""
    out = str(tmp_path / "vars.fd")
    mok = [arg for cert in certs for arg in ("--add-mok", SHIM_GUID, cert)]
    subprocess.run(
        ["virt-fw-vars", "-i", "/usr/share/OVMF/OVMF_VARS_4M.ms.fd", "-o", out, *mok],
        check=True,
        capture_output=True,
    )
    return out


def stick_cert(stick, tmp_path):
    """The certificate the stick carries for MokManager."""
    cert = str(tmp_path / CERT_NAME)
    subprocess.run(["mcopy", "-n", "-i", stick + FAT, "::" + CERT_NAME, cert], check=True)
    return cert


def resign(stick, tmp_path, name):
    """Replaces the stick's `name` (a path on SSDBENCH) with itself signed by a key of this test's own."""
    key, crt, signed, original = (str(tmp_path / n) for n in ("other.key", "other.crt", "signed", "original"))
    subprocess.run(
        ["openssl", "req", "-quiet", "-new", "-x509", "-newkey", "rsa:2048", "-sha256", "-nodes", "-days", "1"]
        + ["-subj", "/CN=not the stick's key/", "-keyout", key, "-out", crt],
        check=True,
        capture_output=True,
    )
    subprocess.run(["mcopy", "-n", "-i", stick + FAT, "::" + name, original], check=True)
    subprocess.run(["sbattach", "--remove", original], check=True)
    subprocess.run(["sbsign", "--key", key, "--cert", crt, "--output", signed, original], check=True)
    subprocess.run(["mcopy", "-o", "-i", stick + FAT, signed, "::" + name], check=True)


def boot(tmp_path, name, stick, vars_fd):
    os.makedirs(ARTIFACTS, exist_ok=True)
    log = os.path.join(ARTIFACTS, f"boot-sb-console-{name}.log")
    if os.path.exists(log):
        os.unlink(log)
    return VM([QEMU_SH, "uefi-sb", stick], str(tmp_path), log, {"SSDBENCH_OVMF_VARS": vars_fd})


def screen(vm, tmp_path, name):
    """The VM's screen as a PNG: in docs/screenshots/ with SSDBENCH_SCREENSHOTS set, else in tmp_path."""
    ppm = str(tmp_path / "screen.ppm")
    vm.qmp("screendump", filename=ppm)
    png = os.path.join(os.environ.get("SSDBENCH_SCREENSHOTS") or str(tmp_path), name)
    ppm_to_png(ppm, png)
    return png


def test_the_stick_lays_out_shim_mokmanager_grub_and_the_certificate_and_no_key(tmp_path):
    found = subprocess.run(
        ["mdir", "-b", "-/", "-i", STICK + FAT, "::"], check=True, capture_output=True, text=True
    ).stdout.split()
    # Its files (mdir names a folder with a trailing /), and no private key among them.
    assert sorted(path.lower() for path in found if not path.endswith("/")) == [
        "::/boot/grub/grub.cfg",
        "::/bzimage",
        "::/efi/boot/bootx64.efi",
        "::/efi/boot/grub.cfg",
        "::/efi/boot/grubx64.efi",
        "::/efi/boot/mmx64.efi",
        "::/" + CERT_NAME.lower(),
        "::/rootfs.cpio.zst",
        "::/ssdbench.conf",  # the settings' template (docs/user-guide.md, "The settings file")
    ]
    cert = stick_cert(STICK, tmp_path)
    subject = subprocess.run(
        ["openssl", "x509", "-inform", "DER", "-in", cert, "-noout", "-subject"], check=True, capture_output=True
    )
    assert subject.stdout.startswith(b"subject=")


def test_with_the_key_in_moklist_the_stick_boots_with_secure_boot_on_and_locked_down(tmp_path):
    stick = stick_copy(tmp_path)
    vm = boot(tmp_path, "enrolled", stick, variables(tmp_path, stick_cert(stick, tmp_path)))
    try:
        print(f"\nSecure Boot, key enrolled: the web UI answered {vm.wait_for_ui():.1f} s after QEMU's start")
        # The kernel found Secure Boot on (its EFI boot code logs it), and locked itself down.
        assert vm.shell("dmesg | grep -c 'Secure boot enabled'") == "1"
        # Nothing the appliance did at boot, nor SMART, ATA identify and a scheduler write (what a run does to its
        # drive; the stick here), met the lockdown: it logs each refusal ("Lockdown: ... is restricted"). The one
        # it logs at every boot is the kernel's own (swapper/0): no resume from hibernation.
        disk = vm.shell("cat /run/ssdbench/boot-disk")
        scheduler = f"/sys/block/{disk}/queue/scheduler"
        drive_io = f"smartctl -a /dev/{disk}; hdparm -I /dev/{disk}"
        drive_io += f"; s=$(sed 's/.*\\[\\(.*\\)\\].*/\\1/' {scheduler}); echo $s > {scheduler}"
        refused = "dmesg | grep 'Lockdown:' | grep -vc 'swapper/0: hibernation'"
        assert vm.shell(f"{{ {drive_io}; }} >/dev/null 2>&1; {refused}") == "0"
        # What a run's testbed records (ssdbench/run/environment.py).
        record = "from ssdbench.run import environment as e; k = e.host()['kernel']"
        record += "; print(k['secure_boot'], k['lockdown'])"
        assert vm.shell(f'python3 -c "{record}"') == "on integrity"
        vm.poweroff()
    finally:
        vm.close()


def refused_then_mokmanager(vm):
    """Shim refuses GRUB and opens MokManager instead: GRUB never starts."""
    after = vm.wait_console(REFUSED, timeout=600)
    # Its message box waits for a key (the firmware reads the serial port too).
    vm.type("\r")
    vm.wait_console("Press any key to perform MOK management", timeout=300, after=after)
    assert "GRUB" not in vm.console_text()


def test_with_an_empty_moklist_mokmanager_opens_and_nothing_boots(tmp_path):
    stick = stick_copy(tmp_path)
    vm = boot(tmp_path, "empty", stick, variables(tmp_path))
    try:
        started = time.monotonic()
        refused_then_mokmanager(vm)
        print(f"\nSecure Boot, empty MokList: MokManager {time.monotonic() - started:.1f} s after QEMU's start")
        screen(vm, tmp_path, "mokmanager.png")
    finally:
        vm.close()


@pytest.mark.parametrize("signed", ["EFI/BOOT/grubx64.efi", "bzImage"])
def test_grub_or_the_kernel_signed_by_another_key_is_refused(signed, tmp_path):
    stick = stick_copy(tmp_path)
    cert = stick_cert(stick, tmp_path)
    resign(stick, tmp_path, signed)
    vm = boot(tmp_path, f"other-key-{os.path.basename(signed)}", stick, variables(tmp_path, cert))
    try:
        if signed == "bzImage":
            after = vm.wait_console("Welcome to GRUB", timeout=600)
            after = vm.wait_console("bad shim signature", timeout=300, after=after)
            # GRUB holds no kernel to start: the entry's initrd line finds none.
            vm.wait_console("you need to load the kernel first", timeout=60, after=after)
        else:
            refused_then_mokmanager(vm)
    finally:
        vm.close()
