"""The --html pages: self-contained, deterministic, within the size budget, every section there."""

from __future__ import annotations

import copy
import html
import json
import re
from pathlib import Path

import yaml

from clustersim.api import estimate, simulate_with_timeline
from clustersim.html.compare_page import compare_page
from clustersim.html.fragments import interval_html, sig4, summary_cards
from clustersim.html.run_page import run_page, run_sections
from clustersim.scenario import load_scenario, read_scenario_dict
from tests.html.conftest import ROOT, SMALL, cli

MB = 1e6
SCENARIO_405B = ROOT / "scenarios" / "llama3_405b_h100x16384.yaml"


def charts_of(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="clustersim-charts">(.*?)</script>', page, re.S)
    assert m, "no chart data in the page"
    return json.loads(m.group(1))


def assert_self_contained(page: str) -> None:
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert csp and "default-src 'none'" in html.unescape(csp.group(1))  # the page cannot fetch anything
    assert not re.search(r"""<(script|img|link|iframe)[^>]+(src|href)\s*=\s*["']?(https?:)?//""", page, re.I)
    assert "<link" not in page


def test_405b_page_is_under_5_mb_decimated_and_byte_identical() -> None:
    sc = load_scenario(SCENARIO_405B)
    report, result = simulate_with_timeline(sc)
    raw = read_scenario_dict(SCENARIO_405B)
    page = run_page(report, result.timeline, raw)
    assert len(page.encode()) < 5 * MB
    assert_self_contained(page)
    item = charts_of(page)["chart-timeline"]
    assert "16 pipeline stages" in json.dumps(item)
    assert "segments drawn as" in page  # more segments than the budget: the note says how they were merged
    assert page == run_page(report, result.timeline, raw)


def test_cli_pages_have_their_sections_and_the_scenario(reports) -> None:
    run = reports.run.read_text()
    for section in ("sec-summary", "sec-interval", "sec-timeline", "sec-breakdown", "sec-memory", "sec-scenario"):
        assert f'id="{section}"' in run
    assert set(charts_of(run)) == {"chart-timeline", "chart-breakdown", "chart-memory"}
    assert 'data-testid="interval"' in run and "(80% interval)" in run  # the report's own interval
    shown = re.search(r'data-testid="scenario-yaml">(.*?)</pre>', run, re.S).group(1)
    assert yaml.safe_load(html.unescape(shown)) == read_scenario_dict(ROOT / SMALL)
    sweep = reports.sweep.read_text()
    assert set(charts_of(sweep)) == {"chart-pareto"} and 'data-testid="top-layouts"' in sweep
    assert 'data-testid="verdict"' in sweep and "regime" in sweep
    assert "ranked by time" in sweep and "One row per structurally distinct layout" in sweep  # grouped rows
    compare = reports.compare.read_text()
    assert {"chart-time", "chart-cost"} <= set(charts_of(compare)) and "hgx-h200" in compare
    for page in (run, sweep, compare):
        assert_self_contained(page)


def test_run_html_is_byte_identical_across_runs(tmp_path: Path, reports) -> None:
    again = tmp_path / "again.html"
    assert cli("run", str(ROOT / SMALL), "--html", str(again)) == 0
    assert again.read_bytes() == reports.run.read_bytes()


def test_analytical_engine_page_says_why_there_is_no_timeline(tmp_path: Path) -> None:
    out = tmp_path / "a.html"
    assert cli("run", str(ROOT / SMALL), "--engine", "analytical", "--html", str(out)) == 0
    page = out.read_text()
    assert "chart-timeline" not in charts_of(page) and "records no timeline" in page


def test_bad_html_paths_are_exit_2_before_any_work(tmp_path: Path, capsys) -> None:
    assert cli("run", "--html", str(tmp_path / "report.png")) == 2
    assert "--html: got" in capsys.readouterr().err
    (tmp_path / "f.txt").write_text("a file, not a folder")
    assert cli("sweep", "--html", str(tmp_path / "f.txt" / "x.html")) == 2   # missing folders are created
    assert cli("compare", "--clusters", "dgx-h100", "--html", str(tmp_path)) == 2


def test_interval_is_rendered_when_the_report_carries_one() -> None:
    rj = estimate(load_scenario(ROOT / SMALL)).to_json()
    assert "no prediction interval" in interval_html({k: v for k, v in rj.items() if k != "interval"})
    rj = copy.deepcopy(rj)
    s, m, t = rj["step_time_s"], rj["mfu"], rj["tokens_per_s"]
    rj["interval"] = {"level": 0.8, "step_time_s": [0.9 * s, 1.2 * s], "mfu": [m / 1.2, m / 0.9],
                      "tokens_per_s": [t / 1.2, t / 0.9]}
    table = interval_html(rj)
    # header, three step metrics and the memory interval (memory.interval, docs/output.md)
    assert table.count("<tr>") == 5 and "80% interval" in table and "peak memory" in table
    assert f"{0.9 * s:.4g}-{1.2 * s:.4g} s (80% interval)" in summary_cards(rj)


def test_a_job_that_does_not_fit_shows_no_rate_as_achieved() -> None:
    rj = copy.deepcopy(estimate(load_scenario(ROOT / SMALL)).to_json())
    fits = summary_cards(rj)
    assert f"{rj['mfu'] * 100:.1f}%" in fits
    rj["memory"]["verdict"], rj["memory"]["fits"] = "does-not-fit", False
    cards = summary_cards(rj)
    assert f"{rj['mfu'] * 100:.1f}%" not in cards and f"{rj['step_time_s']:.4g} s" not in cards
    assert f"{float(rj['tokens_per_s']):,.0f}" not in cards
    assert cards.count("does not fit in GPU memory") == 3 and "does-not-fit" in cards


def test_compare_page_draws_energy_and_intervals_when_rows_have_them() -> None:
    row = {"cluster": "dgx-h100", "gpu": "h100", "nodes": 1, "gpus": 8,
           "best_layout": {"tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "micro_batch": 1, "global_batch": 64,
                           "zero_stage": 1, "recompute": "none", "sequence_parallel": False, "schedule": "1f1b",
                           "virtual_stages": 1},
           "step_time_s": 5.0, "mfu": 0.6, "tokens_per_s": 1e5, "tokens_per_s_per_gpu": 1.25e4,
           "peak_bytes_per_gpu": 2**36, "time_to_train_s": 1e6, "gpu_hours": 2222.0, "price_per_gpu_hour_usd": 3.0,
           "cost_usd": 6666.0}
    plain = compare_page([row], 1e11)
    assert "chart-energy" not in charts_of(plain)
    rich = dict(row, energy_kwh=1234.0,
                interval={"level": 0.8, "time_to_train_s": [9e5, 1.2e6], "cost_usd": [6000.0, 8000.0],
                          "energy_kwh": [1100.0, 1400.0], "step_time_s": [4.5, 6.0]})
    page = compare_page([rich, dict(row, cluster="hgx-h200")], 1e11)
    items = charts_of(page)
    assert set(items) == {"chart-time", "chart-cost", "chart-energy"}
    assert '"Whisker"' in json.dumps(items["chart-energy"]) and "energy kWh" in page


def test_energy_section_appears_when_the_report_has_one() -> None:
    report = estimate(load_scenario(ROOT / SMALL))
    rj = report.to_json()
    # run --json carries the energy object (clustersim.energy): words for its keys, rounded numbers
    energy = run_sections(rj, [], None, None)["energy"]
    assert "facility power" in energy and "facility_power_kw" not in energy
    assert f"<td>{sig4(rj['energy']['facility_power_kw'])}</td>" in energy and "<td>kW</td>" in energy.replace(' class="l"', "")
    # at most four significant digits (docs/html.md): 15,876.1 kW read as such on 16,384 GPUs
    assert sig4(15876.1) == "15,880" and sig4(12.09312) == "12.09" and sig4(532.0) == "532"
    del rj["energy"]
    assert "energy" not in run_sections(rj, [], None, None)
    # a key added later: its words, the unit from its suffix, four significant digits
    rj["energy"] = {"step_j": 5123456.0, "interval": [4.0e6, 6.0e6]}
    sections = run_sections(rj, [], None, None)
    assert "<td>step</td>" in sections["energy"].replace(' class="l"', "") and "5,123,000" not in sections["energy"]
    assert "5.123e+06" in sections["energy"] and "4e+06 - 6e+06" in sections["energy"]


def test_a_mixed_cluster_page_names_every_group() -> None:
    """The header read "on 32 x dgx-a100 = 256 a100-sxm-80gb" for 16 DGX A100 + 16 DGX H100."""
    report = estimate(load_scenario(ROOT / "scenarios" / "llama3_70b_a100_h100_mixed.yaml"))
    page = run_page(report)
    assert "on 16 x dgx-a100 + 16 x dgx-h100 = 256 GPUs; stages on a100-sxm-80gb" in page
    assert "32 x dgx-a100" not in page


def test_a_job_that_does_not_fit_shows_no_time_anywhere() -> None:
    """The interval table listed step time, tokens/s and MFU, and the page drew a timeline, a
    critical path and energy per step, for a job that cannot start (docs/html.md)."""
    report = estimate(load_scenario(ROOT / "scenarios" / "llama3_8b_h200x8.yaml",
                                    ["cluster.preset=dgx-h100", "cluster.nodes=3", "parallel.tp=2", "parallel.dp=12",
                                     "parallel.zero_stage=0", "parallel.recompute=none", "parallel.micro_batch=4",
                                     "parallel.global_batch=96"]))
    assert not report.memory.fits
    page = run_page(report)
    assert "tokens/s</td>" not in page and ">step time</td>" not in page
    assert page.count('data-testid="does-not-fit"') == 3 and 'id="chart-timeline"' not in page


def test_faults_and_the_runs_energy_are_on_the_page() -> None:
    """Per-rank faults: the page showed the step time alone (the CLI names the GPU that paced it
    and its cost); --tokens: the page left out the whole run's energy the CLI prints."""
    sc = load_scenario(ROOT / SMALL, ["faults.slow_gpus=[{rank: 1, speed: 0.5}]"])
    page = run_page(estimate(sc))
    assert 'data-testid="faults">paced by rank' in page and "against a healthy cluster" in page
    page = run_page(estimate(load_scenario(ROOT / SMALL)), tokens=15e12)
    assert "energy of the training run" in page and "15T" in page


def test_the_memory_table_samples_the_verdicts_stage_as_the_command_line() -> None:
    """The page took the stage of the highest peak where the command line takes the stage the
    memory verdict comes from: the two showed different stages of the same report."""
    from clustersim.html.fragments import memory_table, sampled_stages
    stages = [{"stage": i, "peak_bytes_per_gpu": 1e9 * (2 if i == 3 else 1)} for i in range(16)]
    html = memory_table(stages, verdict_stage=9)
    shown = [int(h.split("</th>")[0]) for h in html.split("<th>stage ")[1:]]
    assert shown == sampled_stages(16, 9) and 9 in shown
