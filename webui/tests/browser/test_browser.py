"""A tester's whole path in a real browser: `ssdbench web` and `ssdbench runner` as processes,
Debian's chromium driven by Playwright (never a downloaded browser), a loop device as the drive."""

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile

import pytest
from conftest import PIN, needs_root, ssdbench, web_server

sync_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "artifacts")

pytestmark = [needs_root(), pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="apt-get install chromium")]


# The Mixed Burst timeline of a drawn report: how many read bursts it draws, and whether the background's
# periods lie behind them (the legend names a period's band under the cursor, somewhere in the first 10 s).
TIMELINE = """() => {
  const u = SsdbenchReport.charts.find(
    (c) => c.root.closest("figure").querySelector("figcaption").textContent.includes("each read burst's service time"));
  if (!u) return null;
  let band = false;
  for (let v = 0; v < 10 && !band; v += 0.001) band = u.series[0].value(u, v).includes("background writes");
  return {bursts: u.data[1].filter((v) => v !== null).length, band};
}"""


def clock_s(text):
    """h:mm:ss as the page shows a time, in seconds."""
    h, m, s = (int(part) for part in text.split(":"))
    return h * 3600 + m * 60 + s


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_serving(url, proc, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"ssdbench web exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {timeout} s")


@pytest.fixture
def appliance(loopdev, tmp_path):
    """The web UI and the runner service on a fresh data directory, with a loop device to test and a second one
    beside it."""
    dev, _ = loopdev()
    other, _ = loopdev(name="other.img")
    data_dir = tmp_path / "data"
    port = free_port()
    cli = [sys.executable, "-m", "ssdbench.cli"]
    procs = []
    for name, args in (
        ("web", ["web", "--host", "127.0.0.1", "--port", str(port), "--drive", dev, "--drive", other]),
        ("runner", ["runner"]),
    ):
        with open(tmp_path / f"{name}.log", "w") as log:
            procs.append(
                subprocess.Popen([*cli, *args, "--data-dir", str(data_dir)], stdout=log, stderr=subprocess.STDOUT)
            )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_serving(f"{base}/login", procs[0])
        yield base, dev, data_dir
    finally:
        for proc in procs:
            proc.terminate()  # the runner, if still running a run, cancels it and stays: then it is killed
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_log_in_start_the_smoke_suite_watch_it_and_read_the_report(appliance):
    base, dev, data_dir = appliance
    pin = ssdbench("pin", data_dir=data_dir, check=True).stdout.strip()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--headless=new", "--disable-gpu"])
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))

        page.goto(f"{base}/")
        assert "/login" in page.url
        page.fill("input[name=pin]", pin)
        page.click("button[type=submit]")

        # one line a drive: model, size, link, °C, verdict and Start, the rest folded; the untestable ones last
        row = page.locator(f"details.drive[data-drive='{dev}']")
        line = row.locator("summary.drive-row")
        assert line.bounding_box()["height"] < 60 and not row.evaluate("(d) => d.open")
        for part in (".model", ".size", ".link", ".temp", ".verdict", ".start-open"):
            assert line.locator(part).is_visible(), part
        assert line.locator(".verdict").inner_text() == "Eligible"
        assert page.evaluate("""() => {
          const last = document.querySelector('details.untestable');
          return !last || !last.querySelector('details.drive.eligible') && !last.open &&
            [...document.querySelectorAll('details.drive.eligible')].every(
              (d) => d.compareDocumentPosition(last) & Node.DOCUMENT_POSITION_FOLLOWING);
        }""")
        line.click()
        form = page.locator(f"form.start:has(input[name=drive][value='{dev}'])")
        # the shortest suite first, quick offered; Start the one primary button, Repeat folded under More
        suites = form.locator("select[name=suite] option")
        shown = [t.split("(")[-1].rstrip(")") for t in suites.all_inner_texts()]
        timed = [clock_s(t) for t in shown if t != "–"]  # a suite too big for the drive has no time, and goes last
        assert timed == sorted(timed) and shown[len(timed) :] == ["–"] * (len(shown) - len(timed))
        assert form.locator("select[name=suite]").input_value() == "quick"
        assert form.locator("button.primary").all_inner_texts() == ["Start"]
        assert not form.get_by_role("button", name="Repeat ×N", exact=True).is_visible()
        # a wrong ID: refused in the page's words, every choice kept
        form.locator("select[name=suite]").select_option("smoke")
        form.locator("input[name=confirm]").fill("not-its-id")
        form.get_by_role("button", name="Start", exact=True).click()
        alert = page.locator("p.error[role=alert]")
        assert f"Type {os.path.basename(dev)} exactly" in alert.inner_text() and "--" not in alert.inner_text()
        assert form.locator("select[name=suite]").input_value() == "smoke"
        assert form.locator("input[name=confirm]").input_value() == "not-its-id"
        estimate = clock_s(form.locator("select[name=suite] option[value=smoke]").inner_text().split("(")[-1][:-1])
        form.locator("input[name=confirm]").fill(os.path.basename(dev))
        form.get_by_role("button", name="Start", exact=True).click()
        page.wait_for_url(re.compile(r"/runs/1$"))

        # Live: a header read across the room, the current step marked, the percentage moving in the page and in
        # the tab's title, the live charts on elapsed time filling, until 100%.
        page.wait_for_selector("#steps li.current", timeout=60_000)
        page.wait_for_function("() => parseFloat(document.getElementById('percent').textContent) > 0", timeout=60_000)
        assert float(page.locator("#percent").evaluate("(e) => parseFloat(getComputedStyle(e).fontSize)")) >= 40
        assert re.fullmatch(r"\d+ % · Run 1", page.title()), page.title()
        assert re.fullmatch(r"Step \d+ of 20: .+", page.locator("#step-now").inner_text())
        assert re.fullmatch(r"\d\d:\d\d( [AP]M)?", page.locator("#finish").inner_text())
        assert page.locator("#live-charts canvas").count() == 3
        assert page.locator("#live-charts .u-label", has_text="elapsed").count() == 3
        page.wait_for_function("() => document.getElementById('live-iops').textContent !== '–'", timeout=60_000)
        # a loop device has no sensor: its temperature waits for a first sample, and says so, where the IOPS did not
        waiting = page.locator("#live-charts p.waiting").all_inner_texts()
        assert "Temperature: waiting for the first sample" in waiting and not any("IOPS" in w for w in waiting)

        # the drive list meanwhile: the run's progress in its drive's line, every other Start disabled
        drives = context.new_page()
        drives.goto(f"{base}/")
        busy = drives.locator(f"details.drive[data-drive='{dev}'] summary .row-progress")
        drives.wait_for_function(
            f"() => /^\\d+ %$/.test(document.querySelector(\"details.drive[data-drive='{dev}'] .percent\").textContent)"
        )
        assert busy.locator("a").inner_text() == "Run 1"
        other = drives.locator("details.drive.eligible:not(.running)").first
        assert other.locator(".start-open.disabled").count() == 1
        other.locator("summary.drive-row").click()
        assert other.locator("button.primary").is_disabled()
        drives.close()
        page.wait_for_function("() => document.getElementById('percent').textContent === '100 %'", timeout=240_000)

        # The page turns into the report when the run ends; the charts are drawn from the run's data.
        page.wait_for_selector("body[data-page=report]", timeout=30_000)
        page.wait_for_function("() => window.SsdbenchReport && SsdbenchReport.charts.length > 0", timeout=30_000)
        drawn = page.evaluate("""() => SsdbenchReport.charts.map(
            (u) => u.data.slice(1).reduce((n, ys) => n + ys.filter((v) => v !== null && v !== undefined).length, 0))""")
        assert len(drawn) > 5 and sum(1 for n in drawn if n > 0) > 5, drawn
        assert page.locator("#report canvas").count() >= len(drawn)
        assert page.locator("table.summary tbody tr").count() >= 4
        assert page.evaluate(TIMELINE) == {"bursts": 3, "band": True}  # smoke's three read bursts
        run = page.evaluate("() => fetch('/api/runs/1').then((r) => r.json())")
        assert run["state"] == "done" and {s["state"] for s in run["steps"]} == {"done"}
        # the drive list's estimate against the run as it went: within 20%
        took = run["finished_at"] - run["started_at"]
        print(f"smoke on a 512 MiB loop device: estimated {estimate} s, took {took:.0f} s")
        assert abs(estimate - took) <= 0.2 * took, (estimate, took)
        assert any(len(s["x"]) > 0 for s in run["series"])
        os.makedirs(ARTIFACTS, exist_ok=True)
        page.screenshot(path=os.path.join(ARTIFACTS, "report.png"), full_page=True)
        assert errors == []

        # The bundle, downloaded from the report page as a tester would, checks out.
        with page.expect_download() as download:
            page.click("#download-bundle")
        bundle_zip = os.path.join(str(data_dir.parent), download.value.suggested_filename)
        download.value.save_as(bundle_zip)
        assert ssdbench("verify", bundle_zip).returncode == 0
        offline_report(browser, bundle_zip, data_dir.parent / "unzipped")
        browser.close()


def offline_report(browser, bundle_zip, folder):
    """The bundle's report.html from file://, with networking off: it must draw every chart from its own data."""
    with zipfile.ZipFile(bundle_zip) as zf:
        zf.extract("report.html", folder)
    context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
    asked = []
    context.route(
        "**/*",
        lambda route: (
            asked.append(route.request.url),
            route.continue_() if route.request.url.startswith("file://") else route.abort(),
        ),
    )
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"file://{folder / 'report.html'}")
    page.wait_for_function("() => window.SsdbenchReport && SsdbenchReport.charts.length > 0", timeout=30_000)
    drawn = page.evaluate("""() => SsdbenchReport.charts.map(
        (u) => u.data.slice(1).reduce((n, ys) => n + ys.filter((v) => v !== null && v !== undefined).length, 0))""")
    assert len(drawn) > 5 and sum(1 for n in drawn if n > 0) > 5, drawn
    assert page.locator("table.summary tbody tr").count() >= 4
    assert page.evaluate(TIMELINE) == {"bursts": 3, "band": True}
    assert [u for u in asked if not u.startswith("file://")] == []
    page.screenshot(path=os.path.join(ARTIFACTS, "bundle-report.png"), full_page=True)
    assert errors == []
    context.close()


def test_repeat_n_beside_start_follows_the_set_and_cancels_it(appliance):
    base, dev, data_dir = appliance
    pin = ssdbench("pin", data_dir=data_dir, check=True).stdout.strip()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--headless=new", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{base}/login")
        page.fill("input[name=pin]", pin)
        page.click("button[type=submit]")

        page.locator(f"details.drive[data-drive='{dev}'] > summary").click()
        form = page.locator(f"form.start:has(input[name=drive][value='{dev}'])")
        form.locator("select[name=suite]").select_option("smoke")
        form.locator("input[name=confirm]").fill(os.path.basename(dev))
        form.locator("details.more > summary").click()
        form.locator("input[name=times]").fill("3")
        form.get_by_role("button", name="Repeat ×N", exact=True).click()
        page.wait_for_url(re.compile(r"/repeats/1$"))
        assert page.locator("h1").inner_text().startswith("Repeat set 1: smoke ×3")

        # The page follows the set by itself: the runner takes the first run, and the page shows it running.
        page.wait_for_selector("#repeat-runs li.state-running", timeout=60_000)
        page.click("text=Cancel the repeat set")
        page.wait_for_selector("#state.state-cancelled", timeout=120_000)
        assert page.locator("body[data-page=repeat]").count() == 1
        assert page.locator("#repeat-runs li").count() == 1
        assert page.locator("#repeat-runs li .badge").inner_text() == "cancelled"
        held = page.evaluate("() => fetch('/api/repeats/1').then((r) => r.json())")
        assert held["state"] == "cancelled" and [r["state"] for r in held["runs"]] == ["cancelled"]
        assert errors == []
        browser.close()


def test_the_drives_page_downloads_the_diagnostics_zip(tmp_path):
    """A tester with a problem: the button at the foot of the Drives page gives the zip to attach to a report,
    the PIN nowhere in it."""
    with web_server(tmp_path / "data") as (_, port), sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--headless=new"])
        try:
            page = browser.new_page(accept_downloads=True)
            page.set_default_timeout(120_000)
            page.goto(f"http://127.0.0.1:{port}/login")
            page.fill("input[name=pin]", PIN)
            page.click("button[type=submit]")
            page.wait_for_url(f"http://127.0.0.1:{port}/")
            with page.expect_download() as download:
                page.get_by_role("button", name="Download the diagnostics zip").click()
            assert re.fullmatch(r"ssdbench-diagnostics-.+-\d{8}T\d{6}Z\.zip", download.value.suggested_filename)
            path = tmp_path / download.value.suggested_filename
            download.value.save_as(path)
            assert page.get_by_role("heading", name="Drives").is_visible()  # the page stays
        finally:
            browser.close()
    with zipfile.ZipFile(path) as zf:
        assert {"lspci-mk.txt", "lsblk.txt", "cmdline.txt", "drives.json", "testbed.json"} <= set(zf.namelist())
        assert all(PIN not in zf.read(name).decode(errors="replace") for name in zf.namelist())
