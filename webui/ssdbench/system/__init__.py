"""The host underneath: the external tools ssdbench runs, sysfs and procfs, and writes that survive a power cut."""
