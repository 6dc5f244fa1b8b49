"""`clustersim compare`: the best layout per cluster and size, time to train and cost."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import replace

import click
from rich.console import Console
from rich.table import Table

from clustersim.cli.progress import progress_bar
from clustersim.energy import energy_report
from clustersim.errors import InputError
from clustersim.html import check_html_path, write_html
from clustersim.html.fragments import fmt_tokens
from clustersim.limits import MAX_RERANK
from clustersim.scenario import Scenario, apply_overrides, load_scenario, read_scenario_dict
from clustersim.sweep.compare import (
    RANK_KEYS,
    ClusterSize,
    check_compare_size,
    cluster_size,
    compare_cluster,
    parse_list,
    parse_price_per_kwh,
    parse_prices,
    parse_tokens,
    rank_rows,
    run_interval,
    scenario_on,
    train_cost,
)
from clustersim.sweep.evaluate import KEY_FIELDS, SweepSpec
from clustersim.sweep.executors import EXECUTORS, SerialExecutor, make_executor
from clustersim.sweep.plot import check_plot_path, plot_compare
from clustersim.sweep.runner import SweepResult, make_tasks, parallel_dict, run_sweep
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


def _price(preset: str, prices: dict[str, float], cluster_price: float) -> float:
    price = prices.get(preset, cluster_price)
    if price <= 0 and preset not in prices:
        raise InputError("--price-per-gpu-hour", preset,
                         f"a price for {preset}: its GPU profile has none (e.g. --price-per-gpu-hour {preset}=4.5)")
    return price


def _compare_one(job: tuple) -> dict[str, object]:
    """One cluster and size: a serial sweep (so that clusters run side by side in the pool) and
    its best layout's time to train, cost and energy with the 80% interval. Module level: picklable."""
    preset, size, scenario, base_parallel, tokens, price, kwh_price, rerank, asked = job
    n = size.nodes
    cluster = scenario.cluster
    try:
        result = run_sweep(SweepSpec(scenario, SearchSpace()), SerialExecutor(), rerank=rerank, keep=max(1, rerank))
    except InputError as exc:
        option, value = ("--gpus", asked) if asked else ("--nodes", n)
        raise InputError(option, value, f"a size at which {preset} can run this job ({exc.allowed})") from None
    best = result.top(1)[0]
    gpus_n = cluster.num_gpus
    tps = float(best["tokens_per_s"])  # type: ignore[arg-type]
    cost = train_cost(tokens, tps, gpus_n, price)
    step = float(best["step_time_s"])  # type: ignore[arg-type]
    power = energy_report(cluster, step, tps * step)
    energy_kwh = power.run_energy_kwh(tokens)
    own = own_layout_tokens_per_s(result)
    row: dict[str, object] = {
        "cluster": preset, "gpu": cluster.gpu.name, "nodes": n, "gpus": gpus_n, "gpus_requested": asked,
        "scale_up_domain": cluster.gpus_per_domain, "size_note": size.note,
        "best_layout": best["parallel"], "step_time_s": step, "mfu": best["mfu"],
        "tokens_per_s": tps, "tokens_per_s_per_gpu": tps / gpus_n,
        "peak_bytes_per_gpu": best["peak_bytes_per_gpu"],
        "scenario_layout": parallel_dict(layout_key(base_parallel), base_parallel.global_batch),
        "scenario_layout_tokens_per_s_per_gpu": None if own is None else own / gpus_n,
        "tokens": tokens, "time_to_train_s": cost.time_to_train_s, "gpu_hours": cost.gpu_hours,
        "price_per_gpu_hour_usd": price, "gpu_cost_usd": cost.cost_usd,
        "facility_power_kw": power.facility_power_w / 1e3, "pue": power.pue,
        "energy_kwh": energy_kwh, "price_per_kwh_usd": kwh_price,
        "energy_cost_usd": energy_kwh * kwh_price, "cost_usd": cost.cost_usd + energy_kwh * kwh_price,
        "layouts_evaluated": result.evaluated, "layouts_feasible": result.fitting,
    }
    best_iv = best["interval"]  # clustersim.uncertainty.step_interval of the best layout
    lo, hi = best_iv["step_time_s"]  # type: ignore[index]
    row["interval"] = run_interval(float(best_iv["level"]), lo, hi, row)  # type: ignore[index]
    # what the interval rests on (clustersim.uncertainty), beside it: the interval holds only the contract's keys
    row["interval_regime"] = best_iv["regime"]  # type: ignore[index]
    row["interval_validated"] = best_iv["validated"]  # type: ignore[index]
    row["interval_widened_for"] = best_iv["widened_for"]  # type: ignore[index]
    return row


def expected_work(scenario: Scenario) -> float:
    """What a compare job is expected to cost, to start the longest first: its layouts times the
    GPU's dense peak. A faster GPU shrinks compute against communication, so more layouts come
    within the bound's gap of the best and its branch and bound runs the closed form longer
    (measured 2026-11-23 on Llama-3-70B: 623 closed-form runs on dgx-b200 against 4-154 on the
    others). Only the order in which the pool starts the jobs follows it (longest-processing-
    time-first list scheduling, Graham 1969); the rows come back in the jobs' order."""
    spec = SweepSpec(scenario, SearchSpace())
    return float(sum(make_tasks(spec, 1)[1])) * scenario.cluster.gpu.peak(scenario.training.dtype)


def longest_first(jobs: list[tuple]) -> list[int]:
    """Job indices by ``expected_work``, largest first (ties: the given order)."""
    work = [expected_work(job[2]) for job in jobs]
    return sorted(range(len(jobs)), key=lambda i: (-work[i], i))


def _sizes(preset: str, nodes: list[int] | None, gpus: list[int]) -> list[tuple[ClusterSize, int | None]]:
    """(size, the GPU count asked for or None for --nodes) of each requested size of ``preset``."""
    if nodes:
        return [(cluster_size(preset, nodes=n), None) for n in nodes]
    return [(cluster_size(preset, g), g) for g in gpus]


def _note_unequal_nodes(rows: list[dict[str, object]]) -> None:
    """--nodes counts nodes, so the GPU counts of one node count differ between clusters whose
    nodes differ: each such row says so (``size_note``)."""
    by_nodes: dict[object, set[object]] = {}
    for r in rows:
        by_nodes.setdefault(r["nodes"], set()).add(r["gpus"])
    for r in rows:
        if r["gpus_requested"] is None and len(by_nodes[r["nodes"]]) > 1:
            own = f"{r['nodes']} nodes of {int(r['gpus']) // int(r['nodes'])} GPUs"  # type: ignore[call-overload]
            r["size_note"] = "; ".join(t for t in (own + " (--nodes counts nodes; --gpus compares equal GPU counts)",
                                                   r["size_note"]) if t)


def compare_rows(scenario_path: str | None, overrides: tuple[str, ...], clusters: list[str], nodes: list[int] | None,
                 tokens: float, prices: dict[str, float], executor: str, scheduler: str | None,
                 workers: int | None, rerank: int, price_per_kwh: float | None = None,
                 gpus: list[int] | None = None, rank_by: str = "time", pue: float | None = None,
                 progress: Callable[[int, int, str], None] | None = None) -> list[dict[str, object]]:
    """One row per cluster and size: the best layout, time to train, cost and energy with intervals.

    Sizes: ``nodes`` (node counts), else ``gpus`` (GPU counts), else the scenario's GPU count: the
    same GPU count on every cluster (``cluster_size``; a row whose cluster cannot hold exactly that
    count says why in ``size_note``). Each cluster and size is one task of the executor (a serial
    sweep inside it): clusters run side by side, which costs less than spreading each small sweep
    over the pool. ``progress(done, total, cluster)`` is called as each finishes."""
    from clustersim.sweep.runner import check_uniform

    base = load_scenario(scenario_path, overrides)
    check_uniform(base)
    kwh_price = parse_price_per_kwh(price_per_kwh)
    jobs = []
    for preset in clusters:
        for size, asked in _sizes(preset, nodes, gpus or [base.cluster.num_gpus]):
            cluster = compare_cluster(preset, size)
            price = _price(preset, prices, cluster.gpu.price_per_gpu_hour_usd)
            if pue is not None:
                cluster = replace(cluster, pue=pue)
            jobs.append((preset, size, scenario_on(base, cluster), base.parallel, tokens, price, kwh_price, rerank,
                         asked))
    pool = make_executor(executor, scheduler, workers)
    order = longest_first(jobs)
    finished = [0]

    def on_done(i: int) -> None:
        finished[0] += 1
        if progress:
            progress(finished[0], len(jobs), str(jobs[order[i]][0]))

    try:
        if progress:
            progress(0, len(jobs), "")
        done = pool.run(_compare_one, [jobs[i] for i in order], on_done)
        rows = [row for _, row in sorted(zip(order, done, strict=True), key=lambda x: x[0])]
    except KeyboardInterrupt:
        pool.terminate()  # Ctrl-C: stop the workers now (clustersim.cli prints one line, exit 130)
        raise
    finally:
        pool.close()
    _note_unequal_nodes(rows)
    return rank_rows(rows, rank_by)


def _span(values: object, scale: float, fmt: str) -> str:
    lo, hi = values  # type: ignore[misc]
    return f"{format(lo / scale, fmt)}-{format(hi / scale, fmt)}"


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
    the scenario's); a row that cannot hold exactly that count says why under the table."""
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
    if pue is not None and not (math.isfinite(pue) and pue >= 1):
        raise InputError("--pue", pue, "a power usage effectiveness >= 1 (1.1 for a hyperscale site, 1.56 average)")
    n_tokens = parse_tokens(tokens)
    prices = parse_prices(price, presets)
    if plot:
        check_plot_path(plot)
    if html_file:
        check_html_path(html_file)
    with progress_bar(not no_progress, {"sweeps": "compare"}, "sweeps") as update:
        def progress(done: int, total: int, cluster: str) -> None:
            if update:
                update("sweeps", done, total)

        rows = compare_rows(scenario, overrides, presets, sizes, n_tokens, prices, executor, scheduler, workers,
                            rerank, price_kwh, gpu_sizes, rank_by, pue, progress)
    if plot:
        plot_compare(plot, rows, f"training {tokens} tokens: time, cost and energy (80% intervals)")
    if html_file:
        from clustersim.html.compare_page import compare_page

        raw = apply_overrides(read_scenario_dict(scenario), list(overrides))
        write_html(html_file, compare_page(rows, n_tokens, raw))
    if as_json:
        click.echo(json.dumps({"tokens": n_tokens, "rank_by": rank_by, "rows": rows}, indent=2))
        return
    table = Table(title=f"time to train {fmt_tokens(n_tokens)} tokens, cost and energy, ranked by {rank_by} "
                        f"(ranges: 80% intervals)")
    for name in ("#", "cluster", "GPUs", "best layout", "step s", "MFU", "days", "cost $M", "energy MWh",
                 "$/GPU-h", "kW"):
        table.add_column(name, justify="left" if name in ("cluster", "best layout") else "right")
    for r in rows:
        iv = r["interval"]
        table.add_row(str(r["rank"]), str(r["cluster"]), f"{r['gpus']}{'*' if r['size_note'] else ''}",
                      layout_label(r["best_layout"]),  # type: ignore[arg-type]
                      f"{r['step_time_s']:.2f} ({_span(iv['step_time_s'], 1, '.2f')})",  # type: ignore[index]
                      f"{r['mfu']:.1%}",
                      f"{float(r['time_to_train_s']) / SECONDS_PER_DAY:.1f} "  # type: ignore[arg-type]
                      f"({_span(iv['time_to_train_s'], SECONDS_PER_DAY, '.1f')})",  # type: ignore[index]
                      f"{float(r['cost_usd']) / 1e6:.2f} ({_span(iv['cost_usd'], 1e6, '.2f')})",  # type: ignore[arg-type,index]
                      f"{float(r['energy_kwh']) / 1e3:,.0f} ({_span(iv['energy_kwh'], 1e3, ',.0f')})",  # type: ignore[arg-type,index]
                      f"{r['price_per_gpu_hour_usd']:.2f}", f"{r['facility_power_kw']:,.0f}")
    out = Console(width=max(Console().width, 170))
    out.print(table)
    for r in rows:
        if r["size_note"]:
            out.print(f"* {r['cluster']}: {r['size_note']}", highlight=False)


__all__ = ["compare"]
