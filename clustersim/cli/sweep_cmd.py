"""`clustersim sweep`: the fastest layouts of a scenario's model on its cluster that fit in memory."""

from __future__ import annotations

import json
import time

import click
from rich.console import Console
from rich.table import Table

from clustersim.cli.progress import progress_bar
from clustersim.errors import Interrupted
from clustersim.html import check_html_path, write_html
from clustersim.limits import MAX_RERANK, MAX_TOP
from clustersim.scenario import apply_overrides, read_scenario_dict, scenario_from_dict
from clustersim.sweep.executors import EXECUTORS, make_executor
from clustersim.sweep.output import check_table_path, write_table
from clustersim.sweep.plot import check_plot_path, plot_result
from clustersim.sweep.runner import SweepResult, run_sweep, sweep_spec
from clustersim.sweep.space import SearchSpace

GiB = 2**30


def top_table(rows: list[dict], title: str) -> Table:
    table = Table(title=title)
    for name in ("#", "tp", "pp", "dp", "cp", "mb", "zero", "recompute", "sp", "schedule", "step s (80%)", "MFU",
                 "tokens/s", "peak GiB", "regime", "engine"):
        table.add_column(name, justify="left" if name in ("recompute", "schedule", "engine", "regime") else "right")
    for i, row in enumerate(rows, start=1):
        p = row["parallel"]
        iv = row["interval"]
        sched = p["schedule"] + (f" v{p['virtual_stages']}" if p["virtual_stages"] > 1 else "")
        lo, hi = iv["step_time_s"]
        regime = iv["regime"] + ("" if iv["validated"] else " (not validated)")
        table.add_row(str(i), str(p["tp"]), str(p["pp"]), str(p["dp"]), str(p["cp"]), str(p["micro_batch"]),
                      str(p["zero_stage"]), p["recompute"], "y" if p["sequence_parallel"] else "n", sched,
                      f"{row['step_time_s']:.3f} ({lo:.3f}-{hi:.3f})", f"{row['mfu']:.1%}",
                      f"{row['tokens_per_s']:,.0f}",
                      f"{row['peak_bytes_per_gpu'] / GiB:.1f}" + (" tight" if row["memory_verdict"] == "tight" else ""),
                      regime, row["engine"])
    return table


def verdict(result: SweepResult, rows: list[dict]) -> list[str]:
    """What the intervals say about the ranking: which top layouts the winner cannot be told
    apart from, and whether the winner's regime is validated by measured runs."""
    if not rows:
        return []
    lines = []
    tied = result.indistinguishable(rows)
    if tied:
        lines.append(f"layouts {', '.join(f'#{i + 1}' for i in tied)} are indistinguishable from #1 within their "
                     f"{rows[0]['interval']['level']:.0%} intervals (the step-time intervals overlap)")
    else:
        lines.append("#1 is faster than every other listed layout beyond their 80% intervals")
    iv = rows[0]["interval"]
    if iv["validated"]:
        lines.append(f"#1's regime ({iv['regime']}) is validated by {iv['evidence_runs']} measured runs")
    else:
        lines.append(f"#1's regime ({iv['regime']}) is NOT validated: " + "; ".join(iv["widened_for"]
                     or [f"{iv['evidence_runs']} measured runs"]))
    return lines


@click.command("sweep")
@click.argument("scenario", required=False, type=click.Path(dir_okay=False))
@click.option("--gpus", type=click.IntRange(min=1), help="Sweep on N GPUs of the scenario's cluster type.")
@click.option("--top", "top_k", type=click.IntRange(min=1, max=MAX_TOP), default=10, show_default=True, help="Layouts to print.")
@click.option("--out", type=click.Path(dir_okay=False), help="Write every evaluated layout (.csv or .parquet).")
@click.option("--plot", type=click.Path(dir_okay=False), help="Plot tokens/s against peak memory (.png/.svg/.pdf).")
@click.option("--html", "html_file", type=click.Path(dir_okay=False),
              help="Write a self-contained HTML page: the Pareto front and the top layouts.")
@click.option("--executor", type=click.Choice(EXECUTORS), default="local", show_default=True,
              help="local: a process pool on this machine; dask: a Dask cluster; serial: this process.")
@click.option("--scheduler", metavar="ADDRESS", help="Dask scheduler (tcp://host:8786); default: a LocalCluster.")
@click.option("--workers", type=click.IntRange(min=1), help="Worker processes (default: all cores).")
@click.option("--rerank", type=click.IntRange(min=0, max=MAX_RERANK), default=8, show_default=True,
              help="Best layouts re-ranked with the event engine (plus the scenario's own layout).")
@click.option("--pareto/--no-pareto", default=False, show_default=True,
              help="Also evaluate every layout that could be on the memory/throughput Pareto front.")
@click.option("--allow-tp-across-nodes", is_flag=True, help="Let tensor parallelism span nodes.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario field.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--profile", "profiles", multiple=True, type=click.Path(dir_okay=False),
              help="Extra hardware profile YAML (e.g. one written by `clustersim calibrate`).")
def sweep(scenario: str | None, gpus: int | None, top_k: int, out: str | None, plot: str | None,
          html_file: str | None, executor: str,
          scheduler: str | None, workers: int | None, rerank: int, pareto: bool, allow_tp_across_nodes: bool,
          overrides: tuple[str, ...], no_progress: bool, as_json: bool, profiles: tuple[str, ...]) -> None:
    """Rank every valid layout of SCENARIO's model on its cluster by tokens/s.

    Layouts that do not fit in GPU memory are pruned first; the rest are evaluated in closed form
    and the best are re-ranked with the event engine. Parallel degrees, micro-batch, ZeRO stage,
    recompute, sequence parallelism, schedule and virtual stages are searched; the global batch,
    dtype and overlap options come from the scenario.
    """
    from clustersim.hardware.load import use_profiles
    use_profiles(profiles)
    if out:
        check_table_path(out)
    if plot:
        check_plot_path(plot)
    if html_file:
        check_html_path(html_file)
    raw = apply_overrides(read_scenario_dict(scenario), list(overrides))
    spec = sweep_spec(scenario_from_dict(raw), gpus, SearchSpace(allow_tp_across_nodes=allow_tp_across_nodes))
    started = time.perf_counter()
    pool = make_executor(executor, scheduler, workers)
    written: list[str] = []
    try:
        try:
            with progress_bar(not no_progress) as update:
                result = run_sweep(spec, pool, rerank=rerank, keep=top_k, pareto=pareto, progress=update)
        except KeyboardInterrupt:
            pool.terminate()
            raise
        finally:
            pool.close()
        elapsed_s = time.perf_counter() - started
        if out:
            write_table(result.to_frame(), out)  # atomic: the whole table or no file
            written.append(out)
        s = spec.scenario
        title = f"{s.model.name} on {s.cluster.num_gpus} GPUs ({s.cluster.name}), global batch {s.parallel.global_batch}"
        if plot:
            plot_result(result, plot, title)
            written.append(plot)
        if html_file:
            from clustersim.html.sweep_page import sweep_page

            write_html(html_file, sweep_page(result, top_k, raw))
            written.append(html_file)
    except KeyboardInterrupt:
        missing = [f for f in (out, plot, html_file) if f and f not in written]
        raise Interrupted("sweep stopped" + (f"; {' and '.join(missing)} not written" if missing else "")
                          + (f"; {' and '.join(written)} written in full" if written else "")) from None
    click.echo(f"swept {result.evaluated} layouts ({result.fitting} fit in memory, {result.estimated} in closed "
               f"form, {result.simulated} in the event engine) in {elapsed_s:.1f} s "
               f"({result.evaluated / elapsed_s:,.0f} layouts/s) on {executor}", err=True)
    rows = result.top(top_k)
    if as_json:
        click.echo(json.dumps({"evaluated": result.evaluated, "feasible": result.fitting,
                               "estimated": result.estimated, "simulated": result.simulated,
                               "gpus": s.cluster.num_gpus, "cluster": s.cluster.name, "model": s.model.name,
                               "top": rows, "indistinguishable_from_best": [i + 1 for i in result.indistinguishable(rows)],
                               "verdict": verdict(result, rows)}, indent=2))
        return
    Console(width=max(Console().width, 170)).print(top_table(rows, title))
    for line in verdict(result, rows):
        click.echo(line)
