"""Size and opening time of the HTML report, and the web app's what-if answer time (not a test).

    python benchmarks/bench_html.py [--runs 3]

1. For every shipped scenario (the 16,384-GPU Llama-3-405B among them): `clustersim run --html`
   writes the page (event engine); the table gives the timeline's segments and the blocks drawn,
   the page's size, and the time to open it in Debian's Chromium (/usr/bin/chromium, driven by
   Playwright, fresh profile, same flags as the browser tests): navigation start to every chart
   built and painted (the page's own ``performance.now()`` two animation frames after the last
   chart, ``body[data-ready-ms]``), median of ``--runs`` fresh tabs.
2. `clustersim serve` on a free 127.0.0.1 port: per shipped scenario, the round trip of a what-if
   change (ZeRO stage 1 <-> 2, so the scenario stays valid) answered by the closed form, median of
   ``--runs``, and by the event engine with its timeline (one run).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _pages(folder: Path) -> list[dict]:
    from clustersim.api import simulate_with_timeline
    from clustersim.html.run_page import run_page
    from clustersim.html.timeline_data import timeline_data
    from clustersim.scenario import read_scenario_dict, scenario_from_dict

    rows = []
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        raw = read_scenario_dict(path)
        sc = scenario_from_dict(raw)
        report, result = simulate_with_timeline(sc)
        t0 = time.perf_counter()
        page = run_page(report, result.timeline, raw)
        build_s = time.perf_counter() - t0
        data = timeline_data(result.timeline.segments, report.step_time_s)
        out = folder / f"{path.stem}.html"
        out.write_text(page, encoding="utf-8")
        rows.append({"scenario": path.stem, "gpus": sc.cluster.num_gpus, "segments": data.raw_segments,
                     "blocks": len(data.blocks), "bytes": out.stat().st_size, "build_s": build_s, "file": out})
    return rows


def _open_times(rows: list[dict], runs: int) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True, args=ARGS,
                                                   viewport={"width": 1400, "height": 900})
        try:
            for row in rows:
                times = []
                for _ in range(runs):
                    page = ctx.new_page()
                    page.goto(row["file"].as_uri())
                    page.wait_for_selector("body[data-charts-ready='true']", state="attached", timeout=60_000)
                    times.append(float(page.get_attribute("body", "data-ready-ms")) / 1e3)
                    page.close()
                row["open_s"] = statistics.median(times)
        finally:
            ctx.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str, body: dict) -> tuple[float, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=300) as resp:
        data = json.loads(resp.read())
    return time.perf_counter() - t0, data


def _what_if(runs: int) -> list[dict]:
    from clustersim.scenario import read_scenario_dict

    port = _free_port()
    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.Popen([sys.executable, "-m", "clustersim", "serve", "--port", str(port), "--out", out],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                try:
                    urllib.request.urlopen(base + "/api/health", timeout=2).read()
                    break
                except OSError:
                    time.sleep(0.2)
            rows = []
            for path in sorted((ROOT / "scenarios").glob("*.yaml")):
                sc = read_scenario_dict(path)
                _post(base + "/api/predict", {"scenario": sc})  # the scenario as it is, then the change
                times = []
                for i in range(runs):
                    changed = json.loads(json.dumps(sc))
                    par = changed.setdefault("parallel", {})
                    par["zero_stage"] = (2, 1)[i % 2]
                    times.append(_post(base + "/api/predict", {"scenario": changed})[0])
                event_s, res = _post(base + "/api/predict", {"scenario": sc, "engine": "event", "timeline": True})
                rows.append({"scenario": path.stem, "closed_s": statistics.median(times), "event_s": event_s,
                             "compute_s": res["compute_s"]})
            return rows
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    console = Console(width=140)
    with tempfile.TemporaryDirectory() as folder:
        rows = _pages(Path(folder))
        if Path(CHROMIUM).exists():
            _open_times(rows, args.runs)
        table = Table(title=f"`run --html` pages: size and time to open in Chromium (median of {args.runs})")
        for col in ("scenario", "GPUs", "segments", "blocks drawn", "page MB", "build s", "open s"):
            table.add_column(col, justify="right")
        for r in rows:
            table.add_row(r["scenario"], f"{r['gpus']:,}", f"{r['segments']:,}", f"{r['blocks']:,}",
                          f"{r['bytes'] / 1e6:.2f}", f"{r['build_s']:.2f}",
                          f"{r['open_s']:.2f}" if "open_s" in r else "no chromium")
        console.print(table)
    table = Table(title=f"`clustersim serve`: what-if round trip (closed form: median of {args.runs})")
    for col in ("scenario", "closed form s", "event engine + timeline s", "of which simulation s"):
        table.add_column(col, justify="right")
    for r in _what_if(args.runs):
        table.add_row(r["scenario"], f"{r['closed_s']:.3f}", f"{r['event_s']:.2f}", f"{r['compute_s']:.2f}")
    console.print(table)


if __name__ == "__main__":
    main()
