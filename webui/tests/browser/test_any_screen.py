"""Any screen, any theme (issue 37, item 7), in Debian's chromium driven by Playwright: every page of the appliance
at a phone's 390x844 scrolls only downwards, and a dark system theme gets a dark page. Over the smoke run made
by the real engine (run 1), a run the runner still holds (run 2, the live view) and another done run (run 3)."""

import os
import shutil

import pytest
from conftest import PIN, add_run, needs_root, web_server

sync_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = "/usr/bin/chromium"
PHONE = {"width": 390, "height": 844}
PAGES = {
    "drives": "/",
    "live view": "/runs/2",
    "a run": "/runs/1",
    "compare": "/compare?runs=1,3",
    "history": "/history",
    "bench": "/bench",
    "traces": "/traces",
}

pytestmark = [needs_root(), pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="apt-get install chromium")]


@pytest.fixture(scope="module")
def site(smoke_run, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("screens") / "data"
    shutil.copytree(smoke_run[1], data_dir)
    add_run(data_dir, state="running")
    add_run(data_dir, model="Other SSD 2TB")
    with web_server(data_dir) as (_, port), sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--headless=new"])
        yield browser, f"http://127.0.0.1:{port}"
        browser.close()


def pages(browser, base, scheme):
    """Each page at 390x844 in the colour scheme given: {name: (document's scroll width, body's background)}."""
    context = browser.new_context(viewport=PHONE, color_scheme=scheme)
    context.set_default_timeout(120_000)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    measure = "() => [document.documentElement.scrollWidth, getComputedStyle(document.body).backgroundColor]"
    page.goto(f"{base}/login")
    seen = {"login": page.evaluate(measure)}
    page.fill("input[name=pin]", PIN)
    page.click("button[type=submit]")
    for name, path in PAGES.items():
        page.goto(base + path)
        if name == "a run":
            page.wait_for_function("() => window.SsdbenchReport && SsdbenchReport.charts.length > 0")
            page.get_by_role("button", name="Unfold every section", exact=True).click()
        seen[name] = page.evaluate(measure)
    context.close()
    assert errors == []
    return seen


def test_every_page_fits_a_phone_and_a_dark_theme_is_dark(site):
    browser, base = site
    light = pages(browser, base, "light")
    dark = pages(browser, base, "dark")
    print({name: width for name, (width, _) in light.items()})
    for seen in (light, dark):
        wide = {name: width for name, (width, _) in seen.items() if width > PHONE["width"]}
        assert not wide, wide
    assert {background for _, background in light.values()} == {"rgb(250, 250, 250)"}
    assert all(dark[name][1] != light[name][1] for name in light), dark


def test_a_skip_link_leads_to_the_content_and_the_primary_button_shows_its_focus(site):
    browser, base = site
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/login")
    button = page.locator("button.primary")
    outline = "(b) => [b === document.activeElement, getComputedStyle(b).outlineStyle]"
    assert button.evaluate(outline) == [False, "none"]
    page.locator("input[name=pin]").fill(PIN)
    page.keyboard.press("Tab")  # a focus by the keyboard: :focus-visible
    assert button.evaluate(outline) == [True, "solid"]
    page.keyboard.press("Enter")
    page.wait_for_url(f"{base}/")
    page.keyboard.press("Tab")
    skip = page.locator("a.skip")
    assert skip.evaluate("(a) => a === document.activeElement") and skip.is_visible()
    page.keyboard.press("Enter")
    assert page.url.endswith("#main")
    page.close()
