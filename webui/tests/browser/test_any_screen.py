"""Any screen, any theme (issue 37, item 7), in Debian's chromium driven by Playwright: every page of the appliance
at a phone's 390x844 scrolls only downwards, and a dark system theme gets a dark page. Over the smoke run made
by the real engine (run 1), a run the runner still holds (run 2, the live view) and another done run (run 3)."""

import os
import re
import shutil

import pytest
from conftest import PIN, add_run, axe_script, needs_root, web_server

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
    "delete": "/runs/3/delete",
    "not found": "/runs/99",
}
# Every text of a chart drawn as SVG that the page shows, and the size it is drawn at, where that is under 10 px.
SMALL_TEXT = """() => [...document.querySelectorAll("svg text")].filter((t) => t.getClientRects().length)
  .map((t) => [t.textContent.slice(0, 40), parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a])
  .filter(([, px]) => px < 10)"""
# axe-core's contrast rule, on the page as it is drawn: each element of too little contrast, with what axe says.
CONTRAST = """async () => (await axe.run(document, {runOnly: {type: "rule", values: ["color-contrast"]}})).violations
  .flatMap((v) => v.nodes.map((n) => `${n.target.join(" ")}: ${n.any.map((a) => a.message).join("; ")}`))"""

# Every chart's colours as the page draws them, each with the ground it is on and the contrast WCAG asks of it:
# a uPlot chart's axis text (4.5:1) and series (3:1, a graphic) on the page's ground behind it, as its canvas is
# out of axe's reach; a ranked bar chart's texts and plain bars on its SVG's ground, as the style sheet leaves them.
CHART_COLOURS = r"""() => {
  const out = [];
  const behind = (node) => {
    for (; node; node = node.parentElement) {
      const colour = getComputedStyle(node).backgroundColor;
      if (!/^rgba\(.*, 0\)$/.test(colour)) return colour;
    }
    return "rgb(255, 255, 255)";
  };
  if (window.SsdbenchReport) {
    for (const u of [...SsdbenchReport.charts, ...(window.SsdbenchLive ? SsdbenchLive.charts : [])]) {
      const ground = behind(u.root);
      u.axes.forEach((a, i) => out.push([`axis ${i}`, a.stroke(u, i), ground, 4.5]));
      u.series.slice(1).forEach((s, i) => out.push([`line ${s.label}`, s.stroke(u, i + 1), ground, 3]));
    }
  }
  for (const svg of document.querySelectorAll("figure.bars svg")) {
    if (!svg.getClientRects().length) continue;
    const ground = getComputedStyle(svg.querySelector("rect.ground")).fill;
    svg.querySelectorAll(":scope > text, g.bar > text, g.row > text").forEach(
      (t) => out.push([`text ${t.textContent.slice(0, 30)}`, getComputedStyle(t).fill, ground, 4.5]));
    svg.querySelectorAll("g.bar > rect, g.row > rect").forEach((r) => {
      const fill = getComputedStyle(r).fill;
      if (!fill.startsWith("url(")) out.push(["bar", fill, ground, 3]);
    });
  }
  return out;
}"""

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
    # axe is put into each page as a script of its own: the pages' Content-Security-Policy would refuse it
    context = browser.new_context(viewport=PHONE, color_scheme=scheme, bypass_csp=True)
    context.set_default_timeout(120_000)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    measure = "() => [document.documentElement.scrollWidth, getComputedStyle(document.body).backgroundColor]"
    asked = []  # every answer of the server that was not found: the favicon must not be one
    page.on(
        "response", lambda r: asked.append(r.url) if r.status == 404 and r.request.resource_type != "document" else None
    )
    page.goto(f"{base}/login")
    seen = {"login": page.evaluate(measure)}
    faint = {}
    page.fill("input[name=pin]", PIN)
    page.click("button[type=submit]")
    for name, path in PAGES.items():
        page.goto(base + path)
        if name == "a run":
            page.wait_for_function("() => window.SsdbenchReport && SsdbenchReport.charts.length > 0")
            page.get_by_role("button", name="Unfold every section", exact=True).click()
        if name == "live view":
            assert_live_view_leads(page)
        seen[name] = page.evaluate(measure)
        assert page.evaluate(SMALL_TEXT) == [], name  # charts laid out for the phone's width, not scaled down
        page.add_script_tag(path=axe_script())
        faint[name] = page.evaluate(CONTRAST) + faint_charts(page.evaluate(CHART_COLOURS))
    context.close()
    assert errors == [] and asked == []
    # WCAG AA contrast (4.5:1 for text, 3:1 for large text) on every page, in either theme
    assert not any(faint.values()), {name: found for name, found in faint.items() if found}
    return seen


def faint_charts(colours):
    """The chart colours (CHART_COLOURS) under the contrast asked of them, each with the contrast it has."""
    return [
        f"{what}: {ink} on {ground}, {contrast(ink, ground):.2f}:1"
        for what, ink, ground, least in colours
        if contrast(ink, ground) < least
    ]


def contrast(one, other):
    """WCAG's contrast ratio of two colours, each #rrggbb or CSS's rgb(r, g, b)."""

    def luminance(colour):
        if colour.startswith("#"):
            channels = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
        else:
            channels = [int(float(c)) for c in re.findall(r"[\d.]+", colour)[:3]]
        linear = [c / 255 / 12.92 if c / 255 <= 0.03928 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    high, low = sorted((luminance(one), luminance(other)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def assert_live_view_leads(page):
    """The live view at its width: its progress first, in the first screen, its charts drawn from the run's
    samples so far (the page may be a reload), each time tick read once."""
    # issue 45: it began 549 px down at 1366 px, and 852 px at 390 px; now the whole header (percent, step, ETA,
    # IOPS, MB/s, °C) is in the first screen, under the menu and the title alone
    head = page.locator("#live .live-head").bounding_box()
    screen = page.viewport_size["height"]
    print(
        f"live view at {page.viewport_size['width']} px: its header from {head['y']:.0f} px to "
        f"{head['y'] + head['height']:.0f} px"
    )
    assert head["y"] < 300 and head["y"] + head["height"] <= screen, head
    assert not page.locator("#identity").evaluate("(d) => d.open") and page.locator("#summary").count() == 0
    page.wait_for_function("() => window.SsdbenchLive && SsdbenchLive.temps.t.length >= 20")
    assert page.evaluate("SsdbenchLive.samples.iops") == [5000.0]  # conftest's add_run: its one progress sample
    ticks = page.evaluate("SsdbenchLive.charts.map((u) => u.axes[0]._values.filter((v) => v !== null))")
    assert all(len(t) == len(set(t)) for t in ticks), ticks


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


def test_delete_asks_first_naming_the_run_and_a_run_that_is_not_there_gets_a_page_with_the_menu(site):
    browser, base = site
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.set_default_timeout(120_000)
    page.goto(f"{base}/login")
    page.fill("input[name=pin]", PIN)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    page.goto(f"{base}/runs/2")  # the live view at a laptop's width: its progress first too
    assert_live_view_leads(page)
    page.goto(f"{base}/history")
    assert page.locator("#compare-form button.danger, #compare-form [form^=delete]").count() == 0
    page.get_by_role("link", name="delete run 3").click()
    page.wait_for_url(f"{base}/runs/3/delete")
    assert page.locator("#deleting").inner_text().startswith("Run 3: ")
    assert "Other SSD 2TB" in page.locator("#deleting").inner_text()
    page.get_by_role("link", name="Keep it").click()
    page.wait_for_url(f"{base}/history")
    assert page.locator("a[href='/runs/3']").count() == 1  # nothing went
    for missing in ("/runs/99", "/runs/99/delete"):
        answer = page.goto(base + missing)
        assert answer.status == 404 and page.locator("header nav").is_visible()
        assert "There is no run 99 here" in page.locator("p.error").inner_text()
    page.close()


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
