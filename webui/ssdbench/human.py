"""Durations and sizes as people read them, the same on the console, in the CLI and in the web UI.
Only for display: results keep their exact values."""

import math
import re
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
    """A measured value to four significant digits, no trailing zero, whole above 1000, the same wherever it is
    shown (static/report.js's num() rounds alike); the exact value stays in the results; – for none."""
    if value is None:
        return "–"
    if value == 0 or abs(value) >= 1000:
        return f"{value:,.0f}"
    shown = f"{value:,.{max(0, 3 - math.floor(math.log10(abs(value))))}f}"
    return shown.rstrip("0").rstrip(".") if "." in shown else shown


# The unit a figure is shown in wherever a page shows it (the results keep fio's own): the figures in seconds
# are busy and service times, of a few ms to a few s, shown in ms on every page.
SHOWN_IN = {"s": ("ms", 1e3)}


def shown(value, unit):
    """(value, unit) as every page shows a figure of that unit."""
    to, factor = SHOWN_IN.get(unit, (unit, 1))
    return (None if value is None else value * factor), to


def shown_unit(unit):
    return shown(None, unit)[1]


def quantity(value, unit):
    """A figure with its unit, as every page shows it: a time in ms, "6.88 ms", never "0.00688 s"."""
    value, unit = shown(value, unit)
    return f"{figure(value)} {unit}"


def run_name(run):
    """A run as a tester tells it from the others, in a question before it is deleted: its number, suite, drive
    (model, serial, device) and when it was made."""
    drive = run["drive"]
    return (
        f"run {run['id']}: {run['suite']} on {drive.get('model') or 'an unnamed drive'} "
        f"(serial {drive.get('serial') or '–'}, {drive.get('path') or '–'}), made {when(run['created_at'])} UTC, "
        f"{run['state']}"
    )


def sentence(text):
    """A message as a sentence, its first word capitalised: the API's errors begin in lower case, as a clause. A
    first word that is a name (a file's, a device's, an ID) stays as it is."""
    text = str(text)
    first = re.match(r"[^\s:,;]*", text)[0]
    return text[:1].upper() + text[1:] if first.isalpha() and first.islower() else text


def size(nbytes):
    return f"{nbytes / 1e9:.1f} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:.1f} MB"


def printable(text):
    """Text for a terminal: every control and format character (an escape sequence's ESC or CSI, a newline,
    a right-to-left override) shown as ?. A drive's model or serial is whatever its firmware says."""
    return "".join("?" if unicodedata.category(ch) in ("Cc", "Cf") else ch for ch in str(text))
