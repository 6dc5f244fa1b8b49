"""`clustersim compare`: the best layout per cluster and size, time to train and cost."""

from __future__ import annotations

import json
import math

import click
from rich.console import Console
from rich.table import Table

from clustersim.cli.progress import progress_bar
from clustersim.errors import InputError, Interrupted
from clustersim.html import check_html_path, write_html
from clustersim.html.fragments import duration_column, energy_unit, fmt_tokens
from clustersim.limits import MAX_PUE, MAX_RERANK, MIN_PUE
from clustersim.scenario import apply_overrides, read_scenario_dict
from clustersim.sweep.compare import RANK_KEYS, check_compare_size, parse_list, parse_prices, parse_tokens
from clustersim.sweep.compare_rows import compare_rows
from clustersim.sweep.executors import EXECUTORS
from clustersim.sweep.plot import check_plot_path, plot_compare
from clustersim.sweep.result import overlapping_best
from clustersim.sweep.verdict import layout_label, regime_line, tied_line
from clustersim.units import GiB


def _span(values: object, scale: float, fmt: str) -> str:
    lo, hi = values  # type: ignore[misc]
    return f"{format(lo / scale, fmt)}-{format(hi / scale, fmt)}"


# per --rank-by: the quantity's interval in words and the word for the better row
_RANKED_WORDS = {"time": ("time-to-train", "faster"), "cost": ("cost", "cheaper"), "energy": ("energy", "more frugal")}


def ranking_lines(rows: list[dict[str, object]], rank_by: str) -> list[str]:
    """What the intervals say about the ranking, under the table, in the sweep's words
    (clustersim.sweep.verdict): which rows the first cannot be told apart from (their intervals of
    the ranked quantity overlap), and each row whose interval is not validated, with why."""
    if not rows:
        return []
    sizes = {r["gpus"] for r in rows}
    names = [f"{r['cluster']}" + (f", {r['gpus']} GPUs" if len(sizes) > 1 else "") for r in rows]
    lines = []
    if len(rows) > 1:
        interval, ahead = _RANKED_WORDS[rank_by]
        level = float(rows[0]["interval"]["level"])  # type: ignore[index]
        lines.append(tied_line(overlapping_best(rows, RANK_KEYS[rank_by]), level, interval, "row", ahead, names))
    for i, r in enumerate(rows):
        if not r["interval_validated"]:
            lines.append(regime_line(f"#{i + 1} ({names[i]})", str(r["interval_regime"]), False,
                                     list(r["interval_widened_for"]),  # type: ignore[call-overload]
                                     int(r["interval_evidence_runs"])))  # type: ignore[call-overload]
    return lines


@click.command("compare")
@click.argument("scenario", required=False, type=click.Path(dir_okay=False))
@click.option("--clusters", required=True, help="Cluster presets, comma-separated (dgx-h100,dgx-b200,gb200-nvl72).")
@click.option("--nodes", help="Node counts to compare, comma-separated (the GPUs then differ with the GPUs per node).")
@click.option("--gpus", help="GPU counts to compare, comma-separated: the same count on every cluster, a note on a "
              "row that cannot hold it exactly (default: the scenario's GPU count).")
@click.option("--tokens", default="1T", show_default=True, help="Training tokens: a number with K/M/B/T.")
@click.option("--price-per-gpu-hour", "price", help="USD per GPU-hour: one number, or PRESET=PRICE,... "
              "(default: the GPU profile's price_per_gpu_hour_usd).")
@click.option("--price-per-kwh", "price_kwh", help="USD per kWh of facility energy (default 0.081, US industrial "
              "average 2024; 0 when the GPU price includes power).")
@click.option("--pue", type=float, help="Data-centre PUE for every cluster (default: the preset's, else 1.56).")
@click.option("--rank-by", type=click.Choice(tuple(RANK_KEYS)), default="time", show_default=True,
              help="Order the rows by time to train, cost or energy.")
@click.option("--executor", type=click.Choice(EXECUTORS), default="local", show_default=True)
@click.option("--scheduler", metavar="ADDRESS", help="Dask scheduler (tcp://host:8786).")
@click.option("--workers", type=click.IntRange(min=1), help="Worker processes (default: all cores).")
@click.option("--rerank", type=click.IntRange(min=1, max=MAX_RERANK), default=1, show_default=True,
              help="Best layouts per cluster (by the closed form) re-simulated with the event engine.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Plot time to train against cost and energy, with "
              "intervals (.png/.svg/.pdf).")
@click.option("--html", "html_file", type=click.Path(dir_okay=False),
              help="Write a self-contained HTML page: time to train, cost and energy per cluster.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario field.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--profile", "profiles", multiple=True, type=click.Path(dir_okay=False),
              help="Extra hardware profile YAML (e.g. one written by `clustersim calibrate`): its clusters "
                   "can be named in --clusters.")
def compare(scenario: str | None, clusters: str, nodes: str | None, gpus: str | None, tokens: str, price: str | None,
            price_kwh: str | None, pue: float | None, rank_by: str, executor: str, scheduler: str | None,
            workers: int | None, rerank: int, plot: str | None, html_file: str | None, overrides: tuple[str, ...],
            no_progress: bool, as_json: bool, profiles: tuple[str, ...]) -> None:
    """Which cluster trains SCENARIO's model fastest, cheapest and with the least energy: the best
    layout found by a sweep on each cluster and size, its step time, MFU, time to train --tokens,
    cost and energy, each with an 80% interval. Every cluster gets the same GPU count (--gpus, else
    the scenario's); a row that cannot hold exactly that count says why under the table, and so
    does a cluster on which no layout runs the job (the others are still compared)."""
    from clustersim.api import SWEEP_EVALUATORS
    from clustersim.hardware.load import list_clusters, use_profiles
    use_profiles(profiles)
    presets = parse_list(clusters, "--clusters")
    known = list_clusters()
    for name in presets:
        if name not in known:
            raise InputError("--clusters", name, known)
    if nodes and gpus:
        raise InputError("--gpus", gpus, "either --nodes or --gpus, not both")
    sizes = parse_list(nodes, "--nodes", int) if nodes else None
    gpu_sizes = parse_list(gpus, "--gpus", int) if gpus else None
    check_compare_size(presets, sizes or gpu_sizes)
    if pue is not None and not (math.isfinite(pue) and MIN_PUE <= pue <= MAX_PUE):
        raise InputError("--pue", pue, f"a power usage effectiveness from {MIN_PUE:g} to {MAX_PUE:g} (1.1 for a "
                         "hyperscale site, 1.56 average), as cluster.pue")
    n_tokens = parse_tokens(tokens)
    prices = parse_prices(price, presets)
    inputs = [p for p in (scenario, *profiles) if p is not None]
    if plot is not None:
        check_plot_path(plot, inputs=inputs)
    if html_file is not None:
        check_html_path(html_file, inputs=inputs)
    written: list[str] = []
    try:
        with progress_bar(not no_progress, {"sweeps": "compare"}, "sweeps") as update:
            def progress(done: int, total: int, cluster: str) -> None:
                if update:
                    update("sweeps", done, total)

            comparison = compare_rows(scenario, overrides, presets, sizes, n_tokens, prices, executor, scheduler,
                                      workers, rerank, price_kwh, gpu_sizes, rank_by, pue, progress,
                                      evaluators=SWEEP_EVALUATORS)
        rows, cannot = comparison.rows, comparison.cannot_run
        if plot is not None:
            plot_compare(plot, rows, f"training {tokens} tokens: time, cost and energy (80% intervals)")
            written.append(plot)
        if html_file is not None:
            from clustersim.html.compare_page import compare_page

            raw = apply_overrides(read_scenario_dict(scenario), list(overrides))
            write_html(html_file, compare_page(rows, n_tokens, raw, cannot))
            written.append(html_file)
    except KeyboardInterrupt:   # as sweep: one line says which files were kept (docs/output.md, exit 130)
        missing = [f for f in (plot, html_file) if f and f not in written]
        raise Interrupted("compare stopped" + (f"; {' and '.join(missing)} not written" if missing else "")
                          + (f"; {' and '.join(written)} written in full" if written else "")) from None
    if as_json:
        click.echo(json.dumps({"tokens": n_tokens, "rank_by": rank_by, "rows": rows, "cannot_run": cannot}, indent=2))
        return
    table = compare_table(rows, n_tokens, rank_by)
    out = Console(width=max(Console().width, 170))
    out.print(table)
    for line in ranking_lines(rows, rank_by):
        out.print(line, highlight=False)
    for r in rows:
        if r["size_note"]:
            out.print(f"* {r['cluster']}: {r['size_note']}", highlight=False)
    held = sorted({k for r in rows for k, v in dict(r.get("fixed_offload") or {}).items() if v})
    if held:   # the scenario's offload, kept on every layout (clustersim.sweep.runner.scenario_space)
        out.print(f"the scenario's parallel.offload ({', '.join(held)}) is held fixed: every layout offloads it, as "
                  "`clustersim run` does, and the memory verdicts count the offloaded states on the host",
                  highlight=False)
    for r in rows:   # a best layout that fits only at the low end of its memory interval
        if r["memory_verdict"] == "tight":
            peak, free = float(r["peak_bytes_per_gpu"]), float(r["free_bytes_per_gpu"])
            where = (f"exceeds the GPU's {(peak + free) / GiB:.1f} GiB" if free < 0 else
                     f"leaves {free / GiB:.1f} GiB of {(peak + free) / GiB:.1f}")
            out.print(f"{r['cluster']}: no layout fits for certain; the best, tight, has a predicted peak of "
                      f"{peak / GiB:.1f} GiB that {where} (it fits only at the low end of its memory interval)",
                      highlight=False)
    kept = next((r for r in [*rows, *cannot] if r["cluster_settings"]), None)
    if kept is not None:   # the scenario's own cluster keys hold on its preset only
        settings = ", ".join(f"{k}={v}" for k, v in kept["cluster_settings"].items())  # type: ignore[union-attr]
        others = sorted({str(r["cluster"]) for r in [*rows, *cannot]} - {str(kept["cluster"])})
        out.print(f"{kept['cluster']}: the scenario's cluster settings kept ({settings})"
                  + (f"; {', '.join(others)} as shipped" if others else ""), highlight=False)
    for r in cannot:   # clusters on which no layout runs the job: not in the ranking, said under it
        note = f"; {r['size_note']}" if r["size_note"] else ""
        out.print(f"cannot run this job: {r['cluster']} on {r['gpus']} GPUs{note}: {r['cannot_run']}", highlight=False)


def compare_table(rows: list[dict[str, object]], n_tokens: float, rank_by: str) -> Table:
    """The readable table of ranked rows: one unit per column for cost, energy and time to train,
    large enough for the largest row, and each row's best layout in full (``layout_label``)."""
    table = Table(title=f"time to train {fmt_tokens(n_tokens)} tokens, cost and energy, ranked by {rank_by} "
                        f"(ranges: 80% intervals)")
    # one unit for the cost column, large enough for the dearest row ($M rounded every row of a
    # 100B-token comparison to 0.01)
    dearest = max((float(r["interval"]["cost_usd"][1]) for r in rows), default=0.0)  # type: ignore[index]
    unit, scale = next((u, v) for u, v in (("$B", 1e9), ("$M", 1e6), ("$K", 1e3), ("$", 1.0)) if dearest >= v or v == 1.0)
    # and one for energy (whole MWh read "0 (0-0)" for a 10B-token comparison)
    e_unit, e_scale = energy_unit(max((float(r["interval"]["energy_kwh"][1]) for r in rows), default=0.0))  # type: ignore[index]
    # and one for time to train, in which the shortest reads with 3 significant digits (a fixed
    # one-decimal day read "0.1 (0.1-0.1)" on rows 2.2x apart)
    duration = duration_column([v for r in rows for v in r["interval"]["time_to_train_s"]])  # type: ignore[index]
    for name in ("#", "cluster", "GPUs", "best layout", "step s", "MFU", duration.unit, f"cost {unit}", f"energy {e_unit}",
                 "$/GPU-h", "kW"):
        # a stated pipeline layout (layout_label's "layout Et*2|t*2|...") folds onto the next lines
        # whole: a cut one would read as another split
        table.add_column(name, justify="left" if name in ("cluster", "best layout") else "right",
                         overflow="fold" if name == "best layout" else "ellipsis")
    for r in rows:
        iv = r["interval"]
        table.add_row(str(r["rank"]), str(r["cluster"]), f"{r['gpus']}{'*' if r['size_note'] else ''}",
                      layout_label(r["best_layout"]),  # type: ignore[arg-type]
                      f"{r['step_time_s']:.2f} ({_span(iv['step_time_s'], 1, '.2f')})",  # type: ignore[index]
                      f"{r['mfu']:.1%}",
                      f"{duration.fmt(float(r['time_to_train_s']))} "  # type: ignore[arg-type]
                      f"({'-'.join(duration.fmt(v) for v in iv['time_to_train_s'])})",  # type: ignore[index]
                      f"{float(r['cost_usd']) / scale:.2f} ({_span(iv['cost_usd'], scale, '.2f')})",  # type: ignore[arg-type,index]
                      f"{float(r['energy_kwh']) / e_scale:,.0f} ({_span(iv['energy_kwh'], e_scale, ',.0f')})",  # type: ignore[arg-type,index]
                      f"{r['price_per_gpu_hour_usd']:.2f}", f"{r['facility_power_kw']:,.0f}")
    return table


__all__ = ["compare", "compare_table"]
