"""The image's kernel: the fragment on top of x86_64_defconfig builds in what real testbeds need. The root
file system is an initramfs with no module loading before it, so a driver counts only when it is =y."""

import os

FRAGMENT = os.path.join(os.path.dirname(__file__), "..", "..", "board", "ssdbench", "linux.fragment")
NEEDED = {
    "VMD": "NVMe drives behind Intel VMD, on laptops and desktops with RST",
    "BLK_DEV_NVME": "NVMe drives",
    "SATA_AHCI": "SATA drives",
    "USB_STORAGE": "export sticks and USB drives",
    "USB_RTL8152": "Realtek USB network adapters",
    "USB_NET_AX88179_178A": "ASIX USB 3 network adapters",
    "USB_NET_CDCETHER": "CDC Ethernet adapters and docks",
    "USB_NET_CDC_NCM": "CDC NCM adapters and docks",
    "IGC": "Intel 2.5G NICs",
    "IXGBE": "Intel 10G NICs",
    "I40E": "Intel 10G/40G NICs",
    "AQTION": "Aquantia/Marvell 2.5G to 10G NICs",
    "R8169": "Realtek onboard NICs",
}


def fragment():
    """Each CONFIG_ option set in the fragment, with how many times it is set."""
    found, count = {}, {}
    with open(FRAGMENT) as f:
        for line in f:
            name, _, value = line.strip().partition("=")
            if name.startswith("CONFIG_"):
                found[name[7:]] = value
                count[name[7:]] = count.get(name[7:], 0) + 1
    return found, count


def test_the_kernel_builds_in_the_drivers_real_testbeds_need():
    found, count = fragment()
    missing = {name: why for name, why in NEEDED.items() if found.get(name) != "y"}
    assert not missing, missing
    assert [name for name, n in count.items() if n > 1] == []  # a later line would silently win
