"""`clustersim sweep --html FILE`: the layouts of a sweep as a page.

The Pareto front of step time against peak memory per GPU (colour: GPUs per model replica,
tp x pp x cp; hover: the layout and its numbers), every layout the closed form evaluated, the
best layouts re-ranked by the event engine, a table of the top layouts and the scenario.
Past ``MAX_POINTS`` evaluated layouts the chart keeps the front, the top and every k-th of the
rest in rank order (the page says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from clustersim.html import charts, fragments
from clustersim.html.page import esc, render_page, scenario_yaml
from clustersim.sweep.evaluate import COL, KEY_FIELDS
from clustersim.sweep.result import SweepResult, parallel_dict
from clustersim.sweep.verdict import layout_label, verdict
from clustersim.units import GiB

__all__ = ["layout_label", "sweep_page", "top_table"]

MAX_POINTS = 20_000


def _columns(result: SweepResult, rows: np.ndarray, engine: str) -> dict[str, list[Any]]:
    t = result.table
    gb = result.spec.scenario.parallel.global_batch
    labels, replica = [], []
    for i in rows:
        p = parallel_dict(tuple(int(v) for v in t[i, : len(KEY_FIELDS)]), gb, result.spec.scenario.parallel.cp_comm)
        labels.append(layout_label(p))
        replica.append(int(p["tp"]) * int(p["pp"]) * int(p["cp"]))  # type: ignore[call-overload]
    return {"peak_gib": [round(float(t[i, COL["peak_bytes_per_gpu"]]) / GiB, 4) for i in rows],
            "step_s": [round(float(t[i, COL["step_time_s"]]), 6) for i in rows],
            "label": labels,
            "tokens_per_s": [round(float(t[i, COL["tokens_per_s"]]), 1) for i in rows],
            "mfu": [round(float(t[i, COL["mfu"]]), 5) for i in rows],
            "replica_gpus": replica, "engine": [engine] * len(rows)}


def _top_columns(top: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {"peak_gib": [round(float(r["peak_bytes_per_gpu"]) / GiB, 4) for r in top],
            "step_s": [round(float(r["step_time_s"]), 6) for r in top],
            "label": [layout_label(r["parallel"]) for r in top],
            "tokens_per_s": [round(float(r["tokens_per_s"]), 1) for r in top],
            "mfu": [round(float(r["mfu"]), 5) for r in top],
            "replica_gpus": [int(r["parallel"]["tp"]) * int(r["parallel"]["pp"]) * int(r["parallel"]["cp"])
                             for r in top],
            "engine": [str(r["engine"]) for r in top]}


def chart_rows(result: SweepResult) -> tuple[np.ndarray, np.ndarray, int]:
    """(rows drawn as dots, rows of the Pareto front, rows with a closed-form time in all)."""
    t = result.table
    timed = np.flatnonzero(result.feasible_mask() & ~np.isnan(t[:, COL["step_time_s"]]))
    front = result.pareto()
    if timed.size <= MAX_POINTS:
        return timed, front, int(timed.size)
    step = int(np.ceil(timed.size / MAX_POINTS))
    keep = np.union1d(timed[::step], np.intersect1d(front, timed))
    return keep, front, int(timed.size)


def _group_note(r: dict[str, Any]) -> str:
    """``v3-40, zero 1|2, 38 layouts``: what a row's group spans (empty for a single layout)."""
    group = r.get("group") if isinstance(r.get("group"), dict) else {}
    varies = group.get("varies", {})
    parts = []
    if "virtual_stages" in varies:
        parts.append("v{}-{}".format(*varies["virtual_stages"]))
    if "zero_stage" in varies:
        parts.append("zero {}|{}".format(*varies["zero_stage"]))
    if int(group.get("layouts", 1)) > 1:
        parts.append(f"{group['layouts']} layouts")
    return ", ".join(parts)


_RANKED = {"p90_step_time_s": "p90 step time (s)", "cost_usd_per_million_tokens": "USD per million tokens",
           "gpu_hours_per_million_tokens": "GPU-hours per million tokens", "free_bytes_per_gpu": "free GiB/GPU"}


def _ranked_value(field: str, r: dict[str, Any]) -> str:
    value = r.get(field)
    if value is None:
        return ""
    return f"{float(value) / GiB:.1f}" if field == "free_bytes_per_gpu" else f"{float(value):.4g}"


def top_table(top: list[dict[str, Any]], ranked_field: str = "step_time_s") -> str:
    """The top rows; a column for the ranked value where it is not the step time."""
    rows = []
    for i, r in enumerate(top, start=1):
        step = f"{float(r['step_time_s']):.3f}"   # as `clustersim sweep` prints it: 5.879 (4.951-6.980)
        st = fragments.pair((r.get("interval") or {}).get("step_time_s")) if isinstance(r.get("interval"), dict) else None
        if st:
            step += f" ({st[0]:.3f}-{st[1]:.3f})"
        iv = r.get("interval") if isinstance(r.get("interval"), dict) else {}
        regime = str(iv.get("regime", "")) + (" (not validated)" if iv.get("validated") is False else "")
        rows.append({"rank": r.get("rank", i) or i, "layout": layout_label(r["parallel"]), "group": _group_note(r),
                     "step": step,
                     "tps": f"{float(r['tokens_per_s']):,.0f}", "mfu": f"{float(r['mfu']) * 100:.1f}%",
                     "peak": f"{float(r['peak_bytes_per_gpu']) / GiB:.1f}", "regime": regime, "engine": r["engine"],
                     "ranked": _ranked_value(ranked_field, r)})
    cols = [("rank", "#"), ("layout", "layout")]
    if any(row["group"] for row in rows):
        cols.append(("group", "variants"))
    cols.append(("step", "step time (s, 80% interval)"))
    if ranked_field in _RANKED:
        cols.append(("ranked", _RANKED[ranked_field]))
    cols += [("tps", "tokens/s"), ("mfu", "MFU"), ("peak", "peak GiB/GPU")]
    if any(row["regime"] for row in rows):
        cols.append(("regime", "regime"))
    cols.append(("engine", "engine"))
    return fragments.rows_table(cols, rows, test_id="top-layouts", left=("layout", "group", "regime", "engine"))


def _ranking_note(result: SweepResult) -> str:
    c = result.spec.constraints
    within = f" Constraints: {esc(c.describe())}." if c else ""
    return (f'<p class="note">One row per structurally distinct layout: variants that differ only in virtual '
            f"stages, and ZeRO-1/2 twins, share a row (their range under variants).{within}</p>")


def verdict_html(result: SweepResult, top: list[dict[str, Any]]) -> str:
    """What the intervals say about the ranking, in the words `clustersim sweep` prints."""
    if not top or not all(isinstance(r.get("interval"), dict) for r in top):
        return ""
    items = "".join(f"<li>{esc(line)}</li>" for line in verdict(result, top))
    return f'<ul class="note" data-testid="verdict">{items}</ul>'


def sweep_page(result: SweepResult, top_k: int = 10, scenario: Mapping[str, Any] | None = None) -> str:
    s = result.spec.scenario
    gpus = s.cluster.num_gpus
    title = f"{s.model.name} on {gpus} GPUs ({s.cluster.name}), global batch {s.parallel.global_batch}"
    drawn, front, timed = chart_rows(result)
    top = result.top(top_k)
    item = charts.pareto_chart(_columns(result, drawn, "estimate"), _columns(result, front, "estimate"),
                               _top_columns(top), s.cluster.gpu.hbm_capacity_bytes,
                               f"step time against peak memory: {gpus} GPUs")
    sample = "" if drawn.size == timed else (f" The chart shows {drawn.size:,} of them: the Pareto front and every "
                                            f"{int(np.ceil(timed / MAX_POINTS))}-th of the rest in rank order.")
    header = (f"<h1>Layout sweep: {esc(title)}</h1>"
              f"<p>{result.evaluated:,} layouts screened, {result.fitting:,} fit in memory, {result.estimated:,} "
              f"evaluated in closed form, {result.simulated:,} re-ranked with the event engine</p>")
    body = (
        '<section id="sec-pareto"><h2>Pareto front: step time, memory and GPUs</h2>'
        '<div id="chart-pareto" class="chart"></div>'
        f'<p class="note">Each dot is a layout that fits and that the closed form evaluated ({timed:,}); the red '
        "line is the Pareto front (no other layout is faster with no more memory); stars are the top layouts "
        "of the table below (event-engine numbers where re-ranked). Colour: GPUs per model replica (tp x pp x cp); the dashed line is "
        f"the GPU's memory. Hover for the layout.{esc(sample)}</p></section>"
        f'<section id="sec-top"><h2>Top {len(top)} layouts, ranked by {esc(result.rank_by)}</h2>'
        f"{_ranking_note(result)}{top_table(top, result.ranked_field)}{verdict_html(result, top)}</section>"
    )
    if scenario is not None:
        body += (f'<section id="sec-scenario"><h2>Scenario</h2><pre class="yaml" data-testid="scenario-yaml">'
                 f"{esc(scenario_yaml(scenario))}</pre></section>")
    return render_page(f"clustersim sweep: {title}", header, body, {"chart-pareto": item})
