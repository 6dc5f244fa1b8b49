"""Plots of a sweep (throughput against peak memory, Pareto front marked) and of a comparison.

matplotlib's Agg backend (no display needed); written atomically (clustersim.output_file).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from clustersim.output_file import check_output_path, save_figure

GiB = 2**30


def check_plot_path(path: str | os.PathLike[str], option: str = "--plot",
                    inputs: Sequence[str | os.PathLike[str]] = ()) -> None:
    check_output_path(path, option, (".png", ".svg", ".pdf"), inputs)


def _figure() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | os.PathLike[str]) -> None:
    save_figure(fig, path)   # identical sweeps give identical files (clustersim.output_file)


def plot_sweep(path: str | os.PathLike[str], peak_bytes: Sequence[float], tokens_per_s: Sequence[float],
               front_peak_bytes: Sequence[float], front_tokens_per_s: Sequence[float],
               capacity_bytes: float, title: str, best: tuple[float, float] | None = None) -> None:
    """Every feasible layout as a dot, the Pareto front as a line, the memory capacity as a rule."""
    plt = _figure()
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.scatter([b / GiB for b in peak_bytes], tokens_per_s, s=4, alpha=0.35, color="tab:blue",
               label=f"layouts evaluated in closed form ({len(peak_bytes)})", rasterized=True)
    ax.plot([b / GiB for b in front_peak_bytes], front_tokens_per_s, "-o", color="tab:red", ms=4,
            label=f"Pareto front ({len(front_peak_bytes)})")
    if best is not None:
        ax.plot([best[0] / GiB], [best[1]], "*", color="black", ms=12, label="best (re-ranked)")
    ax.axvline(capacity_bytes / GiB, color="grey", ls="--", lw=1, label="GPU memory")
    ax.set_xlabel("peak memory per GPU (GiB)")
    ax.set_ylabel("tokens/s (closed-form estimate)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def plot_result(result: Any, path: str | os.PathLike[str], title: str) -> None:
    """The plot of a SweepResult (clustersim.sweep.runner)."""
    import numpy as np

    from clustersim.sweep.evaluate import COL

    t = result.table
    mask = result.feasible_mask() & ~np.isnan(t[:, COL["tokens_per_s"]])
    front = result.pareto()
    best = result.top(1)
    peak, tps = COL["peak_bytes_per_gpu"], COL["tokens_per_s"]
    plot_sweep(path, t[mask, peak], t[mask, tps], t[front, peak], t[front, tps],
               result.spec.scenario.cluster.gpu.hbm_capacity_bytes, title,
               (best[0]["peak_bytes_per_gpu"], best[0]["estimate_tokens_per_s"]) if best else None)


def plot_compare(path: str | os.PathLike[str], rows: Sequence[dict[str, Any]], title: str) -> None:
    """Time to train against cost (left) and against energy (right), one point per cluster and
    size, with the rows' 80% intervals as error bars."""
    plt = _figure()
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    for ax, key, scale, label in ((axes[0], "cost_usd", 1e6, "cost (million USD)"),
                                  (axes[1], "energy_kwh", 1e3, "energy (MWh)")):
        for row in rows:
            days = row["time_to_train_s"] / 86400
            y = row[key] / scale
            iv = row.get("interval") or {}
            xerr = yerr = None
            if iv:
                lo_d, hi_d = (v / 86400 for v in iv["time_to_train_s"])
                lo_y, hi_y = (v / scale for v in iv[key])
                xerr, yerr = [[days - lo_d], [hi_d - days]], [[y - lo_y], [hi_y - y]]
            ax.errorbar([days], [y], xerr=xerr, yerr=yerr, fmt="o", ms=6, capsize=3)
            ax.annotate(f"{row['cluster']} ({row['gpus']} GPUs)", (days, y), textcoords="offset points",
                        xytext=(5, 5), fontsize=8)
        ax.set_xlabel("time to train (days)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
