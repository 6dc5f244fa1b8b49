"""Rich display in Jupyter: ``_repr_html_`` of StepReport (SweepResult's: html/sweep_notebook.py).

The report and the sweep do not import the html package (docs/ARCHITECTURE.md): this module
attaches ``StepReport._repr_html_`` when it is imported, which ``clustersim.api`` does. Plain HTML
with a style block scoped to ``.clustersim-nb`` (no scripts, no BokehJS: a notebook stays small
and renders in any front end, including GitHub's viewer). For the charts, write a
page with ``clustersim.api.report_html`` or `clustersim run --html`.
"""

from __future__ import annotations

from clustersim.html import fragments
from clustersim.report import StepReport

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


def report_html(report: StepReport) -> str:
    """A StepReport as an HTML fragment: numbers, interval, breakdown, memory per stage."""
    rj = report.to_json()
    stages = [m.to_json() for m in report.memory_by_stage]
    # a job that does not fit has no critical path to show, as the command line and the page say
    breakdown = fragments.breakdown_table(rj) if fragments.job_runs(rj) else \
        '<p class="note">No critical path: the job does not fit in GPU memory, so it cannot run.</p>'
    return (f'{_STYLE}<div class="clustersim-nb">{fragments.report_header(rj)}{fragments.summary_cards(rj)}'
            f"{fragments.interval_html(rj)}{breakdown}{fragments.memory_table(stages, rj['memory'].get('stage'))}</div>")


def _report_repr_html(self: StepReport) -> str:
    """Rich display in Jupyter: numbers, interval, breakdown, memory per stage."""
    return report_html(self)


StepReport._repr_html_ = _report_repr_html  # type: ignore[attr-defined]
