"""QEMU's screendump writes PPM (P6): the screen as a PNG for docs/screenshots/, with zlib only."""

import struct
import zlib


def _chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def ppm_to_png(ppm, png):
    with open(ppm, "rb") as f:
        magic, size, maxval, pixels = f.read().split(b"\n", 3)
    assert magic == b"P6" and maxval == b"255", (magic, maxval)
    width, height = map(int, size.split())
    stride = width * 3
    # Each row of a PNG starts with its filter type: 0, none.
    rows = b"".join(b"\x00" + pixels[y * stride : (y + 1) * stride] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits a channel, RGB
    with open(png, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(rows, 9)))
        f.write(_chunk(b"IEND", b""))
