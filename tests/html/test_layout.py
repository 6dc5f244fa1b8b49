"""Where things land on the page, measured in Chromium (bounding boxes, not presence): the
timeline legend's colour swatches have a size, the compare page's whiskers end inside the plot,
tables and pages fit a 1,400 px window, the energy table reads as words and rounded numbers, and
the web app's sliders stop at what the cluster holds. Each check is a function that returns the
problems it sees, and the tests show that each one reports a page that is broken on purpose.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.html.conftest import ROOT, Server, cli
from tests.html.test_browser import TIMEOUT_MS, watched

VIEWPORT_PX = 1400  # the conftest's browser window


def swatch_problems(page, selector: str = "[data-testid=timeline-legend] .swatch") -> list[str]:
    """Every legend swatch is a visible box with a colour; none found is a problem too."""
    swatches = page.locator(selector)
    if swatches.count() == 0:
        return [f"no swatch matches {selector}"]
    problems = []
    for i in range(swatches.count()):
        sw = swatches.nth(i)
        label = sw.evaluate("e => e.parentElement.textContent")
        box = sw.bounding_box()
        if box is None or box["width"] <= 0 or box["height"] <= 0:
            problems.append(f"swatch of {label!r} has no size: {box}")
        color = sw.evaluate("e => getComputedStyle(e).backgroundColor")
        if color in ("", "transparent", "rgba(0, 0, 0, 0)"):
            problems.append(f"swatch of {label!r} has no colour")
    return problems


# Each Bokeh plot on the page: the plot area (its frame) in page pixels, and the page x of every
# whisker's upper end through the plot's own x scale (Bokeh.index holds the rendered views).
_WHISKERS_JS = """() => {
  const out = [];
  for (const view of Bokeh.index) {
    if (!view.frame || !view.canvas_view) continue;
    const canvas = view.canvas_view.el.getBoundingClientRect();
    const frame = view.frame.bbox;
    for (const rv of view.renderer_views.values()) {
      if (rv.model.type !== "Whisker") continue;
      const source = rv.model.source.data;
      out.push({title: view.model.title.text, left: canvas.left + frame.left, right: canvas.left + frame.right,
                ends: Array.from(source[rv.model.upper.field]).map(x => canvas.left + view.frame.x_scale.compute(x)),
                starts: Array.from(source[rv.model.lower.field]).map(x => canvas.left + view.frame.x_scale.compute(x))});
    }
  }
  return out;
}"""


def whisker_problems(page) -> list[str]:
    plots = page.evaluate(_WHISKERS_JS)
    if not plots:
        return ["no whiskers on the page"]
    problems = []
    for p in plots:
        for lo, hi in zip(p["starts"], p["ends"], strict=True):
            if not p["left"] - 0.5 <= lo <= hi <= p["right"] + 0.5:
                problems.append(f"{p['title']}: whisker {lo:.0f}-{hi:.0f} px outside the plot {p['left']:.0f}-"
                                f"{p['right']:.0f} px")
    return problems


def overflow_problems(page, selectors: tuple[str, ...]) -> list[str]:
    """The page scrolls no wider than the window and each element named ends inside it."""
    width = page.evaluate("() => window.innerWidth")
    problems = []
    scroll = page.evaluate("() => document.documentElement.scrollWidth")
    if scroll > width:
        problems.append(f"the page is {scroll} px wide in a {width} px window")
    for sel in selectors:
        box = page.locator(sel).first.bounding_box()
        if box is None:
            problems.append(f"{sel} is not shown")
        elif box["width"] > width or box["x"] + box["width"] > width:
            problems.append(f"{sel} spans {box['x']:.0f}-{box['x'] + box['width']:.0f} px in a {width} px window")
    return problems


def _open(page, path: Path) -> None:
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-charts-ready='true']", state="attached", timeout=TIMEOUT_MS)


def test_run_page_legend_swatches_have_a_size_and_the_tables_fit(browser, reports) -> None:
    with watched(browser) as (page, errors, _):
        _open(page, reports.run)
        assert swatch_problems(page) == []
        labels = page.locator("[data-testid=timeline-legend] li").all_inner_texts()
        assert labels and "compute" in labels
        # the swatches sit under the timeline, inside the window
        chart = page.locator("#chart-timeline").bounding_box()
        for box in (page.locator("[data-testid=timeline-legend] .swatch").nth(i).bounding_box()
                    for i in range(len(labels))):
            assert box["y"] >= chart["y"] + chart["height"] - 1 and box["x"] + box["width"] <= VIEWPORT_PX
        assert overflow_problems(page, ("[data-testid=memory-table]", "[data-testid=energy]",
                                        "[data-testid=interval]")) == []
        assert errors == []


def test_the_swatch_check_reports_a_swatch_of_zero_size(browser, reports) -> None:
    """The page as it was: the legend drawn, its swatches without a size."""
    with watched(browser) as (page, _, _):
        _open(page, reports.run)
        count = page.locator("[data-testid=timeline-legend] .swatch").count()
        page.add_style_tag(content=".legend .swatch { width: 0 !important; height: 0 !important; }")
        problems = swatch_problems(page)
        assert len(problems) == count > 0 and all("has no size" in p for p in problems)
        page.add_style_tag(content=".legend .swatch { width: 14px !important; height: 10px !important; "
                                   "background: transparent !important; }")
        assert len(swatch_problems(page)) == count and all("no colour" in p for p in swatch_problems(page))


def test_energy_table_reads_as_words_and_rounded_numbers(browser, reports) -> None:
    with watched(browser) as (page, _, _):
        _open(page, reports.run)
        rows = [r.split("\t") for r in page.locator("[data-testid=energy] tr").all_inner_texts()]
        assert len(rows) >= 8
        for label, value, *_ in rows:
            assert "_" not in label and label[0].isalpha(), label
            digits = re.sub(r"[^0-9.]", "", value.split("e")[0])
            assert len(digits.replace(".", "").lstrip("0")) <= 4, value  # at most four significant digits


def test_compare_whiskers_end_inside_the_plot(browser, reports) -> None:
    with watched(browser) as (page, errors, _):
        _open(page, reports.compare)
        assert whisker_problems(page) == []
        assert overflow_problems(page, ("[data-testid=compare-rows]",)) == []
        assert errors == []


def test_the_whisker_check_reports_a_whisker_cut_off(browser, reports) -> None:
    """The page as it was: the x range ending before the longest whisker."""
    with watched(browser) as (page, _, _):
        _open(page, reports.compare)
        page.evaluate("""() => { for (const v of Bokeh.index) {
            if (!v.frame) continue;
            const hi = v.renderer_views && [...v.renderer_views.values()].find(r => r.model.type === "Whisker");
            if (hi) { v.model.x_range.end = Math.max(...hi.model.source.data.value) * 1.01; } } }""")
        page.wait_for_timeout(300)
        problems = whisker_problems(page)
        assert problems and all("outside the plot" in p for p in problems)


def test_memory_table_of_many_stages_fits_the_window(browser, tmp_path: Path) -> None:
    """Llama-3-405B, 16 pipeline stages: the table samples stages and stays inside 1,400 px."""
    path = tmp_path / "stages.html"
    assert cli("run", str(ROOT / "scenarios/llama3_405b_h100x16384.yaml"), "--engine", "analytical",
               "--html", str(path)) == 0
    with watched(browser) as (page, errors, _):
        _open(page, path)
        heads = page.locator("[data-testid=memory-table] th").all_inner_texts()
        assert heads[0] == "GiB per GPU" and "stage 0" in heads and "stage 15" in heads and len(heads) <= 10
        assert overflow_problems(page, ("[data-testid=memory-table]",)) == []
        page.add_style_tag(content="[data-testid=memory-table] { width: 2000px; }")
        assert overflow_problems(page, ("[data-testid=memory-table]",))  # the check sees an overflow
        assert errors == []


def test_sweep_page_fits_the_window(browser, reports) -> None:
    with watched(browser) as (page, _, _):
        _open(page, reports.sweep)
        assert overflow_problems(page, ("table.t",)) == []


def _slider_max(page, name: str) -> int:
    return int(page.get_attribute(f"#{name}", "max"))


def test_web_app_legend_and_sliders_bounded_by_the_cluster(browser, server: Server) -> None:
    with watched(browser) as (page, errors, requests):
        page.goto(server.url + "/")
        page.wait_for_selector("body[data-timelines='1']", state="attached", timeout=TIMEOUT_MS)
        assert swatch_problems(page) == []
        assert overflow_problems(page, ("[data-testid=memory-table]",)) == []
        # the embedded default: 2 DGX H100 = 16 GPUs, 8 per NVLink domain
        assert page.get_attribute("body", "data-gpus") == "16"
        assert 2 ** _slider_max(page, "tp") == 8
        assert 2 ** _slider_max(page, "dp") == 16 and 2 ** _slider_max(page, "cp") == 16
        assert 2 ** _slider_max(page, "ep") == 16 and _slider_max(page, "pp") == 16
        page.locator("#tp").fill("6")  # asks for TP 64: the slider stops at the domain
        assert page.inner_text("#tp-out") == "8"
        # one GB200 NVL72 rack (18 trays of 4): TP may reach 64 of its 72 GPUs
        page.locator("#cluster").select_option("gb200-nvl72")
        page.locator("#nodes").fill("18")
        page.locator("#nodes").dispatch_event("change")
        page.wait_for_selector("body[data-gpus='72']", state="attached", timeout=TIMEOUT_MS)
        assert 2 ** _slider_max(page, "tp") == 64 and _slider_max(page, "pp") == 72
        # 2 trays: 8 GPUs; TP, DP, CP, EP at most 8, PP at most 8
        page.locator("#nodes").fill("2")
        page.locator("#nodes").dispatch_event("change")
        page.wait_for_selector("body[data-gpus='8']", state="attached", timeout=TIMEOUT_MS)
        assert [2 ** _slider_max(page, s) for s in ("tp", "dp", "cp", "ep")] == [8, 8, 8, 8]
        assert _slider_max(page, "pp") == 8
        assert requests == []
        assert all("status of 400" in e for e in errors), errors
