"""ssdbench: a bootable SSD test appliance built around locked fio suites."""

__version__ = "0.1.0"
