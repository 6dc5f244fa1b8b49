"""Predicted vs measured: error per case, median and 90th percentile, table and plot."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clustersim.output_file import save_figure


@dataclass(frozen=True, slots=True)
class CaseResult:
    name: str
    kind: str
    role: str        # "fit" | "holdout"
    predicted_s: float
    measured_s: float

    @property
    def error_pct(self) -> float:
        """Signed error of the prediction, percent of the measurement."""
        return (self.predicted_s - self.measured_s) / self.measured_s * 100.0

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "predicted_s": self.predicted_s,
                "measured_s": self.measured_s, "error_pct": round(self.error_pct, 3), "role": self.role}


def summary(results: list[CaseResult], role: str) -> dict[str, Any]:
    """Median and 90th percentile of |error| over the cases of ``role`` (nearest-rank p90)."""
    errs = sorted(abs(r.error_pct) for r in results if r.role == role)
    if not errs:
        return {"cases": 0, "median_abs_error_pct": None, "p90_abs_error_pct": None}
    # nearest-rank percentile: the smallest value with at least 90% of the values at or below it
    p90 = errs[max(0, int(np.ceil(0.9 * len(errs))) - 1)]
    return {"cases": len(errs), "median_abs_error_pct": round(float(np.median(errs)), 3),
            "p90_abs_error_pct": round(float(p90), 3)}


def render_table(results: list[CaseResult], title: str) -> Any:
    from rich.table import Table
    table = Table(title=title)
    for col, justify in (("case", "left"), ("kind", "left"), ("role", "left"), ("predicted", "right"),
                         ("measured", "right"), ("error", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in results:
        table.add_row(r.name, r.kind, r.role, _fmt_s(r.predicted_s), _fmt_s(r.measured_s), f"{r.error_pct:+.1f}%")
    return table


def _fmt_s(t: float) -> str:
    if t >= 1:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.2f} ms"
    return f"{t * 1e6:.1f} us"


def save_plot(results: list[CaseResult], path: Path, title: str) -> Path:
    """Log-log scatter of predicted vs measured, one colour per kind, hollow markers for fit cases."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 5.5), dpi=110)
    kinds = sorted({r.kind for r in results})
    colours = plt.get_cmap("tab10")
    for i, kind in enumerate(kinds):
        for role, face in (("fit", "none"), ("holdout", colours(i))):
            pts = [r for r in results if r.kind == kind and r.role == role]
            if pts:
                ax.scatter([r.measured_s for r in pts], [r.predicted_s for r in pts], label=f"{kind} ({role})",
                           facecolors=face, edgecolors=colours(i), s=28)
    values = [v for r in results for v in (r.measured_s, r.predicted_s) if v > 0]
    if values:
        lo, hi = min(values) / 1.5, max(values) * 1.5
        ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8)
        for f in (0.85, 1.15):
            ax.plot([lo, hi], [lo * f, hi * f], color="grey", lw=0.5, ls=":")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured (s)")
    ax.set_ylabel("predicted (s)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=100)   # atomically (clustersim.output_file)
    plt.close(fig)
    return path
