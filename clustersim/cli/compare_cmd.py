"""`clustersim compare`: the best layout per cluster and size, time to train and cost."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from clustersim.errors import InputError
from clustersim.html import check_html_path, write_html
from clustersim.scenario import apply_overrides, load_scenario, read_scenario_dict
from clustersim.sweep.compare import (
    compare_cluster,
    parse_list,
    parse_prices,
    parse_tokens,
    scenario_on,
    train_cost,
)
from clustersim.sweep.evaluate import KEY_FIELDS, SweepSpec
from clustersim.sweep.executors import EXECUTORS, make_executor
from clustersim.sweep.plot import check_plot_path, plot_compare
from clustersim.sweep.runner import SweepResult, parallel_dict, run_sweep
from clustersim.sweep.space import SearchSpace, layout_key

SECONDS_PER_DAY = 86400.0


def layout_label(p: dict[str, object]) -> str:
    """``tp8 pp8 dp16 mb1 z1 sel sp 1f1b`` - a short form for tables."""
    sched = str(p["schedule"]) + (f" v{p['virtual_stages']}" if int(p["virtual_stages"]) > 1 else "")  # type: ignore[call-overload]
    parts = [f"tp{p['tp']}", f"pp{p['pp']}", f"dp{p['dp']}"]
    if int(p["cp"]) > 1:  # type: ignore[call-overload]
        parts.append(f"cp{p['cp']}")
    parts += [f"mb{p['micro_batch']}", f"z{p['zero_stage']}", str(p["recompute"])]
    if p["sequence_parallel"]:
        parts.append("sp")
    return " ".join([*parts, sched])


def own_layout_tokens_per_s(result: SweepResult) -> float | None:
    """The event engine's tokens/s of the scenario's own layout on this cluster, if valid and fitting."""
    key = layout_key(result.spec.scenario.parallel)
    keys = result.table[:, : len(KEY_FIELDS)]
    for i in range(result.table.shape[0]):
        if tuple(int(v) for v in keys[i]) == key:
            if result.sim[i, 0] == 1.0:
                return float(result.sim[i, 3])
            return None
    return None


def compare_rows(scenario_path: str | None, overrides: tuple[str, ...], clusters: list[str], nodes: list[int] | None,
                 tokens: float, prices: dict[str, float], executor: str, scheduler: str | None,
                 workers: int | None, rerank: int) -> list[dict[str, object]]:
    base = load_scenario(scenario_path, overrides)
    sizes = nodes or [base.cluster.num_nodes]
    specs = []
    for preset in clusters:
        for n in sizes:
            specs.append((preset, n, SweepSpec(scenario_on(base, compare_cluster(preset, n)), SearchSpace())))
    rows: list[dict[str, object]] = []
    pool = make_executor(executor, scheduler, workers)
    try:
        for preset, n, spec in specs:
            cluster = spec.scenario.cluster
            try:
                result = run_sweep(spec, pool, rerank=rerank, keep=max(1, rerank))
            except InputError as exc:
                raise InputError("--nodes", n, f"a size at which {preset} can run this job ({exc.allowed})") from None
            best = result.top(1)[0]
            price = prices.get(preset, cluster.gpu.price_per_gpu_hour_usd)
            gpus = cluster.num_gpus
            cost = train_cost(tokens, float(best["tokens_per_s"]), gpus, price)  # type: ignore[arg-type]
            own = own_layout_tokens_per_s(result)
            rows.append({
                "cluster": preset, "gpu": cluster.gpu.name, "nodes": n, "gpus": gpus,
                "best_layout": best["parallel"], "step_time_s": best["step_time_s"], "mfu": best["mfu"],
                "tokens_per_s": best["tokens_per_s"], "tokens_per_s_per_gpu": float(best["tokens_per_s"]) / gpus,
                "peak_bytes_per_gpu": best["peak_bytes_per_gpu"],
                "scenario_layout": parallel_dict(layout_key(base.parallel), base.parallel.global_batch),
                "scenario_layout_tokens_per_s_per_gpu": None if own is None else own / gpus,
                "tokens": tokens, "time_to_train_s": cost.time_to_train_s, "gpu_hours": cost.gpu_hours,
                "price_per_gpu_hour_usd": price, "cost_usd": cost.cost_usd,
                "layouts_evaluated": result.evaluated, "layouts_feasible": result.fitting,
            })
    finally:
        pool.close()
    return rows


@click.command("compare")
@click.argument("scenario", required=False, type=click.Path(dir_okay=False))
@click.option("--clusters", required=True, help="Cluster presets, comma-separated (dgx-a100,dgx-h100,hgx-h200).")
@click.option("--nodes", help="Node counts to compare, comma-separated (default: the scenario's).")
@click.option("--tokens", default="1T", show_default=True, help="Training tokens: a number with K/M/B/T.")
@click.option("--price-per-gpu-hour", "price", help="USD per GPU-hour: one number, or PRESET=PRICE,... "
              "(default: the GPU profile's price_per_gpu_hour_usd).")
@click.option("--executor", type=click.Choice(EXECUTORS), default="local", show_default=True)
@click.option("--scheduler", metavar="ADDRESS", help="Dask scheduler (tcp://host:8786).")
@click.option("--workers", type=click.IntRange(min=1), help="Worker processes (default: all cores).")
@click.option("--rerank", type=click.IntRange(min=1), default=4, show_default=True,
              help="Best layouts per cluster re-ranked with the event engine.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Plot time to train against cost (.png/.svg/.pdf).")
@click.option("--html", "html_file", type=click.Path(dir_okay=False),
              help="Write a self-contained HTML page: time to train, cost and energy per cluster.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario field.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--profile", "profiles", multiple=True, type=click.Path(dir_okay=False),
              help="Extra hardware profile YAML (e.g. one written by `clustersim calibrate`): its clusters "
                   "can be named in --clusters.")
def compare(scenario: str | None, clusters: str, nodes: str | None, tokens: str, price: str | None, executor: str,
            scheduler: str | None, workers: int | None, rerank: int, plot: str | None, html_file: str | None,
            overrides: tuple[str, ...], as_json: bool, profiles: tuple[str, ...]) -> None:
    """Which cluster trains SCENARIO's model fastest and cheapest: the best layout found by a sweep
    on each cluster and size, its step time, MFU, time to train --tokens and cost."""
    from clustersim.hardware.load import use_profiles
    use_profiles(profiles)
    presets = parse_list(clusters, "--clusters")
    sizes = parse_list(nodes, "--nodes", int) if nodes else None
    n_tokens = parse_tokens(tokens)
    prices = parse_prices(price, presets)
    if plot:
        check_plot_path(plot)
    if html_file:
        check_html_path(html_file)
    rows = compare_rows(scenario, overrides, presets, sizes, n_tokens, prices, executor, scheduler, workers, rerank)
    if plot:
        plot_compare(plot, rows, f"time to train {tokens} tokens against cost")
    if html_file:
        from clustersim.html.compare_page import compare_page

        raw = apply_overrides(read_scenario_dict(scenario), list(overrides))
        write_html(html_file, compare_page(rows, n_tokens, raw))
    if as_json:
        click.echo(json.dumps({"tokens": n_tokens, "rows": rows}, indent=2))
        return
    table = Table(title=f"time to train {n_tokens:.3g} tokens")
    for name in ("cluster", "nodes", "GPUs", "best layout", "step s", "MFU", "tokens/s/GPU", "days", "GPU-hours",
                 "$/GPU-h", "cost $"):
        table.add_column(name, justify="left" if name in ("cluster", "best layout") else "right")
    for r in rows:
        table.add_row(str(r["cluster"]), str(r["nodes"]), str(r["gpus"]), layout_label(r["best_layout"]),  # type: ignore[arg-type]
                      f"{r['step_time_s']:.3f}", f"{r['mfu']:.1%}", f"{r['tokens_per_s_per_gpu']:,.0f}",
                      f"{float(r['time_to_train_s']) / SECONDS_PER_DAY:.1f}", f"{r['gpu_hours']:,.0f}",  # type: ignore[arg-type]
                      f"{r['price_per_gpu_hour_usd']:.2f}", f"{r['cost_usd']:,.0f}")
    Console(width=max(Console().width, 150)).print(table)


__all__ = ["compare"]
