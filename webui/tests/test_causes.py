"""A run's warnings by cause (results/causes.py) and as the summary draws them (results/report_html.flags), on
the smoke run made by the real engine."""

import copy

from test_review import runs_of

from ssdbench.results import causes, document, report_html, summary, validity
from ssdbench.run import plan


def test_every_flagged_step_is_under_its_rules_cause_once_with_its_title(smoke_run):
    run = runs_of(smoke_run[1])[0]
    suspects = validity.suspects(run)
    found = causes.of(run, suspects)
    names = [c["cause"] for c in found]
    assert len(names) == len(set(names))  # no cause twice
    for step, reasons in zip(run["steps"], suspects):
        for reason in reasons:
            group = next(c for c in found if c["cause"] == validity.cause_of(reason))
            assert [s["title"] for s in group["steps"] if s["key"] == step["key"]] == [step["title"]]
            assert f"{step['title']}: {reason}" in group["details"]
    # a run's own warnings, each under one cause, but none of the reasons it compares with nothing: a cause of its
    # own, or a step rule's whose cause it names (the testbed's host flag, under rule 9's)
    own = [w for w in document.run_warnings(run, [[] for _ in run["steps"]]) if w not in document.incomparable(run)]
    assert all(sum(w in c["details"] for c in found) == 1 for w in own)
    shared = {c["cause"] for c in found if c["steps"]}
    whole = [c for c in found if not c["steps"]]
    assert [d for c in whole for d in c["details"]] == [w for w in own if w.split(": ", 1)[0] not in shared]


def test_a_reason_of_a_rule_that_names_no_cause_is_grouped_by_its_consequence(smoke_run):
    run = runs_of(smoke_run[1])[0]
    plain = [[] for _ in run["steps"]]
    # a new rule's reasons as plain words, each step's with figures of its own
    for i, share in ((3, 41), (5, 57)):
        plain[i] = [f"the host took {share}% of the step's time: the host, not the drive, bounds its figures"]
    found = causes.of(run, plain)
    group = next(c for c in found if c["steps"])
    assert group["cause"] == "the host, not the drive, bounds its figures"
    assert [s["key"] for s in group["steps"]] == [run["steps"][3]["key"], run["steps"][5]["key"]]
    assert len([c for c in found if c["steps"]]) == 1


def test_the_summary_marks_each_flagged_figure_and_says_no_flag_only_once_the_run_has_ended(smoke_run):
    run = runs_of(smoke_run[1])[0]
    s = summary.of(run)
    html = report_html.summary(s)
    # one line a cause, folded, each figure of a flagged step linked to its causes
    assert html.count('<details class="cause"') == len(s["causes"]) and " open" not in html
    flagged = {st["key"] for c in s["causes"] for st in c["steps"]}
    corners = [f for f in s["figures"] if f["test"] == "four corners"]
    for f in s["figures"]:
        if f in corners:  # the strip's figures, marked once in its note (issue 45: one place for them)
            continue
        row = html.split(f'<tr data-figure="{f["id"]}">')[1].split("</tr>")[0]
        assert ('href="#cause-' in row) == (f["step"] in flagged)
    note = html.split('<p class="corners-note">')[1].split("</p>")[0] if corners else ""
    assert ('href="#cause-' in note) == any(f["step"] in flagged for f in corners)
    assert "No validity flag" not in html
    assert "No validity flag" in report_html.flags([], "done")
    for state in ("queued", "running"):
        assert "No validity flag" not in report_html.flags([], state)


def test_an_emulated_drive_or_testbed_is_said_once_at_the_top(smoke_run):
    run = runs_of(smoke_run[1])[0]
    assert not causes.emulated(run)
    for change in (
        {"drive": {"model": "QEMU NVMe Ctrl"}},
        {"environment": {"cpu": {"model": "QEMU Virtual CPU version 2.5+"}}},
        {"drive": {"host_controller": {"id": "1b36:0010"}}},
    ):
        other = copy.deepcopy(run)
        for part, values in change.items():
            other[part] = {**(other.get(part) or {}), **values}
        assert causes.emulated(other), change
        html = report_html.summary(summary.of(other))
        assert html.count("QEMU's") == 1 and html.index('class="emulated"') < html.index('class="identity-line"')


def test_a_run_on_a_stock_fio_says_why_its_data_was_made_on_the_clock(smoke_run):
    run = runs_of(smoke_run[1])[0]
    assert run["environment"]["data"]["why"] is None  # make test's fio: scramble_buffers=hash
    run = copy.deepcopy(run)
    run["environment"]["data"] = plan.STOCK.record()
    said = f"the data was made on the clock: {plan.STOCK.why}"
    assert said in document.run_warnings(run)
    assert [c["cause"] for c in causes.of(run) if said in c["details"]] == ["the data was made on the clock"]


def test_each_cause_has_its_rules_severity_and_the_worst_come_first(smoke_run):
    run = copy.deepcopy(runs_of(smoke_run[1])[0])
    # a link far slower than a loop device (rule 2: a cache answered) and a resumed run (a run's own note)
    run["drive"]["link"] = {"kind": "pcie", "speed": "2.5 GT/s", "width": "x1"}
    run["environment"]["resumed"] = [{"cut_step": 5, "from_step": 4}]
    found = causes.of(run)
    severities = [c["severity"] for c in found]
    assert severities == sorted(severities, key=validity.SEVERITIES.index)
    by_cause = {c["cause"]: c["severity"] for c in found}
    assert by_cause["faster than the drive's link: a cache answered"] == validity.INVALID
    assert by_cause["resumed"] == validity.INFORMATION
    assert found[0]["severity"] == validity.INVALID and found[-1]["severity"] == validity.INFORMATION
    html = report_html.flags(found, "done")
    assert html.index('class="severity invalid">Invalid<') < html.index('class="severity information">Information<')
    # a flag keeps its severity through a copy (as its cause does: test_heat)
    fast = [r for reasons in validity.suspects(run) for r in reasons if validity.cause_of(r).startswith("faster")]
    assert fast and {validity.severity_of(r) for r in copy.deepcopy(fast)} == {validity.INVALID}
