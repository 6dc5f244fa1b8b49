"""Public entry points."""

from __future__ import annotations

import functools
import numbers
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import clustersim.html.notebook  # noqa: F401  (attaches StepReport._repr_html_)
from clustersim.collectives import plan_collective
from clustersim.compute import model_flops_per_step
from clustersim.engine.selector import time_plan
from clustersim.engine.timeline import SimResult, StepResult
from clustersim.errors import InputError
from clustersim.parallel.pipeline import build_schedule, stage_graph, validate_schedule
from clustersim.parallel.zb_auto import StageCosts
from clustersim.perrank import hetero
from clustersim.perrank.hetero import balanced
from clustersim.perrank.run import per_rank_mode, time_per_rank
from clustersim.plan.actions import step_schedule
from clustersim.plan.budget import check_step_budget
from clustersim.plan.memory_plan import InFlight, held_after_b, rank_memory, schedule_in_flight, worst_stage
from clustersim.plan.plan_cache import PlanCache
from clustersim.plan.schedule_costs import schedule_costs
from clustersim.report import StepReport
from clustersim.scenario import Scenario, check_layout, check_recompute, load_scenario, scenario_from_dict
from clustersim.sweep.evaluators import Evaluators

if TYPE_CHECKING:
    import pandas as pd

    from clustersim.sweep.result import SweepResult

__all__ = ["StepReport", "compare_frame", "estimate", "load_scenario", "plan_collective", "report_html",
           "scenario_from_dict", "simulate", "simulate_with_timeline", "sweep", "sweep_frame"]


def _schedule(scenario: Scenario):
    par = scenario.parallel
    schedule = _validated_schedule(par.schedule, par.pp, par.num_micro_batches, par.virtual_stages,
                                   schedule_costs(scenario))
    return step_schedule(scenario) if par.overlap_moe_expert_parallel_comm else schedule


@functools.lru_cache(maxsize=256)
def _validated_schedule(kind: str, pp: int, num_micro_batches: int, virtual_stages: int,
                        costs: StageCosts | None = None):
    """The schedule, validated once (memoised: a pure function of integers, and of zb-2p's stage
    times; simulate and estimate ask for the same one)."""
    schedule = build_schedule(kind, pp, num_micro_batches, virtual_stages, costs)
    validate_schedule(schedule, pp, num_micro_batches, virtual_stages,
                      graph=stage_graph(kind, pp, virtual_stages, num_micro_batches))
    return schedule


@functools.lru_cache(maxsize=256)
def _validated_in_flight(kind: str, pp: int, num_micro_batches: int, virtual_stages: int,
                         costs: StageCosts | None = None) -> tuple[InFlight, ...]:
    """Each rank's peaks of activations held under the validated schedule (memoised with it: a
    pure function of the same arguments)."""
    chunks = stage_graph(kind, pp, virtual_stages, num_micro_batches).chunks
    return schedule_in_flight(_validated_schedule(kind, pp, num_micro_batches, virtual_stages, costs), chunks,
                              held_after_b(costs.memory if costs else None))


def _report(scenario: Scenario, engine: str, step_time_s: float, breakdown: dict[str, float],
            critical_rank: int, analytical_s: float | None = None, per_rank: dict | None = None) -> StepReport:
    if scenario.node_groups:
        memories = _mixed_memory(scenario)
        worst = worst_stage(memories)
    else:
        par = scenario.parallel
        held = None if par.overlap_moe_expert_parallel_comm else _validated_in_flight(
            par.schedule, par.pp, par.num_micro_batches, par.virtual_stages, schedule_costs(scenario))
        memories = rank_memory(scenario, _schedule(scenario), held)
        worst = worst_stage(memories)
    flops = model_flops_per_step(scenario.model, scenario.parallel.global_batch)
    if per_rank:
        per_rank = {**per_rank, "critical_class": critical_rank // scenario.parallel.pp}
    return StepReport(scenario, engine, step_time_s, flops, breakdown, worst, memories,
                      critical_rank % scenario.parallel.pp, analytical_s, per_rank)


def _mixed_memory(scenario: Scenario):
    """Per pipeline stage, the memory of its GPUs with the least memory (mixed GPUs), with the
    schedule of the replica that runs the most micro-batches."""
    par = scenario.parallel
    m = max(scenario.micro_batches_per_replica or (par.num_micro_batches,))
    costs = schedule_costs(scenario)
    schedule = _validated_schedule(par.schedule, par.pp, m, par.virtual_stages, costs)
    held = _validated_in_flight(par.schedule, par.pp, m, par.virtual_stages, costs)
    by_variant = [rank_memory(v, schedule, held) for v in hetero.variants(scenario)]
    out = []
    for p in range(par.pp):
        groups = {g for d in range(par.dp) for g in hetero.stage_groups(scenario, d, p)}
        out.append(min((by_variant[g][p] for g in groups), key=lambda r: r.capacity_bytes_per_gpu - r.peak_bytes_per_gpu))
    return tuple(out)


def _time(scenario: Scenario, engine: str, cache: PlanCache,
          record: bool = False) -> tuple[StepResult, dict[str, Any] | None]:
    """One step through ``engine``'s timing model (clustersim.engine.selector): per-rank mode's plan
    of rank classes (with what the report says about it), else the representative plan."""
    if per_rank_mode(scenario):
        return time_per_rank(scenario, engine, record, cache)
    return time_plan(cache.step_plan(scenario), engine, record), None


def simulate_with_timeline(scenario: Scenario, record: bool = True,
                           cache: PlanCache | None = None) -> tuple[StepReport, SimResult]:
    """The event-driven simulation and its raw result (timeline for traces). ``cache``: the run's
    memo of plans (clustersim.plan.plan_cache), kept by a caller that asks again; None: this call's own."""
    cache = cache or PlanCache()
    scenario = balanced(_as_scenario(scenario))
    check_step_budget(scenario, "event", cache.compiler)
    _schedule(scenario)
    result, info = _time(scenario, "event", cache, record)
    closed, _ = _time(scenario, "analytical", cache)
    assert isinstance(result, SimResult)
    report = _report(scenario, "event", result.step_time_s, result.breakdown, result.critical_rank,
                     closed.step_time_s, info)
    return report, result


def simulate(scenario: Scenario | str | Path | None, cache: PlanCache | None = None) -> StepReport:
    """One step through the event engine (contention on shared links included); ``scenario`` a
    Scenario, a scenario file or None (the embedded default)."""
    return simulate_with_timeline(_as_scenario(scenario), record=False, cache=_cache(cache))[0]


def _cache(cache: object) -> PlanCache | None:
    if cache is not None and not isinstance(cache, PlanCache):
        raise InputError("cache", type(cache).__name__, "a PlanCache (clustersim.plan.plan_cache), or None")
    return cache


def estimate(scenario: Scenario | str | Path | None, cache: PlanCache | None = None) -> StepReport:
    """One step through the closed-form twin (no contention): fast, for sweeps. ``scenario`` as
    for ``simulate``, ``cache`` as for ``simulate_with_timeline``."""
    cache = _cache(cache) or PlanCache()
    scenario = balanced(_as_scenario(scenario))
    check_step_budget(scenario, "analytical", cache.compiler)
    _schedule(scenario)
    closed, info = _time(scenario, "analytical", cache)
    return _report(scenario, "analytical", closed.step_time_s, closed.breakdown, closed.critical_rank,
                   per_rank=info)


# What sweeps and comparisons evaluate layouts with: the sweep sits below this module and imports
# no timing model (docs/ARCHITECTURE.md), so its callers pass these in. ``estimate`` is the closed
# form the sweep's bounds are derived from, and reads ZeRO-1 and ZeRO-2 alike for time.
SWEEP_EVALUATORS = Evaluators(estimate=estimate, simulate=simulate, bounds_hold=True,
                              zero_twins_share_time=True)


# ---------------------------------------------------------------------------------------------
# notebooks: DataFrames and pages

def _as_scenario(scenario: Scenario | str | Path | None) -> Scenario:
    if isinstance(scenario, Scenario):
        # a Scenario built or changed in code (dataclasses.replace) meets the loader's layout rules
        # too: micro_batch 3 under global_batch 64 ran 60 samples and reported 64's tokens/s
        check_layout(scenario.model, scenario.cluster, scenario.parallel)
        check_recompute(scenario.model, scenario.parallel)
        return scenario
    if scenario is None or isinstance(scenario, (str, Path)):
        return load_scenario(scenario)
    raise InputError("scenario", type(scenario).__name__, "a Scenario, a scenario file path, or None (the default)")


# The public functions' arguments, checked as the command line's options are (click's ranges and
# types), naming the parameter the caller passed.

def _int_arg(name: str, value: object, lo: int, hi: int | None = None, none_ok: bool = False) -> int | None:
    """A whole number (numpy's too: a notebook's numbers often come from a DataFrame)."""
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < lo \
            or (hi is not None and value > hi):
        span = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise InputError(name, value, f"a whole number {span}" + (" or None" if none_ok else ""))
    return int(value)


def _str_items(name: str, value: object) -> list[str]:
    """A sequence of strings (one string is one item, not its characters)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return list(value)
    raise InputError(name, value, "a string or a list of strings")


def _bool_arg(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InputError(name, value, "True or False")
    return value


def _prices(value: object, presets: list[str]) -> dict[str, float]:
    """``compare_frame``'s prices with the command line's checks: one price for every cluster, or a
    price per cluster compared, each a finite number >= 0."""
    import math

    def one(v: object, where: object) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise InputError("prices", where, "USD per GPU-hour: a finite number >= 0, or {preset: price} of "
                             "the clusters compared")
        return float(v)

    if value is None:
        return {}
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if k not in presets:
                raise InputError("prices", k, f"a cluster compared: {', '.join(presets)}")
            out[str(k)] = one(v, f"{k}={v!r}")
        return out
    price = one(value, value)
    return {c: price for c in presets}


def sweep(scenario: Scenario | str | Path | None = None, *, gpus: int | None = None, top: int = 10,
          rerank: int | None = None, pareto: bool = False, executor: str = "local", workers: int | None = None,
          rank_by: str = "time", fix: Sequence[str] = (), at_most: Sequence[str] = (),
          only_validated: bool = False) -> SweepResult:
    """`clustersim sweep` as a function: every layout of the scenario's model on its cluster
    (resized to ``gpus``), ranked by ``rank_by`` (time, p90, cost, memory-headroom) within the
    constraints (``fix``/``at_most``: ``"parallel.cp=1"`` items as for ``--fix``/``--max``). The result
    shows its top rows in Jupyter; ``.top(k)`` gives them as ``--json`` does, ``.to_frame()``
    every layout as a DataFrame; ``rerank`` defaults to ``top``, at most 8 (as the command line)."""
    import clustersim.html.sweep_notebook  # noqa: F401  (attaches SweepResult._repr_html_)
    from clustersim.limits import MAX_RERANK, MAX_TOP
    from clustersim.scenario import read_scenario_dict
    from clustersim.sweep.constraints import parse_constraints
    from clustersim.sweep.executors import make_executor
    from clustersim.sweep.runner import run_sweep, sweep_spec
    from clustersim.sweep.template import load_template

    own = True
    if isinstance(scenario, Scenario):
        base = _as_scenario(scenario)
    elif scenario is None or isinstance(scenario, (str, Path)):
        # a file whose stated layout does not fit its cluster is a template, as `clustersim sweep`
        # reads it (docs/sweep.md): the model, cluster and batch are kept, the layout searched
        base, own = load_template(read_scenario_dict(scenario))
    else:
        raise InputError("scenario", type(scenario).__name__, "a Scenario, a scenario file path, or None")
    gpus = _int_arg("gpus", gpus, 1, none_ok=True)
    top = _int_arg("top", top, 1, MAX_TOP)  # type: ignore[assignment]
    rerank = _int_arg("rerank", rerank, 0, MAX_RERANK, none_ok=True)
    workers = _int_arg("workers", workers, 1, none_ok=True)
    constraints = parse_constraints(base.model, _str_items("fix", fix), _str_items("at_most", at_most), (),
                                    _bool_arg("only_validated", only_validated))
    spec = sweep_spec(base, gpus, None, constraints, evaluators=SWEEP_EVALUATORS, own_layout=own)
    pool = make_executor(executor, None, workers)
    try:
        return run_sweep(spec, pool, rerank=rerank, keep=top, pareto=pareto, rank_by=rank_by, find_plain=True)
    finally:
        pool.close()


def sweep_frame(scenario: Scenario | str | Path | None = None, **options: Any) -> pd.DataFrame:
    """Every screened layout of a sweep, best first (the columns of `clustersim sweep --out`;
    ``rank`` 0 marks layouts that do not fit or were bounded out). Options as for ``sweep``."""
    return sweep(scenario, **options).to_frame()


def compare_frame(scenario: str | Path | None = None, clusters: Sequence[str] = ("dgx-a100", "dgx-h100"), *,
                  nodes: Sequence[int] | None = None, tokens: str | float = "1T",
                  prices: Mapping[str, float] | float | None = None, overrides: Sequence[str] = (),
                  executor: str = "local", workers: int | None = None, rerank: int = 1) -> pd.DataFrame:
    """`clustersim compare` as a DataFrame: one row per cluster and node count with its best
    layout (``best_layout.tp`` ...), step time, MFU, time to train, GPU-hours and cost (and the
    ``*_lo``/``*_hi`` columns of a row's interval, ``energy_kwh``, where the rows carry them); a
    cluster and size on which no layout runs the job comes last, its ``cannot_run`` the reason and
    its numbers empty. ``scenario`` is a scenario file (or None: the embedded default), ``overrides``
    its ``--set``; the defaults are the command's (``rerank`` 1)."""
    from clustersim.hardware.load import list_clusters
    from clustersim.limits import MAX_RERANK
    from clustersim.sweep.compare import check_compare_size, parse_tokens
    from clustersim.sweep.compare_rows import compare_rows

    if scenario is not None and not isinstance(scenario, (str, Path)):
        raise InputError("scenario", type(scenario).__name__, "a scenario file path, or None (the default)")
    presets = _str_items("clusters", clusters)
    if not presets or len(set(presets)) != len(presets):
        raise InputError("clusters", clusters, "one or more cluster presets, each once")
    known = list_clusters()
    for name in presets:
        if name not in known:
            raise InputError("clusters", name, known)
    sizes = None
    if nodes is not None:
        sizes = [nodes] if isinstance(nodes, numbers.Integral) and not isinstance(nodes, bool) else nodes
        if hasattr(sizes, "tolist"):   # a numpy array
            sizes = sizes.tolist()
        if not isinstance(sizes, Sequence) or not sizes:
            raise InputError("nodes", nodes, "a node count or a list of them")
        sizes = [_int_arg("nodes", n, 1) for n in sizes]
    check_compare_size(presets, sizes)
    rerank = _int_arg("rerank", rerank, 1, MAX_RERANK)  # type: ignore[assignment]
    workers = _int_arg("workers", workers, 1, none_ok=True)
    comparison = compare_rows(None if scenario is None else str(scenario), tuple(_str_items("overrides", overrides)),
                              presets, sizes, parse_tokens(tokens), _prices(prices, presets), executor, None, workers,
                              rerank, evaluators=SWEEP_EVALUATORS)
    return rows_frame(comparison.rows + comparison.cannot_run)


def rows_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Comparison rows as a flat DataFrame: nested layouts become ``best_layout.tp`` ..., a row's
    ``interval`` becomes ``QUANTITY_lo``/``QUANTITY_hi`` columns; ``layout`` is the short form."""
    import pandas as pd

    from clustersim.html.sweep_page import layout_label

    flat: list[dict[str, Any]] = []
    for row in rows:
        out: dict[str, Any] = {}
        for key, value in row.items():
            if key == "interval" and isinstance(value, Mapping):
                for q, v in value.items():
                    if isinstance(v, (list, tuple)) and len(v) == 2:
                        out[f"{q}_lo"], out[f"{q}_hi"] = v
                    else:
                        out[f"interval.{q}"] = v
            elif isinstance(value, Mapping):
                out.update({f"{key}.{k}": v for k, v in value.items()})
            else:
                out[key] = value
        if isinstance(row.get("best_layout"), Mapping):
            out["layout"] = layout_label(row["best_layout"])
        flat.append(out)
    return pd.DataFrame(flat)


def report_html(report: StepReport, timeline: Any = None, scenario: Mapping[str, Any] | None = None) -> str:
    """The page `clustersim run --html` writes, as a string (``timeline``: ``SimResult.timeline``
    from ``simulate_with_timeline``; ``scenario``: the scenario mapping to show as YAML)."""
    from clustersim.html.run_page import run_page

    if not isinstance(report, StepReport):
        raise InputError("report", type(report).__name__, "a StepReport (api.estimate, api.simulate)")
    if timeline is not None and not hasattr(timeline, "record"):
        raise InputError("timeline", type(timeline).__name__, "a Timeline (simulate_with_timeline(...)[1].timeline) "
                         "or None")
    if isinstance(scenario, Scenario):
        raise InputError("scenario", "a Scenario", "the scenario as a mapping (its YAML, as read_scenario_dict "
                         "gives it), or None")
    if scenario is not None and not isinstance(scenario, Mapping):
        raise InputError("scenario", type(scenario).__name__, "a mapping (read_scenario_dict), or None")
    return run_page(report, timeline, scenario)
