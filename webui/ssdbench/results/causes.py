"""A run's warnings as a tester reads them at a glance: one line for each cause, with how many steps it holds and
their titles, its details folded beneath; and whether the drive is emulated, said once. Read from the run alone
(store.get_run's shape or a run document), as summary.py reads it.

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
    """The run's warnings by cause, in the order they first come: [{cause, steps: [{key, title}], details}], steps
    empty for a warning of the whole run. `details`: each reason whole, a step's named by its title. The reasons
    that make a run not comparable are left out: the summary says those with its badge. `suspects`:
    validity.suspects(run) when the caller has it already."""
    suspects = validity.suspects(run) if suspects is None else suspects
    apart = set(document.incomparable(run))
    groups = {}
    for text in document.run_warnings(run, [[] for _ in run["steps"]]):
        if text not in apart:
            words = text.split(": ", 1)[0]
            groups.setdefault(words, {"cause": words, "steps": [], "details": []})["details"].append(text)
    for step, reasons in zip(run["steps"], suspects):
        for reason in reasons:
            words = validity.cause_of(reason)
            group = groups.setdefault(words, {"cause": words, "steps": [], "details": []})
            title = step.get("title") or step["key"]
            if step["key"] not in (s["key"] for s in group["steps"]):
                group["steps"].append({"key": step["key"], "title": title})
            group["details"].append(f"{title}: {reason}")
    return list(groups.values())
