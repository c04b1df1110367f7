"""A run's testbed, read from its stored document alone: what it was (CPU, kernel, host controller, link and the
PCIe path above it, each control's outcome, the host's cost, purge, fio), what in it is flagged (a link below the
drive's maximum or a narrower one above it, thermal throttling, a purge weaker than the suite asks, a fio outside
the validated range), and the one rule that says whether two runs' testbeds compare (docs/methodology.md, "The
summary, compare and the bench"): the same class in each part. A part that a run did not record, or that could
not be read, is unknown: it never matches a known class; against another run's unknown it compares, and the
part is "not verified". A class known in part (a link's speed with its maximum unknown) matches only the same.
"""

import re

from ..drives import purge
from . import validity

# The fio versions the suites are validated with: Mixed Burst's clock is the `wait` of fio's version 2 iolog,
# whose meaning run/burst.py takes from fio 3.33's and 3.41's iolog.c.
FIO_VALIDATED = ((3, 33), (3, 41))
VALIDATED = "3.33 to 3.41"
NOT_RECORDED = "not recorded"
UNAVAILABLE = "unavailable"
UNKNOWN = re.compile(f"{NOT_RECORDED}|{UNAVAILABLE}")
# Each part of the rule, as the pages name it, and its class in a testbed that is all the suite asks: the bench's
# reference.
PARTS = {
    "link": "link",
    "path": "host path",
    "controller": "host controller",
    "cache": "write cache",
    "link_power": "link power",
    "iommu": "IOMMU",
    "cpu_clock": "CPU clock",
    "purge": "purge",
    "fio": "fio",
    "heat": "ran hot",
    "flagged": "flags",
}
REFERENCE = {
    "link": "at the drive's maximum",
    "path": "no narrower link",
    "controller": "the drive's own",
    "cache": "on",
    "link_power": "ASPM performance, L-states none; power saving off",
    "iommu": "identity",
    "cpu_clock": "governor performance; turbo on",
    "purge": "the strongest the drive offers",
    "fio": VALIDATED,
    "heat": "no",
    "flagged": "none",
}
# The causes of a step's flags that the class holds in a part of their own (heat), and the separator of the
# flags' causes in their class.
OWN_PART = {"the drive ran hot"}
CAUSES = "; "
# fio had a whole CPU in the host-cost calibration when the median of its jobs' CPU shares is at least this.
WHOLE_CPU = 90.0
# The driver and mode a drive's own controller runs in, by transport: anything else (a RAID mode, an Intel VMD
# domain, a USB bridge) puts its own logic between the drive and the host.
OWN = {"nvme": ("nvme", "NVMe"), "sata": ("ahci", "AHCI")}


def _number(text):
    found = re.match(r"\s*(\d+(?:\.\d+)?)", str(text or ""))
    return float(found.group(1)) if found else None


def link(drive):
    """(what the link is, its class, the flag when it runs below the drive's maximum). The link is as the drive
    was found, before the run: PCIe's current speed and width against the most the drive's function can do (its
    max_link_speed and max_link_width); SATA's negotiated speed against the most the drive can (its IDENTIFY, by
    smartctl), with the most its port can beside it."""
    found = drive.get("link")
    if not isinstance(found, dict) or _number(found.get("speed")) is None:
        if "host_controller" in drive and drive["host_controller"] is None:
            return "none (a loop device)", "none", None
        return "none known", NOT_RECORDED, None
    speed = _number(found["speed"])
    # where the most the drive can is unknown, its link's class is what it ran at: known in part
    unknown_top = f"; its maximum {NOT_RECORDED}"
    if found.get("kind") == "pcie":
        width = _number(str(found.get("width") or "").lstrip("x"))
        now = f"PCIe {speed:g} GT/s x{width:g}" if width else f"PCIe {speed:g} GT/s"
        top_speed, top_width = _number(found.get("max_speed")), _number(found.get("max_width"))
        if top_speed is None or top_width is None or width is None:
            return now, now + unknown_top, None
        most = f"{top_speed:g} GT/s x{top_width:g}"
        below = speed < top_speed or width < top_width
        where = ""
    else:
        now = f"SATA {speed:g} Gb/s"
        top_speed = _number(found.get("max"))
        if top_speed is None:
            return now, now + unknown_top, None
        most = f"{top_speed:g} Gb/s"
        below = speed < top_speed
        port = _number(found.get("port_max"))
        where = f"; its port can {port:g} Gb/s" if port is not None else ""
    if not below:
        return f"{now} (the drive's maximum)", REFERENCE["link"], None
    flag = (
        f"the drive's link runs below its maximum: {now}, where the drive can {most}{where}: every figure the link "
        "bounds (sequential MB/s, high queue depth IOPS) is the link's, not the drive's"
    )
    return f"{now} (the drive can {most})", f"below the drive's maximum: {now}", flag


def host_path(drive):
    """(what the PCIe path above the drive is, its class, the flag when a link on it is narrower than the drive
    needs). The drive needs its own link at its maximum (NVMe), or its SATA link's maximum in payload; a link of
    the path that carries less bounds every figure that link bounds: a SATA drive behind a Gen2 x1 adapter, an
    NVMe drive behind a switch on fewer lanes. An NVMe drive's own link and the port facing it are the link that
    `link` judges: here only a link narrower than the drive's own as it runs counts. No PCIe link above a drive
    that has a PCI function (a SATA adapter built into the chipset, a VM's conventional PCI) is no narrower link:
    a SATA drive on the chipset and an NVMe drive in a full slot share the class."""
    if "pcie_path" not in drive:
        return NOT_RECORDED, NOT_RECORDED, None
    path = drive["pcie_path"] or []
    if not path:
        if drive.get("host_controller"):
            return "none (no PCIe link above the drive)", REFERENCE["path"], None
        return "none (no PCIe link above the drive)", "none", None
    rates = [(validity.link_limit({"kind": "pcie", "speed": hop["speed"], "width": hop["width"]}), hop) for hop in path]
    known = [(rate, hop) for rate, hop in rates if rate]
    shown = " → ".join(f"{hop['pci']} {hop['speed']} {hop['width'] or ''}".strip() for hop in path)
    if not known:
        return shown, NOT_RECORDED, None
    own = drive.get("link") or {}
    if drive.get("transport") == "sata":
        need = validity.link_limit({"kind": "sata", "speed": own.get("max") or own.get("speed")})
    else:
        need = validity.link_limit({"kind": "pcie", "speed": own.get("speed"), "width": own.get("width")})
    rate, narrowest = min(known, key=lambda pair: pair[0])
    if need is None:
        return shown, NOT_RECORDED, None
    if rate >= need:
        return shown, REFERENCE["path"], None
    hop = f"{narrowest['speed']} {narrowest['width']} at {narrowest['pci']}"
    flag = (
        f"a link above the drive is narrower than the drive needs: {hop} carries {rate / 1e6:,.0f} MB/s, where the "
        f"drive's own link can {need / 1e6:,.0f} MB/s: every figure that link bounds (sequential MB/s, high queue "
        "depth IOPS) is the host's, not the drive's"
    )
    return shown, f"bounded by {narrowest['speed']} {narrowest['width']}", flag


def _outcome(control):
    """A control's outcome as a class: the value it was set to, or, where it could not be set, what it was left
    at (unavailable when that is unknown too)."""
    if not isinstance(control, dict):
        return NOT_RECORDED
    if control.get("state") == "applied":
        return str(control.get("value"))
    before = control.get("before")
    return f"left {before}" if isinstance(before, str) else UNAVAILABLE


def _l_states(aspm):
    """The ASPM states enabled on the drive's link, from both its ends (the drive's function and the port facing
    it), as read once the run's controls were set (the ASPM control's `l_states`, quiet.py): the policy decides
    them, so what discovery saw before it was set says nothing of the run. None: no PCIe link."""
    states = aspm.get("l_states") if isinstance(aspm, dict) else None
    if not isinstance(states, list):
        return NOT_RECORDED
    if not all(isinstance(s, dict) for s in states):
        return UNAVAILABLE
    on = sorted({name for s in states for name, value in s.items() if value == "1"})
    return ", ".join(on) or "none"


def controls(run):
    """The class of each control the run sets, by its outcome during the run: the write cache, link power (the
    ASPM policy and the L-states of the drive's link, NVMe's APST or SATA's link power management), the IOMMU
    domain of the drive's function, and the CPU clock (the governor and turbo). NVMe's APST and SATA's link power
    management are one control, power saving: off is off, whichever the drive's interface."""
    env = run.get("environment") or {}
    found = env.get("controls")
    if not isinstance(found, dict):
        return dict.fromkeys(("cache", "link_power", "iommu", "cpu_clock"), NOT_RECORDED)
    saving = found.get("power_management")
    saving = "off" if isinstance(saving, dict) and saving.get("state") == "applied" else _outcome(saving)
    aspm = _outcome(found.get("aspm"))
    domain = ((env.get("kernel") or {}).get("iommu") or {}).get("drive_domain") or NOT_RECORDED
    turbo = str((env.get("cpu") or {}).get("turbo") or NOT_RECORDED).split(" ")[0].rstrip(":")
    return {
        "cache": _outcome(found.get("write_cache")),
        "link_power": f"ASPM {aspm}, L-states {_l_states(found.get('aspm'))}; power saving {saving}",
        "iommu": UNAVAILABLE if domain.startswith(UNAVAILABLE) else domain,
        "cpu_clock": f"governor {_outcome(found.get('governor'))}; turbo {turbo}",
    }


def host(run):
    """(what the host cost, the flag when the calibration says the PC is in the figures): the host-cost calibration
    (run/host_cost.py), its cost per IO and the share of a CPU fio had in it, the median of its jobs', on fio's null
    engine and through the kernel. Flagged: a calibration that failed, where the figures carry no host share; one in
    which fio had under WHOLE_CPU percent (other work or a limit on the host, a CPU quota, a busy neighbour, held it
    back as the run began), whatever its steps' own waits (validity rule 9) show; one whose CPU time per IO on the
    null engine moved from the run's start to its end by more than the noise (the CPU's speed changed)."""
    cost = (run.get("environment") or {}).get("host_cost")
    if not isinstance(cost, dict):
        return NOT_RECORDED, None
    jobs = [job for job in cost.get("jobs") or [] if isinstance(job.get("cpu_percent"), (int, float))]
    if not jobs:
        why = cost.get("unavailable", "no job measured")
        failed = f"{validity.HOST_CAUSE}: the host-cost calibration failed ({why}), so no figure carries its host share"
        return f"unavailable: {why}", failed if cost.get("failed") else None
    median = sorted(job["cpu_percent"] for job in jobs)[len(jobs) // 2]
    costs = sorted(job.get("cpu_us_per_io") or job["us_per_io"] for job in jobs if job.get("us_per_io"))
    shown = f"fio had {median:.0f}% of a CPU on the null engine, {costs[0]:.2f} to {costs[-1]:.2f} us of CPU per IO"
    flags = []
    if median < WHOLE_CPU:
        flags.append(
            f"{validity.HOST_CAUSE}: fio had {median:.0f}% of a CPU when the host's cost was measured before the run, "
            f"under {WHOLE_CPU:.0f}%: "
            "other work or a limit on the host held it back, so every figure may be partly the PC's"
        )
    kernel, end = cost.get("kernel"), cost.get("end")
    if isinstance(kernel, dict):
        through = sorted(job["cpu_us_per_io"] for job in kernel.get("jobs") or [] if job.get("cpu_us_per_io"))
        if through:
            shown += f"; through the kernel {through[0]:.2f} to {through[-1]:.2f} us ({kernel.get('device')})"
        else:
            shown += f"; through the kernel unavailable: {kernel.get('unavailable', 'no job measured')}"
            flags.append(
                f"{validity.HOST_CAUSE}: the host-cost calibration through the kernel failed "
                f"({kernel.get('unavailable', 'no job measured')}): the kernel's part of each IO is not measured"
            )
    if isinstance(end, dict) and isinstance(end.get("ratio"), (int, float)):
        shown += f"; at the run's end x{end['ratio']:.2f}"
        if end.get("moved"):
            flags.append(
                f"{validity.HOST_CAUSE}: the host's CPU time per IO on the null engine was x{end['ratio']:.2f} or "
                f"further at the run's end of what it was at its start, in each of the jobs played again, beyond the "
                f"noise (±{end.get('limit', 0):.0%}): the CPU's speed changed while the steps ran (a laptop off its "
                "turbo clock), so its steps' figures are of unalike hosts"
            )
    elif isinstance(end, dict):
        flags.append(
            f"{validity.HOST_CAUSE}: the host-cost calibration at the run's end failed "
            f"({end.get('unavailable', 'no job measured')}): a change of the CPU's speed while the steps ran "
            "would not show"
        )
    return shown, "; ".join(flags) or None


def controller(drive):
    """(what the host controller is, its class): the PCI function the drive is reached through."""
    if "host_controller" not in drive:
        return NOT_RECORDED, NOT_RECORDED
    host = drive["host_controller"]
    if not host:
        return "none (no PCI function: a loop device)", "none"
    shown = f"{host['driver'] or 'no driver'} {host['id']} ({host['mode']}) at {host['pci']}"
    # a SAS drive's own controller is the SAS HBA it sits behind; a SATA drive behind one goes through its SAT
    if (host["driver"], host["mode"]) == OWN.get(drive.get("transport")) or (
        drive.get("transport") == "sas" and drive.get("hba")
    ):
        return shown, REFERENCE["controller"]
    return shown, f"{host['driver'] or 'no driver'} ({host['mode']})"


def purge_used(run):
    """(what the purges used, its class, the flag when a purge was weaker than the erase the suite asks). The
    class is the drive's best: a purge weaker than an erase is the testbed's only where the drive offers a
    stronger method that was not used (a frozen drive, another namespace in use, a failure: purge.offered); a
    drive that offers no erase (a SATA drive without the security feature set, a loop device) is purged as well as
    it can be, and its flag says so all the same."""
    used = [
        (step["key"], step["detail"]["method"], step["detail"].get("attempts") or [])
        for step in run["steps"]
        if step["kind"] == "purge" and step["state"] == "done" and isinstance(step.get("detail"), dict)
        if step["detail"].get("method")
    ]
    if not used:
        return "none done", NOT_RECORDED, None
    weak = [(key, method, tried) for key, method, tried in used if method not in purge.ERASES]
    methods = ", ".join(dict.fromkeys(method for _, method, _ in used))
    if not weak:
        return methods, REFERENCE["purge"], None
    key, method, tried = weak[0]
    why = "; ".join(f"{a['method']}: {a['reason']}" for a in tried if a.get("reason"))
    flag = (
        f"a purge weaker than the suite asks: step {key} used {method}, not an erase"
        + (f" ({why})" if why else "")
        + ": the drive was not returned to its fresh state, so what follows may measure what it held before"
    )
    for _, method, tried in weak:
        stronger = [a["method"] for a in tried if a.get("outcome") != "used" and purge.offered(a)]
        if stronger:
            return methods, f"{method}, where the drive offers {stronger[0]}", flag
    return methods, REFERENCE["purge"], flag


def fio(run):
    """(fio's version, its class, the flag when it is outside the validated range)."""
    version = ((run.get("environment") or {}).get("tools") or {}).get("fio")
    found = re.fullmatch(r"fio-(\d+)\.(\d+)\S*", str(version or ""))
    if not found:
        return version or NOT_RECORDED, NOT_RECORDED, None
    low, high = FIO_VALIDATED
    if low <= (int(found.group(1)), int(found.group(2))) <= high:
        return version, VALIDATED, None
    flag = (
        f"{version} is outside the fio versions the suites are validated with ({VALIDATED}): Mixed Burst's clock "
        "is fio's iolog `wait`, whose meaning is checked on those versions only"
    )
    return version, f"{version}: outside {VALIDATED}", flag


def throttled(run):
    """The flag when the drive's counters of time spent hot rose during the run (environment `thermal`)."""
    thermal = (run.get("environment") or {}).get("thermal") or {}
    rose = thermal.get("rose") or []
    if not rose:
        return None
    moved = ", ".join(f"{name} {thermal['counters'][name][0]} to {thermal['counters'][name][1]}" for name in rose)
    return (
        f"the drive ran hot or throttled during the run ({moved}): its figures may be its thermal limit's, not its own"
    )


def heat(run):
    """The run's class in heat: "yes" when a step reached the drive's warning temperature or moved its counters of
    time spent hot (validity rule 8), or the counters rose over the whole run; "no" only when every step that did
    its work was known cool, by a temperature read against a known warning temperature or by counters read before
    and after it; else not recorded (unknown, never cool). Runs recorded before steps kept their heat have only
    the run's counters, so they are "yes" or not recorded."""
    warning = run["drive"].get("warning_temp_c")
    if throttled(run) is not None:
        return "yes"
    known = False
    for step in run["steps"]:
        detail = step.get("detail") if isinstance(step.get("detail"), dict) else {}
        metrics = {m["name"]: m["value"] for m in step.get("metrics") or [] if isinstance(m["value"], (int, float))}
        if validity.heated(step, metrics, warning):
            return "yes"
        if step["state"] != "done":
            continue
        read = isinstance(warning, (int, float)) and "temperature.max_c" in metrics
        counted = isinstance(detail.get("thermal"), dict) and "counters" in detail["thermal"]
        if not (read or counted):
            return NOT_RECORDED
        known = True
    return "no" if known else NOT_RECORDED


def flags(run):
    """The testbed's flags, in words for the report's warnings: none when it is as the suite asks."""
    drive = run["drive"]
    found = [link(drive)[2], host_path(drive)[2], host(run)[1], purge_used(run)[2], fio(run)[2], throttled(run)]
    return [f for f in found if f]


def flagged(run, suspects):
    """The flags' class: the cause of each flag of a step and of the host's calibration (validity.cause_of), in
    order, each a class of its own, or "none". The testbed's other flags (link, path, purge, fio, heat) are parts
    of their own already."""
    found = {validity.cause_of(reason) for reasons in suspects for reason in reasons}
    if host(run)[1]:
        found.add(validity.HOST_CAUSE)
    return CAUSES.join(sorted(found - OWN_PART)) or REFERENCE["flagged"]


def of(run, suspects):
    """The testbed as a card carries it: what its CPU, kernel, host controller, link and path, host cost, purge
    and fio were, and its class in each part of the rule. `suspects`: validity.suspects(run), whose causes are
    its flags' class with the host's calibration."""
    env = run.get("environment") or {}
    drive = run["drive"]
    shown_link, link_class, _ = link(drive)
    shown_path, path_class, _ = host_path(drive)
    shown_controller, controller_class = controller(drive)
    shown_host, _ = host(run)
    shown_purge, purge_class, _ = purge_used(run)
    version, fio_class, _ = fio(run)
    data = env.get("data") or {}
    if data.get("fio_patch"):
        version = f"{version} with {data['fio_patch']}"
    elif data.get("why"):  # the run's warnings say why
        version = f"{version}, its data made on the clock ({data['options']})"
    return {
        "cpu": (env.get("cpu") or {}).get("model") or NOT_RECORDED,
        "kernel": (env.get("kernel") or {}).get("release") or NOT_RECORDED,
        "controller": shown_controller,
        "link": shown_link,
        "path": shown_path,
        "host": shown_host,
        "purge": shown_purge,
        "fio": version,
        "classes": {
            "link": link_class,
            "path": path_class,
            "controller": controller_class,
            **controls(run),
            "purge": purge_class,
            "fio": fio_class,
            "heat": heat(run),
            "flagged": flagged(run, suspects),
        },
    }


def _same(theirs, ours):
    # not recorded and unavailable are both unknown: one class
    return UNKNOWN.sub("?", theirs) == UNKNOWN.sub("?", ours)


def _flags_differ(name, theirs, ours, whose):
    """The flags' part, cause by cause: each cause one run has and the other has not."""
    if UNKNOWN.fullmatch(theirs) or UNKNOWN.fullmatch(ours):
        return [] if _same(theirs, ours) else [f"{name}: {theirs} ({whose}: {ours})"]
    mine, yours = (set() if cls == REFERENCE["flagged"] else set(cls.split(CAUSES)) for cls in (theirs, ours))
    return [f"{name}: {cause} ({whose}: not so)" for cause in sorted(mine - yours)] + [
        f"{name}: not {cause} ({whose}: {cause})" for cause in sorted(yours - mine)
    ]


def judged(reference, testbed, whose="the current run's", ideal=False):
    """(the parts in which a testbed's class (testbed["classes"]) differs from `reference` (classes), in words;
    the parts that compare unverified, "not verified: PART"): nothing differs when the two compare. Unknown (not
    recorded, or unavailable: it could not be read) never matches a known class, and compares with unknown, the
    part not verified. `ideal`: `reference` is the suite's class (REFERENCE, the bench's), known in every part,
    against which an unknown part can be neither matched nor told apart: not verified."""
    classes = (testbed or {}).get("classes") or {}
    differs, unverified = [], []
    for part, name in PARTS.items():
        theirs, ours = classes.get(part, NOT_RECORDED), reference.get(part, NOT_RECORDED)
        if UNKNOWN.search(theirs) and (ideal or UNKNOWN.search(ours)) and (ideal or _same(theirs, ours)):
            unverified.append(f"not verified: {name} ({theirs})")
        elif part == "flagged":
            differs += _flags_differ(name, theirs, ours, whose)
        elif not _same(theirs, ours):
            differs.append(f"{name}: {theirs} ({whose}: {ours})")
    return differs, unverified


def differences(reference, testbed, whose="the current run's"):
    """The parts in which a testbed's class differs from `reference`'s, in words (judged)."""
    return judged(reference, testbed, whose)[0]


def summary(testbed):
    """One line of a testbed for a page: its CPU, host controller and link."""
    testbed = testbed or {}
    return " · ".join(
        f"{label} {testbed.get(key, NOT_RECORDED)}"
        for label, key in (("CPU", "cpu"), ("controller", "controller"), ("link", "link"))
    )
