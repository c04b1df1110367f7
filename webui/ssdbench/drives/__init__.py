"""Drives: finding them and their identity, their health and temperature, purging them, and the parsers for
nvme-cli, smartctl, hdparm, lsblk and blkid output."""
