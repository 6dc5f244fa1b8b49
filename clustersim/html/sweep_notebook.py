"""Rich display in Jupyter of a SweepResult: counts and the top rows, in the style of
html/notebook.py. The sweep does not import the html package (docs/sweep.md): this module attaches
``SweepResult._repr_html_`` when it is imported, which ``clustersim.api.sweep`` does."""

from __future__ import annotations

from clustersim.html.notebook import _STYLE
from clustersim.html.page import esc
from clustersim.html.sweep_page import top_table
from clustersim.sweep.result import SweepResult


def sweep_html(result: SweepResult, k: int = 10) -> str:
    """A SweepResult as an HTML fragment: counts and the top ``k`` rows."""
    s = result.spec.scenario
    head = (f"<h1>Layout sweep: {esc(s.model.name)} on {s.cluster.num_gpus} GPUs ({esc(s.cluster.name)})</h1>"
            f"<p>{result.evaluated:,} layouts screened, {result.fitting:,} fit, {result.estimated:,} in closed form, "
            f"{result.simulated:,} in the event engine</p>")
    return f'{_STYLE}<div class="clustersim-nb">{head}{top_table(result.top(k), result.ranked_field)}</div>'


def _sweep_repr_html(self: SweepResult) -> str:
    """Rich display in Jupyter: counts and the top rows."""
    return sweep_html(self)


SweepResult._repr_html_ = _sweep_repr_html  # type: ignore[attr-defined]
