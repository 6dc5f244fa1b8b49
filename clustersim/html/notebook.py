"""Rich display in Jupyter: ``_repr_html_`` of StepReport and SweepResult.

The sweep does not import the html package (docs/sweep.md): this module attaches
``SweepResult._repr_html_`` when it is imported, which ``clustersim.api.sweep`` does. Plain HTML
with a style block scoped to ``.clustersim-nb`` (no scripts, no BokehJS: a notebook stays small
and renders in any front end, including GitHub's viewer). For the charts, write a
page with ``clustersim.api.report_html`` or `clustersim run --html`.
"""

from __future__ import annotations

from typing import Any

from clustersim.html import fragments
from clustersim.html.page import esc
from clustersim.sweep.result import SweepResult

_STYLE = """<style>
.clustersim-nb { font-family: system-ui, sans-serif; font-size: 13px; }
.clustersim-nb h1 { font-size: 15px; margin: 4px 0; }
.clustersim-nb p { margin: 2px 0; color: #5b6572; }
.clustersim-nb .cards { display: flex; flex-wrap: wrap; gap: 8px; margin: 6px 0; }
.clustersim-nb .card { border: 1px solid #d8dde3; border-radius: 5px; padding: 4px 10px; min-width: 120px; }
.clustersim-nb .card .k, .clustersim-nb .card .s { color: #5b6572; font-size: 11px; }
.clustersim-nb .card .v { font-size: 15px; font-weight: 600; }
.clustersim-nb .bad { color: #b42318; }
.clustersim-nb table.t { border-collapse: collapse; margin: 6px 0; }
.clustersim-nb table.t th, .clustersim-nb table.t td { padding: 2px 8px; text-align: right; border-bottom: 1px solid #d8dde3; }
.clustersim-nb table.t .l, .clustersim-nb table.t td:first-child { text-align: left; }
.clustersim-nb .range { display: inline-block; position: relative; width: 160px; height: 8px; background: #eef1f4; }
.clustersim-nb .range span { position: absolute; top: 0; bottom: 0; background: #9ecae1; }
.clustersim-nb .range i { position: absolute; top: -2px; width: 2px; height: 12px; background: #08519c; }
.clustersim-nb .note { color: #5b6572; font-size: 11px; }
</style>"""


def report_html(report: Any) -> str:
    """A StepReport as an HTML fragment: numbers, interval, breakdown, memory per stage."""
    rj = report.to_json()
    stages = [m.to_json() for m in report.memory_by_stage]
    return (f'{_STYLE}<div class="clustersim-nb">{fragments.report_header(rj)}{fragments.summary_cards(rj)}'
            f"{fragments.interval_html(rj)}{fragments.breakdown_table(rj)}{fragments.memory_table(stages)}</div>")


def sweep_html(result: Any, k: int = 10) -> str:
    """A SweepResult as an HTML fragment: counts and the top ``k`` rows."""
    from clustersim.html.sweep_page import top_table

    s = result.spec.scenario
    head = (f"<h1>Layout sweep: {esc(s.model.name)} on {s.cluster.num_gpus} GPUs ({esc(s.cluster.name)})</h1>"
            f"<p>{result.evaluated:,} layouts screened, {result.fitting:,} fit, {result.estimated:,} in closed form, "
            f"{result.simulated:,} in the event engine</p>")
    return f'{_STYLE}<div class="clustersim-nb">{head}{top_table(result.top(k), result.ranked_field)}</div>'


def _sweep_repr_html(self: SweepResult) -> str:
    """Rich display in Jupyter: counts and the top rows."""
    return sweep_html(self)


SweepResult._repr_html_ = _sweep_repr_html  # type: ignore[attr-defined]
