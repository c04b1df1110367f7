"""Figures as people read them (human.py): four significant digits wherever a figure is shown, and a time under a
second in ms or µs; and report.js's num(), which draws the report's tables and charts, rounds alike."""

import json
import os
import shutil
import subprocess

import pytest

from ssdbench import human

CASES = [61784.3, 502.67, 428.98, 45.678, 3.14159, 0.0859, 0.00688, 0.00001234, 0.0, 1000.0, -2.5]


def test_a_figure_has_four_significant_digits_whole_above_a_thousand():
    shown = [human.figure(v) for v in CASES]
    assert shown == [
        "61,784",
        "502.7",
        "429",
        "45.68",
        "3.142",
        "0.0859",
        "0.00688",
        "0.00001234",
        "0",
        "1,000",
        "-2.5",
    ]
    assert human.figure(None) == "–"


def test_a_busy_or_service_time_is_in_ms_whatever_its_size():
    assert human.quantity(0.0992, "s") == "99.2 ms"
    assert human.quantity(0.00001234, "s") == "0.01234 ms"
    assert human.quantity(2.5, "s") == "2,500 ms" and human.quantity(845.3, "IOPS") == "845.3 IOPS"
    assert human.shown(0.821, "s") == (821.0, "ms") and human.shown_unit("MB/s") == "MB/s"


@pytest.mark.skipif(not shutil.which("node"), reason="no node to run report.js outside the browser")
def test_report_js_rounds_as_the_server_does():
    script = os.path.join(os.path.dirname(human.__file__), "static", "report.js")
    probe = (
        "global.window = global; global.addEventListener = () => {};"
        "global.document = {readyState: 'complete', querySelectorAll: () => [], "
        "addEventListener() {}}; global.SsdbenchExport = {barButtons() {}, summaryButton() {}};"
        "global.location = {hash: ''};"
        f"require({json.dumps(script)});"
        f"console.log(JSON.stringify({json.dumps(CASES)}.map((v) => SsdbenchReport.num(v))));"
    )
    out = subprocess.run(["node", "-e", probe], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [human.figure(v) for v in CASES]
