"""The summary and the ranked bars as HTML, written once for the web pages and the offline report.html and
compare.html. Plain Python, no template engine: the engine writes bundles on an install that has no web
extras. Every value from a run (a drive's model, a step's source) is escaped."""

import re
from html import escape

from ..human import figure, quantity, shown, size
from . import headline, ranking, store, testbed


def _e(value):
    # As Jinja escapes the rest of the page (markupsafe): &, <, >, " and ' each as an entity.
    return escape(str(value), quote=False).replace('"', "&#34;").replace("'", "&#39;")


def summary(s):
    """A run's summary (results/summary.of) as its first screen."""
    d = s["drive"]
    capacity = size(d["capacity_bytes"]) if d.get("capacity_bytes") else ""
    out = ['<section class="summary-card" id="summary" aria-label="summary">']
    if s["emulated"]:
        out.append(
            "<p class=\"emulated\">An emulated drive: these figures are QEMU's, not a real drive's. Try the "
            "appliance with them; compare real drives only.</p>"
        )
    out += [
        '<div class="identity-line">',
        f'<strong class="model">{_e(d.get("model") or d.get("path") or "unknown drive")}</strong> ',
        f"<span>serial {_e(d.get('serial') or 'not reported')} · firmware {_e(d.get('firmware') or 'not reported')}"
        f" · {_e(d.get('transport') or '')} {_e(capacity)} · {_e(d.get('path') or '')}</span></div>",
        f'<div class="suite-line">Suite <strong>{_e(s["suite"])}</strong> '
        f'<code title="{_e(s["suite_hash"])}">{_e(s["suite_hash"][:12])}</code>',
    ]
    if s["workload_sha256"]:
        out.append(f' · workload <code title="{_e(s["workload_sha256"])}">{_e(s["workload_sha256"][:12])}</code>')
    if s["fio"]:
        out.append(f" · {_e(s['fio'])}")
    if s["comparable"]:
        out.append(' <span class="badge comparable">comparable</span></div>')
    else:
        why = "\n".join(s["incomparable"])
        out.append(f' <span class="badge incomparable" title="{_e(why)}">not comparable</span></div>')
    # each step's causes, by their place in the list below: a figure of a flagged step links to them
    marks = {}
    for n, c in enumerate(s["causes"], 1):
        for step in c["steps"]:
            marks.setdefault(step["key"], []).append(
                f'<a class="flag" href="#cause-{n}" title="{_e(c["cause"])}">⚠</a>'
            )
    corners = [f for f in s["figures"] if f["test"] == "four corners"]
    if s["cdm"] or corners:
        out.append('<div class="glance">')
        if s["cdm"]:
            out.append(cdm_grid(s["cdm"]))
        if corners:
            out.append(corners_strip(corners))
        out.append("</div>")
    if corners:
        # the strip is the four corners' one place: the table below holds the other tests' figures
        tests = dict.fromkeys(re.sub(r" (read|write),", ",", f["label"]) for f in corners)
        flagged = "".join("".join(marks[step]) for step in dict.fromkeys(f["step"] for f in corners) if step in marks)
        out.append(
            f'<p class="corners-note">The four corners ({_e("; ".join(tests))}, higher is better) are tests of '
            "their own, not the grid's: other block sizes, queue depths and spans, so their figures differ from it. "
            f"A review quotes the grid.{' ' + flagged if flagged else ''}</p>"
        )
    table = [f for f in s["figures"] if not (corners and f["test"] == "four corners")]
    if table or s["not_reached"]:
        out.append(
            '<table class="headline"><thead><tr><th>Test</th><th>Figure</th><th class="num">Value</th><th></th>'
            "</tr></thead><tbody>"
        )
        for f in table:
            hover = f"{f['name']} = {f['value']} {f['unit']}\nsource: {f['source']}"
            out.append(
                f'<tr data-figure="{_e(f["id"])}"><td class="test">{_e(f["test"])}</td><th>{_e(f["label"])}'
                + (f'<br><small class="proof">{_e(f["proof"])}</small>' if f.get("proof") else "")
                + f'</th><td class="num" title="{_e(hover)}">{_e(quantity(f["value"], f["unit"]))}'
                f"{' ' + ''.join(marks[f['step']]) if f['step'] in marks else ''}</td>"
                f'<td class="better">{_e(f["better"])} is better</td></tr>'
            )
        for f in s["not_reached"]:
            out.append(
                f'<tr data-figure="{_e(f["id"])}"><td class="test">{_e(f["test"])}</td><th>{_e(f["label"])}</th>'
                f'<td class="num" title="{_e(f["why"])}">not reached</td><td class="better"></td></tr>'
            )
        out.append("</tbody></table>")
    else:
        out.append('<p class="note">No headline figure yet: the steps that measure them have not ended done.</p>')
    out.append(flags(s["causes"], s["state"]))
    out.append(
        '<p class="save-summary"><button type="button" data-save-summary>Save summary image</button></p>'
        f'<div class="summary-image" hidden>{summary_image(s)}</div></section>'
    )
    return "".join(out)


def cdm_grid(rows):
    """CrystalDiskMark's grid (summary.cdm_grid): a row for each preset, its read and write MB/s large, a random
    test's IOPS under them."""
    out = [
        '<table class="cdm-grid" aria-label="CrystalDiskMark"><thead><tr><th></th><th>Read <span class="unit">MB/s'
        '</span></th><th>Write <span class="unit">MB/s</span></th></tr></thead><tbody>'
    ]
    for r in rows:
        out.append(f'<tr data-cdm="{_e(r["test"])}"><th>{_e(r["test"].replace("-", " "))}</th>')
        for rw in ("read", "write"):
            mb_s, iops = r[rw]["mb_s"], r[rw]["iops"]
            if mb_s is None:
                out.append('<td class="num">–</td>')
                continue
            below = f"<small>{_e(figure(iops['value']))} IOPS</small>" if iops and r["test"].startswith("RND") else ""
            hover = f"{mb_s['name']} = {mb_s['value']} MB/s\nsource: {mb_s['source']}"
            out.append(f'<td class="num" title="{_e(hover)}"><span>{_e(figure(mb_s["value"]))}</span>{below}</td>')
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


STRIP_W, STRIP_LABEL, STRIP_VALUE, STRIP_ROW = 420, 170, 90, 22


def corners_strip(corners):
    """The four corners as a strip of bars: each pair (random in IOPS, sequential in MB/s) read against write on
    one scale of its own, as IOPS and MB/s share none."""
    height = STRIP_ROW * len(corners) + 4
    bar_w = STRIP_W - STRIP_LABEL - STRIP_VALUE
    top = {}
    for f in corners:
        top[f["unit"]] = max(top.get(f["unit"], 0), f["value"])
    out = [
        f'<svg class="corners" xmlns="http://www.w3.org/2000/svg" width="{STRIP_W}" height="{height}" '
        f'viewBox="0 0 {STRIP_W} {height}" font-family="sans-serif" font-size="14" role="img" '
        'aria-label="The four corners: read against write, random in IOPS, sequential in MB/s">'
    ]
    for i, f in enumerate(corners):
        y = 2 + i * STRIP_ROW
        width = bar_w * f["value"] / (top[f["unit"]] or 1)
        color = "#1f77b4" if f["name"].startswith("read") else "#d62728"
        out.append(
            f'<g data-figure="{_e(f["id"])}"><title>{_e(f["label"])}: {_e(f["value"])} {_e(f["unit"])}</title>'
            f'<text x="{STRIP_LABEL - 6}" y="{y + 15}" text-anchor="end">'
            f"{_e(f['label'].replace('sequential', 'seq.'))}</text>"
            f'<rect x="{STRIP_LABEL}" y="{y + 3}" width="{width:.1f}" height="{STRIP_ROW - 6}" fill="{color}"/>'
            f'<text x="{STRIP_LABEL + width + 4:.1f}" y="{y + 15}">{_e(quantity(f["value"], f["unit"]))}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)


CARD_W = 640


def summary_image(s):
    """The summary as one card for a forum post, an SVG that the page saves as PNG: the drive, the suite, the
    CrystalDiskMark grid (or, without one, the headline figures) and the verdict."""
    d = s["drive"]
    capacity = size(d["capacity_bytes"]) if d.get("capacity_bytes") else ""
    lines = []  # (y, x, text, attributes)
    y = 30
    lines.append((y, 16, d.get("model") or d.get("path") or "unknown drive", 'font-size="18" font-weight="bold"'))
    y += 20
    lines.append((y, 16, f"{d.get('transport') or ''} {capacity} · firmware {d.get('firmware') or 'not reported'}", ""))
    y += 20
    lines.append(
        (
            y,
            16,
            f"ssdbench suite {s['suite']} {s['suite_hash'][:12]}" + (f" · {s['fio']}" if s["fio"] else ""),
            'fill="#555"',
        )
    )
    y += 14
    if s["cdm"]:
        y += 22
        lines += [
            (y, 200, "Read MB/s", 'font-weight="bold" text-anchor="end"'),
            (y, 330, "Write MB/s", 'font-weight="bold" text-anchor="end"'),
        ]
        for r in s["cdm"]:
            y += 28
            lines.append((y, 16, r["test"].replace("-", " "), 'font-weight="bold" fill="#2e7d32"'))
            for x, rw in ((200, "read"), (330, "write")):
                mb_s = r[rw]["mb_s"]
                lines.append((y, x, figure(mb_s["value"]) if mb_s else "–", 'font-size="20" text-anchor="end"'))
    else:
        for f in s["figures"][:8]:
            y += 24
            lines += [
                (y, 16, f["label"], ""),
                (y, 460, quantity(f["value"], f["unit"]), 'font-weight="bold" text-anchor="end"'),
            ]
    y += 34
    if s["state"] in store.ACTIVE:
        verdict, color = f"Run {s['state']}: not every step has ended", "#666"
    elif s["causes"]:
        n = len(s["causes"])
        verdict, color = (
            f"⚠ {n} validity flag{'s' if n > 1 else ''}: " + "; ".join(c["cause"] for c in s["causes"]),
            "#b26a00",
        )
    else:
        verdict, color = "No validity flag: every step's figures are the drive's", "#2e7d32"
    lines.append((y, 16, ("comparable · " if s["comparable"] else "not comparable · ") + verdict, f'fill="{color}"'))
    if s["emulated"]:
        y += 20
        lines.append((y, 16, "An emulated drive: these figures are QEMU's.", 'fill="#1f5fa8"'))
    height = y + 22
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{CARD_W}" height="{height}" viewBox="0 0 {CARD_W} {height}" '
        f'font-family="sans-serif" font-size="13"><rect width="100%" height="100%" fill="#ffffff" stroke="#ccd"/>'
    ]
    for ty, tx, text, attrs in lines:
        if len(text) > 90:
            text = text[:89] + "…"
        out.append(f'<text x="{tx}" y="{ty}" {attrs}>{_e(text)}</text>')
    out.append("</svg>")
    return "".join(out)


def flags(causes, state):
    """The validity flags, one line for each cause (results/causes.py), its details folded under it. That no step
    is flagged is said only once the run has ended: a step still to come may be."""
    if not causes:
        if state in store.ACTIVE:
            return '<p class="flags pending">Validity flags show here as the steps end.</p>'
        return (
            "<p class=\"flags ok\">No validity flag: every step's figures are the drive's, by every check the "
            "report makes.</p>"
        )
    out = ['<div class="flags" aria-label="validity flags">']
    for n, c in enumerate(causes, 1):
        steps = c["steps"]
        count = f"{len(steps)} step{'s' if len(steps) > 1 else ''}: " if steps else ""
        titles = f' <span class="steps">({_e(", ".join(st["title"] for st in steps))})</span>' if steps else ""
        details = "".join(f"<li>{_e(d)}</li>" for d in c["details"])
        severity = c["severity"]
        out.append(
            f'<details class="cause" id="cause-{n}"><summary>⚠ <span class="severity {_e(severity.split()[0])}">'
            f"{_e(severity.capitalize())}</span> {_e(count)}<strong>{_e(c['cause'])}</strong>{titles}"
            f"</summary><ul>{details}</ul></details>"
        )
    out.append(
        "<p class=\"flag-key\">Key: <strong>Invalid</strong>, the figure is not the drive's (a cache or the drive's "
        "map answered, or the measurement broke); <strong>Affects comparison</strong>, the figure is the drive's "
        "with the PC, the heat or the timing in it; <strong>Information</strong>, no figure is touched. "
        "⚠ beside a figure, its step has a warning above (click the ⚠ for it); "
        "⚠ host on a bar, the PC is in that figure; ★ best, the best drive of the bench.</p></div>"
    )
    return "".join(out)


# The chart's own pixels: at the page's full width (1100 px) it is drawn one to one, and scaled to a narrower one.
WIDTH, LABEL_W, VALUE_W, ROW_H, TOP = 1100, 260, 250, 24, 8
BAR_W = WIDTH - LABEL_W - VALUE_W
LABEL_CHARS = 34  # what fits LABEL_W at 12 px, bold


def bar_chart(c, fineprint):
    """One ranked bar chart (an entry of results/ranking.charts) as a figure holding an SVG: drawn on the server,
    the same in the web UI and offline, and saved as SVG or PNG as it is. Every run on one scale; a run that does
    not compare with the current one hatched, with a badge that names how. A chart with no bar (its steady state
    not reached by any run) is a line that says so. A bar marked best (the bench's first) says so after its value."""
    if not c["bars"]:
        return (
            f'<p class="note no-bars" data-chart="{_e(c["id"])}">{_e(c["label"])}: not reached by '
            f"{_e(', '.join(c.get('not_reached') or []))}</p>"
        )
    height = TOP + len(c["bars"]) * ROW_H + 8
    scale = c["scale"] or 1
    hatch = "hatch-" + re.sub(r"[^\w-]", "-", c["id"])

    def x(value):
        return BAR_W * value / scale

    factor, unit = shown(1, c["unit"])  # the bars' lengths keep the figure's own values, their labels the page's
    what = f"{c['label']}, {unit}, {c['better']} is better"
    out = [
        f'<figure class="chart bars" data-chart="{_e(c["id"])}"><figcaption>{_e(c["label"])} '
        f'<span class="unit">({_e(unit)}, {_e(c["better"])} is better)</span>'
        + (f' <span class="note">not reached: {_e(", ".join(c["not_reached"]))}</span>' if c.get("not_reached") else "")
        + "</figcaption>",
        f'<svg class="wide" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height + 16}" '
        f'viewBox="0 0 {WIDTH} {height + 16}" font-family="sans-serif" font-size="12" role="img" '
        f'aria-label="{_e(what)}">{_hatch_pattern(hatch)}'
        '<rect class="ground" width="100%" height="100%" fill="#ffffff"/>',
    ]
    for i, b in enumerate(c["bars"]):
        y = TOP + i * ROW_H
        spread = b["spread"]
        hover = f"{b['label']}: {b['value']} {c['unit']} ({b['source']})\ntestbed: {b['testbed']}"
        if b["why"]:
            hover += "\nnot comparable: " + "; ".join(b["why"])
        if b.get("unverified"):
            hover += "\n" + "; ".join(b["unverified"])
        if b.get("host"):
            hover += "\nthe PC is in this figure: " + b["host"]
        if spread:
            hover += f"; repeat set of {spread['n']}: min {spread['min']}, max {spread['max']}, stdev {spread['stdev']}"
        classes = "bar" + (" current" if b["current"] else "") + (" apart" if b["apart"] else "")
        classes += (" best" if b.get("best") else "") + (" unverified" if b.get("unverified") else "")
        # a part compared only as unknown in both runs: the bar is outlined dashed, the hover names the parts
        outline = ' stroke="#555" stroke-dasharray="4 2"' if b.get("unverified") else ""
        color = _bar_color(b, hatch)
        label = b["label"] if len(b["label"]) <= LABEL_CHARS else b["label"][: LABEL_CHARS - 1] + "…"
        weight = "bold" if b["current"] else "normal"
        out.append(
            f'<g class="{classes}" data-run="{b["run"]}" data-value="{b["value"]}"><title>{_e(hover)}</title>'
            f'<text x="{LABEL_W - 6}" y="{y + 16}" text-anchor="end" font-weight="{weight}">'
            f"{_e(label)}{' ▸' if b['current'] else ''}</text>"
            f'<rect x="{LABEL_W}" y="{y + 3}" width="{x(b["value"]):.1f}" height="{ROW_H - 6}" '
            f'fill="{color}"{outline}/>'
        )
        end = x(b["value"])
        if spread:
            x0, x1 = LABEL_W + x(spread["min"]), LABEL_W + x(spread["max"])
            out.append(
                f'<path class="range" d="M{x0:.1f} {y + 12}H{x1:.1f}M{x0:.1f} {y + 6}V{y + 18}'
                f'M{x1:.1f} {y + 6}V{y + 18}" stroke="#000" stroke-width="1.5" fill="none"/>'
            )
            end = max(end, x(spread["max"]))
        note = f" (min–max of {spread['n']})" if spread else ""
        value = f"{figure(b['value'] * factor)}{note}{_bar_marks(b)}"
        out.append(f'<text x="{LABEL_W + end + 6:.1f}" y="{y + 16}" class="value">{_e(value)}</text>')
        if b["why"]:
            badge = f"other {_differs(b)}"  # the hover holds each difference whole
            at = LABEL_W + end + 14 + 7 * len(value)
            out.append(
                f'<g class="badge"><rect x="{at:.1f}" y="{y + 4}" width="{6.5 * len(badge) + 10:.1f}" '
                f'height="{ROW_H - 8}" rx="8" fill="#fff3cd" stroke="#e0a800"/>'
                f'<text x="{at + 5:.1f}" y="{y + 16}" font-size="11">'
                f"{_e(badge)}</text></g>"
            )
        out.append("</g>")
    out.append(
        f'<text x="{WIDTH - 4}" y="{height + 10}" text-anchor="end" font-size="10" fill="#555" class="fineprint">'
        f"{_e(fineprint)}</text>"
        "</svg>"
    )
    out.append(narrow_bars(c, factor, hatch, fineprint))
    out.append("</figure>")
    return "".join(out)


NARROW_W, NARROW_ROW, NARROW_VALUE = 360, 40, 120


def _hatch_pattern(hatch):
    # each SVG its own: a pattern in the chart that the page hides (display: none) is not drawn in the other
    return (
        f'<defs><pattern id="{hatch}" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        '<rect width="6" height="6" fill="#d5e3f0"/><rect width="3" height="6" fill="#6f9cc7"/></pattern></defs>'
    )


def _bar_color(b, hatch):
    # neutral colours: the current run darker, never a red that reads as "bad"
    return "#1f4e79" if b["current"] else f"url(#{hatch})" if b["apart"] else "#5f8fbf"


def _bar_marks(b):
    return (" ⚠ host" if b.get("host") else "") + (" ★ best" if b.get("best") else "")


def _differs(b):
    """Each way the bar's run differs from the current one, by its name alone ("workload", "purge")."""
    return ", ".join(dict.fromkeys(w.split(":")[0].removeprefix("another ").removeprefix("testbed ") for w in b["why"]))


def narrow_bars(c, factor, hatch, fineprint):
    """The same bars laid out for a phone's width (the page shows it below 640 px, the wide one above): each run's
    name on a line of its own above its bar, so that nothing is scaled down under 12 px. Its groups are rows, not
    bars: the wide chart's bars are the ones that scripts and downloads read."""
    scale = c["scale"] or 1
    bar_w = NARROW_W - NARROW_VALUE
    height = len(c["bars"]) * NARROW_ROW + 24
    out = [
        f'<svg class="narrow" xmlns="http://www.w3.org/2000/svg" width="{NARROW_W}" height="{height}" '
        f'viewBox="0 0 {NARROW_W} {height}" font-family="sans-serif" font-size="12" role="img" '
        f'aria-label="{_e(c["label"])}">{_hatch_pattern(hatch + "-narrow")}'
        '<rect class="ground" width="100%" height="100%" fill="#ffffff"/>'
    ]
    for i, b in enumerate(c["bars"]):
        y = i * NARROW_ROW
        color = _bar_color(b, hatch + "-narrow")
        label = b["label"] + (" ▸" if b["current"] else "") + (f" · other {_differs(b)}" if b["why"] else "")
        label = label if len(label) <= 52 else label[:51] + "…"
        value = figure(b["value"] * factor) + _bar_marks(b)
        width = bar_w * b["value"] / scale
        out.append(
            f'<g class="row{" current" if b["current"] else ""}" data-run="{b["run"]}"><text x="0" y="{y + 13}" '
            f'font-weight="{"bold" if b["current"] else "normal"}">{_e(label)}</text>'
            f'<rect x="0" y="{y + 18}" width="{width:.1f}" height="14" fill="{color}"/>'
            f'<text x="{width + 4:.1f}" y="{y + 30}">{_e(value)}</text></g>'
        )
    out.append(
        f'<text x="0" y="{height - 6}" font-size="11" fill="#555" class="fineprint">{_e(fineprint)}</text></svg>'
    )
    return "".join(out)


def bar_charts(charts, fineprint):
    return "\n".join(bar_chart(c, fineprint) for c in charts)


def _not_ranked(why):
    """A run's note in the side-by-side grid's head where it is not ranked, naming how it differs."""
    if not why:
        return ""
    differs = _differs({"why": why})
    return f'<br><span class="not-ranked" title="{_e("; ".join(why))}">not ranked: other {_e(differs)}</span>'


def side_by_side(runs):
    """Which drive is faster: the runs' review figures (cards' "review") side by side, a row a figure, the current
    run first; each other run's difference from it in %, and the better value of each row marked, by the way the
    figure is better (higher or lower). A figure only some runs have leaves the others' cells empty. A run whose
    workload or testbed differs from the current run's (ranking.set_apart) is shown but never marked faster nor
    counted: the difference would be the workload's or the PC's, not the drive's."""
    by_run = [{f["id"]: f for f in r["review"]} for r in runs]
    ids = sorted({i for figures in by_run for i in figures}, key=headline.review_order)
    if not ids:
        return ""
    apart = [ranking.set_apart(runs[0], r) for r in runs]
    head = "".join(
        f'<th class="num{" apart" if why else ""}" scope="col">Run {r["id"]}{" (current)" if n == 0 else ""}<br>'
        f'<span class="unit">{_e(r["drive"].get("model") or r["drive"].get("path") or "")}</span>'
        f"{_not_ranked(why)}</th>"
        for n, (r, why) in enumerate(zip(runs, apart))
    )
    out = [
        '<table class="side-by-side" aria-label="the runs side by side"><thead><tr><th scope="col">Figure</th>'
        f"{head}</tr></thead><tbody>"
    ]
    faster = [0] * len(runs)
    for fid in ids:
        cells = [figures.get(fid) for figures in by_run]
        first = next(c for c in cells if c)
        values = [c["value"] if c else None for c in cells]
        known = [v for v, why in zip(values, apart) if v is not None and not why]
        best = (max if first["better"] == "higher" else min)(known) if len(known) > 1 else None
        unit = shown(None, first["unit"])[1]
        row = [
            f'<tr data-figure="{_e(fid)}"><th scope="row">{_e(first["label"])} <span class="unit">({_e(unit)}, '
            f"{_e(first['better'])} is better)</span></th>"
        ]
        for n, (c, v) in enumerate(zip(cells, values)):
            if c is None:
                row.append('<td class="num">–</td>')
                continue
            diff = ""
            if n > 0 and values[0]:
                pct = 100 * (v - values[0]) / values[0]
                diff = f' <span class="diff">{pct:+.1f} %</span>'
            mark = ""
            if v == best and known.count(best) == 1 and not apart[n]:
                faster[n] += 1
                mark = ' <span class="faster">faster</span>'
            kind = " better" if mark else " apart" if apart[n] else ""
            row.append(
                f'<td class="num{kind}" data-value="{v}" title="{_e(c["value"])} {_e(c["unit"])}">'
                f"{_e(quantity(v, c['unit']))}{diff}{mark}</td>"
            )
        out.append("".join(row) + "</tr>")
    out.append("</tbody></table>")
    tally = ", ".join(f"run {r['id']} in {faster[n]}" for n, r in enumerate(runs) if not apart[n])
    others = [str(r["id"]) for r, why in zip(runs, apart) if why]
    unranked = (
        f" Not ranked (another workload or testbed than run {runs[0]['id']}'s): run{'s' if len(others) > 1 else ''} "
        f"{', '.join(others)}."
        if others
        else ""
    )
    out.insert(
        0,
        f'<p class="verdict">Faster, figure by figure: {_e(tally)} of {len(ids)}. Each difference is against '
        f"run {runs[0]['id']}'s value.{_e(unranked)}</p>",
    )
    return "".join(out)


def compare_runs(runs, run_url=None):
    """The runs of a compare (cards), the current one first, each with its testbed, how that differs from the
    current run's (results/testbed.py's rule), and its warnings, folded: the bars above come first."""
    out = ['<ul class="runs">']
    reference = (runs[0].get("testbed") or {}).get("classes") or {}
    current = ' class="current"'
    for i, r in enumerate(runs):
        name = f"Run {r['id']}"
        head = f'<a href="{_e(run_url(r["id"]))}">{name}</a>' if run_url else name
        d = r["drive"]
        origin = f", {_e(r['origin'])}" if r.get("origin") and r["origin"] != "local" else ""
        differs, unverified = testbed.judged(reference, r.get("testbed"), f"run {runs[0]['id']}'s")
        warnings = "".join(f"<li>{_e(w)}</li>" for w in r.get("warnings") or [])
        out.append(
            f"<li{current if i == 0 else ''}>{head}{' (current)' if i == 0 else ''}: "
            f"{_e(d.get('model') or d.get('path'))} (serial {_e(d.get('serial') or 'not reported')}), "
            f"{_e(r['suite'])} <code>{_e(r['suite_hash'][:12])}</code>, {_e(r['state'])}{origin}"
            f'<div class="testbed">Testbed: {_e(testbed.summary(r.get("testbed")))}</div>'
            + (
                f'<p class="testbed-differs">Another testbed, marked apart: {_e("; ".join(differs))}</p>'
                if differs
                else ""
            )
            + (
                f'<p class="testbed-unverified">Compared, {_e("; ".join(unverified))}</p>'
                if unverified and i > 0
                else ""
            )
            + (
                f'<details class="warnings"><summary>{len(r["warnings"])} warning'
                f"{'s' if len(r['warnings']) > 1 else ''}</summary><ul>{warnings}</ul></details>"
                if warnings
                else ""
            )
            + "</li>"
        )
    out.append("</ul>")
    return "".join(out)
