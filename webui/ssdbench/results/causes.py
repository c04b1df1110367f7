"""A run's warnings as a tester reads them at a glance: one line for each cause, with its severity, how many steps
it holds and their titles, its details folded beneath; and whether the drive is emulated, said once. Read from the
run alone (store.get_run's shape or a run document), as summary.py reads it.

A step's reason knows its cause when its validity rule names one (validity.Flag); any other reason, a rule's
that names none yet, is grouped by its consequence: the words after its last colon, which every reason ends on
("...: the host, not the drive, set the pace"). A run's own warnings (a weak purge, a slow link) are one cause
each, named by their words before the first colon."""

import re

from . import document, validity

# QEMU names its emulated NVMe controller and its TCG CPU "QEMU ...", and its own PCI devices carry Red Hat's
# vendor id; the demo's SATA drive has a model of its own, but runs on QEMU's CPU.
QEMU = re.compile(r"QEMU\b", re.IGNORECASE)
QEMU_PCI_VENDOR = "1b36:"


def emulated(run):
    """Whether the run's drive, or the testbed it ran on, is QEMU's: its figures are the emulator's."""
    drive = run["drive"]
    host = drive.get("host_controller") or {}
    named = (drive.get("model"), document.recorded(run, "cpu", "model"))
    return any(QEMU.match(str(n or "").strip()) for n in named) or str(host.get("id", "")).startswith(QEMU_PCI_VENDOR)


def of(run, suspects=None):
    """The run's warnings by cause, the most severe first, then in the order they first come: [{cause, severity,
    steps: [{key, title}], details}], steps empty for a warning of the whole run; severity the worst of its
    reasons' (validity.SEVERITIES). `details`: each reason whole, a step's named by its title. The reasons that
    make a run not comparable are left out: the summary says those with its badge. `suspects`:
    validity.suspects(run) when the caller has it already."""
    suspects = validity.suspects(run) if suspects is None else suspects
    apart = set(document.incomparable(run))
    groups = {}

    def group(words, severity):
        found = groups.setdefault(words, {"cause": words, "severity": severity, "steps": [], "details": []})
        found["severity"] = min(found["severity"], severity, key=validity.SEVERITIES.index)
        return found

    for text in document.run_warnings(run, [[] for _ in run["steps"]]):
        if text not in apart:
            words = text.split(": ", 1)[0]
            group(words, run_severity(words))["details"].append(text)
    for step, reasons in zip(run["steps"], suspects):
        for reason in reasons:
            found = group(validity.cause_of(reason), validity.severity_of(reason))
            title = document.title(step)
            if step["key"] not in (s["key"] for s in found["steps"]):
                found["steps"].append({"key": step["key"], "title": title})
            found["details"].append(f"{title}: {reason}")
    return sorted(groups.values(), key=lambda g: validity.SEVERITIES.index(g["severity"]))


def run_severity(words):
    """A run's own warning's severity, by its first words: that it was resumed or ended early touches no figure of
    the steps it has (each step that ran again says so); anything else of the run (its testbed, its data, its
    adapted block sizes) affects comparison."""
    return validity.INFORMATION if words == "resumed" or words.startswith("the run is ") else validity.AFFECTS
