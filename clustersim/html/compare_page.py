"""`clustersim compare --html FILE`: clusters side by side.

One horizontal bar chart per quantity that the rows carry: time to train (days), cost (USD)
and energy (kWh, when the rows have ``energy_kwh``), with the 80% interval as a whisker when a
row has ``interval`` with that quantity; then a table of every row and the scenario.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clustersim.html import charts, fragments
from clustersim.html.page import esc, render_page, scenario_yaml
from clustersim.html.sweep_page import layout_label
from clustersim.units import GiB

SECONDS_PER_DAY = 86400.0
# (row key, chart id, title, unit, scale from the row's unit to the chart's, colour)
QUANTITIES = (
    ("time_to_train_s", "chart-time", "time to train", "days", 1 / SECONDS_PER_DAY, "#1f77b4"),
    ("cost_usd", "chart-cost", "cost", "USD", 1.0, "#2ca02c"),
    ("energy_kwh", "chart-energy", "energy", "kWh", 1.0, "#ff7f0e"),
)


def row_label(row: Mapping[str, Any]) -> str:
    return f"{row.get('cluster', '?')} x{row.get('nodes', '?')} ({row.get('gpus', '?')} GPUs)"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def compare_charts(rows: Sequence[Mapping[str, Any]], tokens: float) -> dict[str, Any]:
    labels = [row_label(r) for r in rows]
    out: dict[str, Any] = {}
    for key, chart_id, title, unit, scale, color in QUANTITIES:
        values = [_number(r.get(key)) for r in rows]
        if not any(v is not None for v in values):
            continue
        lo: list[float | None] = []
        hi: list[float | None] = []
        for r in rows:
            iv = r.get("interval")
            lohi = fragments.pair(iv.get(key)) if isinstance(iv, Mapping) else None
            lo.append(lohi[0] * scale if lohi else None)
            hi.append(lohi[1] * scale if lohi else None)
        out[chart_id] = charts.bar_chart(labels, [(v or 0.0) * scale for v in values],
                                         f"{title} for {fragments.fmt_tokens(tokens)} tokens ({unit})", unit, lo, hi, color)
    return out


def compare_table(rows: Sequence[Mapping[str, Any]]) -> str:
    has_energy = any(_number(r.get("energy_kwh")) is not None for r in rows)
    duration = fragments.duration_column(float(r["time_to_train_s"]) for r in rows)   # as the readable table
    table = []
    for r in rows:
        t = {"cluster": row_label(r), "layout": layout_label(r["best_layout"]) if "best_layout" in r else "",
             "step": f"{float(r['step_time_s']):.4g}", "mfu": f"{float(r['mfu']) * 100:.1f}%",
             "tpsg": f"{float(r['tokens_per_s_per_gpu']):,.0f}",
             "peak": f"{float(r['peak_bytes_per_gpu']) / GiB:.1f}",
             "days": duration.fmt(float(r["time_to_train_s"])),
             "gpuh": f"{float(r['gpu_hours']):,.0f}", "price": f"{float(r['price_per_gpu_hour_usd']):.2f}",
             "cost": f"{float(r['cost_usd']):,.0f}"}
        energy = _number(r.get("energy_kwh"))
        t["energy"] = f"{energy:,.0f}" if energy is not None else ""
        table.append(t)
    cols = [("cluster", "cluster"), ("layout", "best layout"), ("step", "step s"), ("mfu", "MFU"),
            ("tpsg", "tokens/s/GPU"), ("peak", "peak GiB/GPU"), ("days", duration.unit), ("gpuh", "GPU-hours"),
            ("price", "$/GPU-h"), ("cost", "cost $")]
    if has_energy:
        cols.append(("energy", "energy kWh"))
    return fragments.rows_table(cols, table, test_id="compare-rows", left=("layout",))


def size_notes(rows: Sequence[Mapping[str, Any]]) -> str:
    """Why a row's GPU count or scale-up domain differs from what was asked (``size_note``)."""
    notes = "".join(f"<li>{esc(row_label(r))}: {esc(r['size_note'])}</li>" for r in rows if r.get("size_note"))
    return f'<ul class="note" data-testid="size-notes">{notes}</ul>' if notes else ""


def cannot_run_notes(cannot: Sequence[Mapping[str, Any]]) -> str:
    """The clusters and sizes on which no layout runs the job (``cannot_run``), with the reason."""
    notes = "".join(f"<li>{esc(str(r['cluster']))} on {esc(str(r['gpus']))} GPUs cannot run this job: "
                    f"{esc(str(r['cannot_run']))}</li>" for r in cannot)
    return f'<ul class="note" data-testid="cannot-run">{notes}</ul>' if notes else ""


def compare_page(rows: Sequence[Mapping[str, Any]], tokens: float, scenario: Mapping[str, Any] | None = None,
                 cannot_run: Sequence[Mapping[str, Any]] = ()) -> str:
    items = compare_charts(rows, tokens)
    model = ""
    if scenario is not None and isinstance(scenario.get("model"), Mapping):
        model = str(scenario["model"].get("preset") or scenario["model"].get("name") or "")
    header = (f"<h1>Hardware comparison: {esc(model or 'scenario')} for {esc(fragments.fmt_tokens(tokens))} tokens</h1>"
              f"<p>{len(rows)} cluster configurations, each with the best layout its sweep found</p>")
    sections = "".join(f'<div id="{cid}" class="chart"></div>' for cid in items)
    body = (f'<section id="sec-charts"><h2>Time to train, cost and energy</h2>{sections}'
            '<p class="note">Whiskers show the 80% prediction interval where the rows carry one.</p></section>'
            f'<section id="sec-rows"><h2>Every configuration</h2>{compare_table(rows)}{size_notes(rows)}'
            f'{cannot_run_notes(cannot_run)}</section>')
    if scenario is not None:
        body += (f'<section id="sec-scenario"><h2>Scenario</h2><pre class="yaml" data-testid="scenario-yaml">'
                 f"{esc(scenario_yaml(scenario))}</pre></section>")
    return render_page(f"clustersim compare: {model}", header, body, items)
