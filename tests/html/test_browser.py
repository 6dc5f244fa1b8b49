"""In a real browser (Debian's Chromium through Playwright): the three reports render their charts
with no console errors and no network, and the web app answers a slider and a bad value.

Waits use attribute selectors (``body[data-charts-ready]``), not ``wait_for_function``: the pages'
Content-Security-Policy forbids the eval that Playwright's function polling needs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from clustersim.errors import InputError
from clustersim.scenario import DEFAULT_SCENARIO_YAML, scenario_from_dict
from tests.html.conftest import Server

TIMEOUT_MS = 60_000


@contextmanager
def watched(browser) -> Iterator[tuple[object, list[str], list[str]]]:
    """A new page with its console errors (and page errors) and failed or off-machine requests."""
    page = browser.new_page()
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: requests.append(f"failed: {r.url}"))
    page.on("request", lambda r: None if r.url.startswith(("file://", "http://127.0.0.1", "blob:", "data:"))
            else requests.append(f"off-machine: {r.url}"))
    try:
        yield page, errors, requests
    finally:
        page.close()


@pytest.mark.parametrize("kind", ["run", "sweep", "compare"])
def test_report_renders_its_charts_offline(browser, reports, kind: str) -> None:
    path: Path = getattr(reports, kind)
    with watched(browser) as (page, errors, requests):
        page.goto(path.as_uri())
        page.wait_for_selector("body[data-charts-ready='true']", state="attached", timeout=TIMEOUT_MS)
        # compare: time and cost, plus energy now that compare rows carry energy_kwh (docs/output.md)
        expected = {"run": 3, "sweep": 1, "compare": 3}[kind]
        assert page.get_attribute("body", "data-charts") == str(expected)
        # Each chart drew into canvases inside its <div>, and none reported a failure.
        for chart in page.locator("div.chart").all():
            assert chart.locator("canvas").count() >= 1
        assert page.locator(".chart-error").count() == 0
        assert errors == [] and requests == []


def test_timeline_zooms_on_the_wheel(browser, reports) -> None:
    with watched(browser) as (page, errors, _):
        page.goto(reports.run.as_uri())
        page.wait_for_selector("body[data-charts-ready='true']", state="attached", timeout=TIMEOUT_MS)
        box = page.locator("#chart-timeline canvas").first.bounding_box()
        before = page.locator("#chart-timeline").screenshot()
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] * 0.5)
        page.mouse.wheel(0, -600)
        page.wait_for_timeout(300)
        assert page.locator("#chart-timeline").screenshot() != before
        assert errors == []


def cli_message(data: dict) -> str:
    try:
        scenario_from_dict(data)
    except InputError as exc:
        return f"error: {exc}"
    raise AssertionError("expected an InputError")


def test_web_app_slider_moves_the_numbers_and_a_bad_value_shows_the_cli_message(browser, server: Server) -> None:
    with watched(browser) as (page, errors, requests):
        page.goto(server.url + "/")
        page.wait_for_selector("body[data-timelines='1']", state="attached", timeout=TIMEOUT_MS)
        assert page.locator("#chart-timeline canvas").count() >= 1
        assert page.locator("#chart-memory canvas").count() >= 1
        assert page.locator("[data-testid=interval]").is_visible()  # the prediction interval
        first = page.inner_text("[data-testid=step-time] .v")
        # TP 2 -> 4 on the default scenario (2 DGX H100): DP follows, the step time changes.
        page.locator("#tp").fill("2")
        page.wait_for_selector("body[data-updates='2']", state="attached", timeout=TIMEOUT_MS)
        assert page.inner_text("#tp-out") == "4"
        assert page.inner_text("[data-testid=step-time] .v") != first
        page.wait_for_selector("body[data-timelines='2']", state="attached", timeout=TIMEOUT_MS)
        assert errors == [] and requests == []

        # A bad value: 0 nodes. The page shows what `clustersim run` prints, and the server says 400.
        page.locator("#nodes").fill("0")
        page.locator("#nodes").dispatch_event("change")
        page.wait_for_selector("body[data-error='true']", state="attached", timeout=TIMEOUT_MS)
        bad = yaml.safe_load(DEFAULT_SCENARIO_YAML)
        bad["cluster"]["nodes"] = 0
        assert page.inner_text("#error") == cli_message(bad)
        assert all("status of 400" in e for e in errors), errors
        errors.clear()

        # Back to a good value, then the event engine.
        page.locator("#nodes").fill("2")
        page.locator("#nodes").dispatch_event("change")
        page.wait_for_selector("body[data-timelines='3']", state="attached", timeout=TIMEOUT_MS)
        assert page.get_attribute("body", "data-error") == "false"
        page.locator("#engine-event").check()
        page.wait_for_selector("body[data-timelines='4']", state="attached", timeout=TIMEOUT_MS)
        assert "event engine" in page.inner_text("#status")
        with page.expect_download(timeout=TIMEOUT_MS) as download:
            page.locator("#download").click()
        saved = Path(download.value.path()).read_text()
        assert yaml.safe_load(saved)["parallel"]["tp"] == 4
        assert errors == [] and requests == []


def test_web_app_sends_the_scenario_as_it_states_what_the_controls_cannot_show(browser, server: Server) -> None:
    """Applying YAML with micro_batch 3 sent 4 (the slider rounds to powers of two), a schedule
    or recompute option the selects lacked was sent as '', and a cluster of node groups got a
    cluster.nodes of 1: only the controls the user changes are written over the scenario now."""
    text = ("name: mb3\nmodel: {preset: llama3-8b}\ncluster: {preset: dgx-h100, nodes: 2}\n"
            "parallel: {tp: 2, pp: 2, micro_batch: 3, global_batch: 96, recompute: selective-op}\n")
    with watched(browser) as (page, errors, requests):
        page.goto(server.url + "/")
        page.wait_for_selector("body[data-updates='1']", state="attached", timeout=TIMEOUT_MS)
        page.locator("#yaml").fill(text)
        page.locator("#apply-yaml").click()
        page.wait_for_selector("body[data-updates='2']", state="attached", timeout=TIMEOUT_MS)
        assert page.get_attribute("body", "data-error") == "false", page.inner_text("#error")
        assert page.inner_text("#mb-out") == "3"
        with page.expect_download(timeout=TIMEOUT_MS) as download:
            page.locator("#download").click()
        sent = yaml.safe_load(Path(download.value.path()).read_text())["parallel"]
        assert (sent["micro_batch"], sent["recompute"]) == (3, "selective-op")
        page.select_option("#start", "llama3_70b_a100_h100_mixed")
        page.wait_for_selector("body[data-updates='3']", state="attached", timeout=TIMEOUT_MS)
        assert page.get_attribute("body", "data-error") == "false", page.inner_text("#error")
        # the mixed cluster's 32 nodes (256 GPUs), not 1 node of 8 GPUs; a new node count ends the
        # groups instead of sending {groups, nodes} ("cluster.nodes: absent with cluster.groups")
        assert page.input_value("#nodes") == "32" and page.get_attribute("body", "data-gpus") == "256"
        page.locator("#nodes").fill("16")
        page.locator("#nodes").dispatch_event("change")
        page.wait_for_selector("body[data-updates='4']", state="attached", timeout=TIMEOUT_MS)
        assert page.get_attribute("body", "data-error") == "false", page.inner_text("#error")
        assert requests == []
