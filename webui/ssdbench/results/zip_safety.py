"""The checks an untrusted zip passes before any member is read: safe names, regular files only, stored or
deflated and not encrypted, and limits on the member count, the sizes and the compression ratio.

A bundle comes from another testbed, and `ssdbench import` runs as root: a member name must never reach
outside the folder it is unpacked into, on Linux or on the Windows PC a tester copies the bundle to, and a
small zip must not unpack into a full disk or keep the appliance busy for minutes.
"""

import collections
import os
import re
import stat
import struct
import zipfile

MAX_MEMBERS = 20_000
MAX_TOTAL_BYTES = 4 << 30
MAX_NAME_BYTES = 1024
MAX_SEGMENT_BYTES = 255
MAX_DEPTH = 16
# Deflate reaches about 1000:1 on constant data; fio's logs and the CSVs stay far below 100:1.
MAX_RATIO = 200
RATIO_FROM_BYTES = 1 << 20
# The zip's fixed local header, before the name: the least space each member takes in the file.
LOCAL_HEADER_BYTES = 30
# The central directory, which zipfile reads whole (about 540 bytes of memory an entry) before a member count can
# be checked: a member's entry is 46 bytes and its name, under 100 in a real bundle. Twice that on average.
MAX_DIRECTORY_BYTES = MAX_MEMBERS * 200
# The end of central directory record (22 bytes and a comment of up to 64 KiB), and ZIP64's locator and record.
_END = struct.Struct("<4s4H2LH")
_END64_LOCATOR = struct.Struct("<4sLQL")
_END64 = struct.Struct("<4sQ2H2L4Q")
# Names that Windows reserves in every folder, whatever the extension (NUL.txt is NUL).
DEVICE_NAMES = {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"}
DEVICE_NAMES |= {f"{port}{n}" for port in ("COM", "LPT") for n in range(1, 10)}
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def name_problem(name):
    """Why `name` is not a safe relative path of plain segments, or None."""
    if not name:
        return "an empty name"
    if CONTROL.search(name):
        return "a control character in the name"
    if len(name.encode()) > MAX_NAME_BYTES:
        return f"a name longer than {MAX_NAME_BYTES} bytes"
    if "\\" in name:
        return "a backslash in the name"
    if name.startswith("/"):
        return "an absolute path"
    if ":" in name:
        return "a drive letter or a colon in the name"
    segments = name.split("/")
    if len(segments) > MAX_DEPTH:
        return f"more than {MAX_DEPTH} folders deep"
    for segment in segments:
        if segment in ("", ".", ".."):
            return f"a path segment {segment!r}" if segment else "an empty path segment (// or a trailing /)"
        if len(segment.encode()) > MAX_SEGMENT_BYTES:
            return f"a path segment longer than {MAX_SEGMENT_BYTES} bytes"
        if segment.split(".")[0].upper() in DEVICE_NAMES:
            return f"a device name ({segment})"
    return None


def member_problem(info):
    """Why one member may not be unpacked, or None: its name, its type, its compression ratio."""
    problem = name_problem(info.filename)
    if problem:
        return problem
    # A bundle's members are stored or deflated, never encrypted: anything else makes zipfile raise on reading.
    if info.flag_bits & 0x1:
        return "an encrypted member"
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        return f"compression method {info.compress_type}, not stored or deflated"
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind == stat.S_IFLNK:
        return "a symbolic link"
    if kind not in (0, stat.S_IFREG):
        return "not a regular file"
    if info.file_size > RATIO_FROM_BYTES and info.file_size > MAX_RATIO * max(info.compress_size, 1):
        return f"compressed more than {MAX_RATIO}:1 ({info.file_size} bytes from {info.compress_size})"
    return None


def _name_bytes(info):
    # Bit 11 flags a UTF-8 name; without it the name is stored in code page 437, one byte a character.
    return len(info.orig_filename.encode("utf-8")) if info.flag_bits & 0x800 else len(info.orig_filename)


def directory_problem(path):
    """Why the zip at `path` may not even be opened, read from its end records alone: more members than
    MAX_MEMBERS, or a central directory over MAX_DIRECTORY_BYTES. None when neither, or when no end record is
    found (zipfile then refuses the file itself)."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        tail_at = max(0, size - _END.size - 0xFFFF)
        f.seek(tail_at)
        tail = f.read()
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) - at < _END.size:
            return None
        _, _, _, _, members, directory, _, _ = _END.unpack_from(tail, at)
        locator_at = tail_at + at - _END64_LOCATOR.size
        if locator_at >= 0:
            f.seek(locator_at)
            signature, _, end64_at, _ = _END64_LOCATOR.unpack(f.read(_END64_LOCATOR.size))
            if signature == b"PK\x06\x07":
                f.seek(end64_at)
                record = f.read(_END64.size)
                if len(record) == _END64.size and record[:4] == b"PK\x06\x06":
                    *_, members, directory, _ = _END64.unpack(record)
    if members > MAX_MEMBERS:
        return f"{members} members, more than the {MAX_MEMBERS} a bundle may hold"
    if directory > MAX_DIRECTORY_BYTES:
        return f"a central directory of {directory} bytes, more than the {MAX_DIRECTORY_BYTES} a bundle's may be"
    return None


def problems(zf):
    """Every reason not to read the zip further; an empty list if it is safe to read."""
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        return [f"{len(infos)} members, more than the {MAX_MEMBERS} a bundle may hold"]
    found = [f"{n}: listed twice in the zip" for n, count in collections.Counter(zf.namelist()).items() if count > 1]
    found += [f"{i.filename!r}: unsafe: {p}" for i in infos if (p := member_problem(i))]
    total = sum(i.file_size for i in infos)
    if total > MAX_TOTAL_BYTES:
        found.append(f"{total} bytes unpacked, more than the {MAX_TOTAL_BYTES} a bundle may hold")
    # Members whose data overlap (one stretch of the file read as many members) are a zip bomb.
    ordered = sorted(infos, key=lambda i: i.header_offset)
    for before, after in zip(ordered, ordered[1:]):
        end = before.header_offset + LOCAL_HEADER_BYTES + _name_bytes(before) + before.compress_size
        if after.header_offset < end:
            found.append(f"{after.filename!r}: its data overlaps {before.filename!r}'s")
    return sorted(found)
