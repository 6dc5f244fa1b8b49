"""`clustersim sweep`: the fastest layouts of a scenario's model on its cluster that fit in memory."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import click
from rich.console import Console
from rich.table import Table

from clustersim.cli.progress import progress_bar
from clustersim.errors import InputError, Interrupted
from clustersim.html import check_html_path, write_html
from clustersim.limits import MAX_RERANK, MAX_TOP
from clustersim.scenario import Scenario, apply_overrides, read_scenario_dict, scenario_from_dict
from clustersim.sweep.constraints import parse_constraints, searched_overrides
from clustersim.sweep.evaluate import SweepSpec
from clustersim.sweep.executors import EXECUTORS, make_executor
from clustersim.sweep.objective import RANK_BY, RANK_BY_HELP
from clustersim.sweep.output import check_table_path, write_table
from clustersim.sweep.plot import check_plot_path, plot_result
from clustersim.sweep.runner import fixed_offload, held_recompute_line, run_sweep, sweep_spec
from clustersim.sweep.space import SearchSpace
from clustersim.sweep.template import load_template
from clustersim.sweep.verdict import verdict

GiB = 2**30


_METRIC_HEADERS = {"p90_step_time_s": "p90 s", "cost_usd_per_million_tokens": "USD/Mtok",
                   "gpu_hours_per_million_tokens": "GPU-h/Mtok", "free_bytes_per_gpu": "free GiB"}


def _ranked_cell(field: str, row: dict) -> str:
    value = float(row[field])
    if field == "free_bytes_per_gpu":
        return f"{value / GiB:.1f}"
    return f"{value:.3f}" if field == "p90_step_time_s" else f"{value:.4g}"


def top_table(rows: list[dict], title: str, ranked_field: str = "step_time_s", moe: bool = False) -> Table:
    """The best rows, one per group: ranges where the group's layouts differ (``v3-40``, ``1|2``)."""
    table = Table(title=title)
    extra = [_METRIC_HEADERS[ranked_field]] if ranked_field != "step_time_s" else []
    names = ["#", "tp", "pp", "dp", "cp", *(["ep", "etp", "offload"] if moe else []), "mb", "zero", "recompute", "sp",
             "schedule",
             "step s (80%)", *extra, "MFU", "tokens/s", "peak GiB", "layouts", "regime", "engine"]
    for name in names:
        table.add_column(name, justify="left" if name in ("recompute", "schedule", "engine", "regime") else "right")
    for row in rows:
        p = row["parallel"]
        iv = row["interval"]
        varies = row.get("group", {}).get("varies", {})
        sched = p["schedule"] + (f" v{p['virtual_stages']}" if p["virtual_stages"] > 1 else "")
        if "virtual_stages" in varies:
            lo_v, hi_v = varies["virtual_stages"]
            sched += f" (v{lo_v}-{hi_v})"
        if p.get("pipeline_layout"):   # a split Megatron-Core builds from --pipeline-model-parallel-layout only
            sched += " +layout"
        zero = str(p["zero_stage"]) + (" (1|2)" if "zero_stage" in varies else "")
        lo, hi = iv["step_time_s"]
        regime = iv["regime"] + ("" if iv["validated"] else " (not validated)")
        cp = f"{p['cp']} {p['cp_comm']}" if int(p["cp"]) > 1 and p.get("cp_comm") else str(p["cp"])   # the exchange
        table.add_row(str(row["rank"]), str(p["tp"]), str(p["pp"]), str(p["dp"]), cp,
                      *([str(p["ep"]), str(p.get("expert_tp") or p["tp"]), "y" if p.get("offload") else "n"]
                        if moe else []), str(p["micro_batch"]), zero, p["recompute"],
                      "y" if p["sequence_parallel"] else "n", sched,
                      f"{row['step_time_s']:.3f} ({lo:.3f}-{hi:.3f})", *[_ranked_cell(ranked_field, row)] * len(extra),
                      f"{row['mfu']:.1%}", f"{row['tokens_per_s']:,.0f}",
                      f"{row['peak_bytes_per_gpu'] / GiB:.1f}" + (" tight" if row["memory_verdict"] == "tight" else ""),
                      str(row.get("group", {}).get("layouts", 1)), regime, row["engine"])
    return table


def stated_layout_lines(rows: list[dict]) -> list[str]:
    """Per stated pipeline layout among the listed rows (``+layout`` in the table: a split that
    Megatron-Core builds only from --pipeline-model-parallel-layout, sweep.result.stated_split),
    which rows run with it, so that the readable output says what the JSON's rows hold."""
    by_layout: dict[str, list[str]] = {}
    for row in rows:
        layout = row["parallel"].get("pipeline_layout")
        if layout:
            by_layout.setdefault(str(layout), []).append(f"#{row['rank']}")
    return [f"{', '.join(ranks)} +layout: parallel.pipeline_layout={layout} (Megatron-Core's "
            "--pipeline-model-parallel-layout; the split the row was priced with)"
            for layout, ranks in by_layout.items()]


def _template(scenario: str | None, overrides: tuple[str, ...]) -> tuple[dict, Scenario, list[str], bool]:
    """(the scenario as data, the scenario, the ``--set`` items on searched dimensions, whether the
    template's layout is the scenario's own: clustersim.sweep.template). Those
    constrain the sweep as ``--fix`` does; they also set the scenario's own layout (the template,
    re-ranked beside the best) where it stays valid, and leave it as it is where not (``--set
    parallel.cp=2`` on a template that fills the cluster without CP)."""
    sets, rest = searched_overrides(overrides)
    data = read_scenario_dict(scenario)
    if sets:
        try:
            raw = apply_overrides(data, [*rest, *sets])
            return raw, scenario_from_dict(raw), sets, True
        except InputError:
            pass
    raw = apply_overrides(data, rest)
    base, own = load_template(raw)   # the job's --set may leave the stated layout invalid
    return raw, base, sets, own


def sweep_of(scenario: str | None, overrides: Sequence[str], gpus: int | None, fixes: Sequence[str] = (),
             maxima: Sequence[str] = (), only_validated: bool = False, allow_tp_across_nodes: bool = False
             ) -> tuple[dict, Scenario, SweepSpec]:
    """(the scenario as data, the template, the sweep's spec) of `clustersim sweep SCENARIO --set
    OVERRIDES [--gpus GPUS] --fix FIXES --max MAXIMA`: what the command searches, and what `run`'s
    hint checks before it suggests that command (clustersim.cli.does_not_fit)."""
    from clustersim.api import SWEEP_EVALUATORS

    raw, base, sets, own = _template(scenario, tuple(overrides))
    constraints = parse_constraints(base.model, tuple(fixes), tuple(maxima), sets, only_validated)
    spec = sweep_spec(base, gpus, SearchSpace(allow_tp_across_nodes=allow_tp_across_nodes), constraints,
                      evaluators=SWEEP_EVALUATORS, own_layout=own)
    return raw, base, spec


@click.command("sweep")
@click.argument("scenario", required=False, type=click.Path(dir_okay=False))
@click.option("--gpus", type=click.IntRange(min=1), help="Sweep on N GPUs of the scenario's cluster type.")
@click.option("--top", "top_k", type=click.IntRange(min=1, max=MAX_TOP), default=10, show_default=True,
              help="Rows to print: structurally distinct layouts, each with the range of its variants.")
@click.option("--rank-by", type=click.Choice(RANK_BY), default="time", show_default=True, help=RANK_BY_HELP + ".")
@click.option("--fix", "fixes", multiple=True, metavar="KEY=VALUE",
              help="Hold a searched dimension at a value, e.g. parallel.cp=1, parallel.schedule=1f1b "
                   "(repeatable; --set on a searched dimension does the same).")
@click.option("--max", "maxima", multiple=True, metavar="KEY=VALUE",
              help="An upper bound on an integer dimension, e.g. parallel.tp=8 (repeatable).")
@click.option("--only-validated", is_flag=True,
              help="Only layouts in regimes whose interval measured runs validate (clustersim.uncertainty).")
@click.option("--out", type=click.Path(dir_okay=False), help="Write every evaluated layout (.csv or .parquet).")
@click.option("--plot", type=click.Path(dir_okay=False), help="Plot tokens/s against peak memory (.png/.svg/.pdf).")
@click.option("--html", "html_file", type=click.Path(dir_okay=False),
              help="Write a self-contained HTML page: the Pareto front and the top layouts.")
@click.option("--executor", type=click.Choice(EXECUTORS), default="local", show_default=True,
              help="local: a process pool on this machine; dask: a Dask cluster; serial: this process.")
@click.option("--scheduler", metavar="ADDRESS", help="Dask scheduler (tcp://host:8786); default: a LocalCluster.")
@click.option("--workers", type=click.IntRange(min=1), help="Worker processes (default: all cores).")
@click.option("--rerank", type=click.IntRange(min=0, max=MAX_RERANK),
              help="Best rows re-ranked with the event engine (plus the scenario's own layout) [default: --top, at most 8].")
@click.option("--pareto/--no-pareto", default=False, show_default=True,
              help="Also evaluate every layout that could be on the memory/throughput Pareto front.")
@click.option("--allow-tp-across-nodes", is_flag=True, help="Let tensor parallelism span nodes.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a scenario field; on a searched dimension (parallel.cp ...) it is a --fix.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--profile", "profiles", multiple=True, type=click.Path(dir_okay=False),
              help="Extra hardware profile YAML (e.g. one written by `clustersim calibrate`).")
def sweep(scenario: str | None, gpus: int | None, top_k: int, rank_by: str, fixes: tuple[str, ...],
          maxima: tuple[str, ...], only_validated: bool, out: str | None, plot: str | None,
          html_file: str | None, executor: str,
          scheduler: str | None, workers: int | None, rerank: int | None, pareto: bool, allow_tp_across_nodes: bool,
          overrides: tuple[str, ...], no_progress: bool, as_json: bool, profiles: tuple[str, ...]) -> None:
    """Rank the valid layouts of SCENARIO's model on its cluster (fastest first by default).

    Layouts that do not fit in GPU memory are pruned first; the rest are evaluated in closed form
    and the best are re-ranked with the event engine. Parallel degrees, micro-batch, ZeRO stage,
    recompute, sequence parallelism, schedule and virtual stages are searched; the global batch,
    dtype and overlap options come from the scenario. Each row is one structurally distinct
    layout: variants that differ only in virtual stages, or ZeRO-1/2 twins, share it (their range
    in brackets, their count under "layouts"). When #1 is not a plain 3D layout (cp 1, ZeRO 0-2,
    no offload, a GPipe, 1F1B or interleaved 1F1B schedule), a line compares it with the best
    plain 3D one. See docs/sweep.md.
    """
    from clustersim.hardware.load import use_profiles
    use_profiles(profiles)
    inputs = [p for p in (scenario, *profiles) if p is not None]
    if out is not None:
        check_table_path(out, inputs=inputs)
    if plot is not None:
        check_plot_path(plot, inputs=inputs)
    if html_file is not None:
        check_html_path(html_file, inputs=inputs)
    raw, base, spec = sweep_of(scenario, overrides, gpus, fixes, maxima, only_validated, allow_tp_across_nodes)
    constraints = spec.constraints
    started = time.perf_counter()
    pool = make_executor(executor, scheduler, workers)
    written: list[str] = []
    try:
        try:
            with progress_bar(not no_progress) as update:
                result = run_sweep(spec, pool, rerank=rerank, keep=top_k, pareto=pareto, progress=update,
                                   rank_by=rank_by, find_plain=True)
        except KeyboardInterrupt:
            pool.terminate()
            raise
        finally:
            pool.close()
        elapsed_s = time.perf_counter() - started
        if out is not None:
            write_table(result.to_frame(), out)  # atomic: the whole table or no file
            written.append(out)
        s = spec.scenario
        title = (f"{s.model.name} on {s.cluster.num_gpus} GPUs ({s.cluster.name}, {s.cluster.gpu.name}), "
                 f"global batch {s.parallel.global_batch}")
        if plot is not None:
            plot_result(result, plot, title)
            written.append(plot)
        if html_file is not None:
            from clustersim.html.sweep_page import sweep_page

            write_html(html_file, sweep_page(result, top_k, raw))
            written.append(html_file)
    except KeyboardInterrupt:
        missing = [f for f in (out, plot, html_file) if f and f not in written]
        raise Interrupted("sweep stopped" + (f"; {' and '.join(missing)} not written" if missing else "")
                          + (f"; {' and '.join(written)} written in full" if written else "")) from None
    # layouts that fit the GPUs but offload more than a node's host memory holds (memory.host's rule)
    host = (f", {result.host_unfit} more fit the GPUs but not the nodes' host memory (parallel.offload)"
            if result.host_unfit else "")
    click.echo(f"swept {result.evaluated} layouts ({result.fitting} fit in memory{host}, {result.estimated} in closed "
               f"form, {result.simulated} in the event engine) in {elapsed_s:.1f} s "
               f"({result.evaluated / elapsed_s:,.0f} layouts/s) on {executor}", err=True)
    rows = result.top(top_k)
    lines = verdict(result, rows)
    lines += stated_layout_lines(rows)
    if base.parallel.layers_per_stage and base.parallel.pp > 1:
        # sweep_spec gives the split up with the pipeline depth it belongs to: say so, the own layout differs
        lines.append(f"the scenario's pipeline split (layers per stage {list(base.parallel.layers_per_stage)}) is not "
                     "searched: every layout here, the scenario's own among them, is split evenly; `clustersim run` "
                     "times the scenario with its split")
    held, held_line = fixed_offload(s, spec.space)
    if held_line:
        lines.append(held_line)
    recompute_line = held_recompute_line(s)
    if recompute_line:
        lines.append(recompute_line)
    split = s.cluster.scale_up_domain
    if split and split != base.cluster.scale_up_domain:
        # --gpus that is no whole number of domains runs as equal parts of each (sweep.runner.resize_cluster)
        lines.append(f"{s.cluster.num_gpus} GPUs of {s.cluster.name} run as {s.cluster.num_gpus // split} x {split}: "
                     f"{split} of each {base.cluster.scale_up_domain}-GPU scale-up domain; `clustersim run` of a row "
                     f"needs --set cluster.scale_up_domain={split}")
    if as_json:
        plain = result.best_plain()
        click.echo(json.dumps({"evaluated": result.evaluated, "feasible": result.fitting,
                               "host_memory_unfit": result.host_unfit,
                               "estimated": result.estimated, "simulated": result.simulated,
                               "gpus": s.cluster.num_gpus, "cluster": s.cluster.name, "gpu": s.cluster.gpu.name,
                               "model": s.model.name,
                               "rank_by": rank_by, "ranked_field": result.ranked_field,
                               "constraints": constraints.to_json(),
                               "fixed_offload": held,
                               "groups": result.groups, "top": rows,
                               "best_plain_3d": None if plain is None else plain[1],
                               "indistinguishable_from_best": [i + 1 for i in result.indistinguishable(rows)],
                               "verdict": lines}, indent=2))
        return
    within = f"; {constraints.describe()}" if constraints else ""
    Console(width=max(Console().width, 170)).print(
        top_table(rows, f"{title}, ranked by {rank_by}{within}", result.ranked_field, s.model.is_moe))
    for line in lines:
        click.echo(line)
