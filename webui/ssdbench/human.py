"""Durations and sizes as people read them, the same on the console, in the CLI and in the web UI.
Only for display: results keep their exact values."""

import time
import unicodedata


def clock(seconds):
    """h:mm:ss, or – when unknown (an ETA not yet estimated)."""
    if seconds is None:
        return "–"
    seconds = round(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def when(timestamp):
    """A Unix time as UTC date and time, or – when there is none."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(timestamp)) if timestamp else "–"


def figure(value):
    """A measured value at a precision that fits its size (the exact value stays in the results); – for none."""
    if value is None:
        return "–"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:,.2f}" if abs(value) >= 1 else f"{value:.3g}"


def size(nbytes):
    return f"{nbytes / 1e9:.1f} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:.1f} MB"


def printable(text):
    """Text for a terminal: every control and format character (an escape sequence's ESC or CSI, a newline,
    a right-to-left override) shown as ?. A drive's model or serial is whatever its firmware says."""
    return "".join("?" if unicodedata.category(ch) in ("Cc", "Cf") else ch for ch in str(text))
