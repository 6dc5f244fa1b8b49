"""`clustersim compare` as rows: per cluster and size, the best layout, time to train, cost and energy.

Each cluster and size is one serial sweep (clustersim.sweep.runner) run as one task of the
executor, so that clusters run side by side; the CLI (clustersim.cli.compare_cmd) and the notebook
API (``api.compare_frame``) print or frame the rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from clustersim.energy import energy_report
from clustersim.errors import InputError
from clustersim.hardware.spec import ClusterSpec
from clustersim.scenario import Scenario, apply_overrides, read_scenario_dict
from clustersim.sweep.compare import (
    ClusterSize,
    cluster_size,
    compare_cluster,
    distinct_sizes,
    own_cluster_settings,
    parse_price_per_kwh,
    rank_rows,
    run_interval,
    scenario_on,
    stated_recipe,
    train_cost,
)
from clustersim.sweep.constraints import parse_constraints, searched_overrides
from clustersim.sweep.evaluate import KEY_FIELDS, SweepSpec
from clustersim.sweep.evaluators import Evaluators
from clustersim.sweep.executors import SerialExecutor, make_executor
from clustersim.sweep.runner import (
    NoLayoutError,
    SweepResult,
    fixed_offload,
    make_tasks,
    parallel_dict,
    run_sweep,
    scenario_space,
)
from clustersim.sweep.space import SearchSpace, layout_key
from clustersim.sweep.template import load_template


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
        raise InputError("--price-per-gpu-hour", "(not given)" if not prices else ",".join(prices),
                         f"a price for {preset}: its GPU profile has none (e.g. --price-per-gpu-hour {preset}=4.5)")
    return price


@dataclass(frozen=True, slots=True)
class Comparison:
    """``rows``: one per cluster and size that can run the job, ranked (``rank_rows``);
    ``cannot_run``: the clusters and sizes on which no layout runs it (none valid, or none fits in
    memory), in the order asked, each with the sweep's reason."""

    rows: list[dict[str, object]]
    cannot_run: list[dict[str, object]]


def _size_error(preset: str, gpus: int, nodes: int, asked: int | None, sized_by: str | None,
                reason: str) -> InputError:
    """Exit 2 for a cluster and size that cannot run the job, naming what the user gave."""
    if sized_by is None:   # the scenario's own GPU count: name the cluster, not an option never given
        return InputError("--clusters", preset, f"a cluster that can run this job on {gpus} GPUs, the "
                                                f"scenario's count ({reason}); or compare another size with "
                                                "--gpus or --nodes")
    option, value = ("--gpus", asked) if sized_by == "--gpus" else ("--nodes", nodes)
    return InputError(option, value, f"a size at which {preset} can run this job ({reason})")


def _cannot_run(preset: str, cluster: ClusterSpec, size: ClusterSize, asked: int | None,
                settings: dict[str, object], reason: str) -> dict[str, object]:
    """The entry of ``Comparison.cannot_run`` for one cluster and size (docs/output.md)."""
    return {"cluster": preset, "gpu": cluster.gpu.name, "nodes": size.nodes, "gpus": cluster.num_gpus,
            "gpus_requested": asked, "size_note": size.note, "cluster_settings": dict(settings), "cannot_run": reason}


def _compare_one(job: tuple) -> dict[str, object]:
    """One cluster and size: a serial sweep (so that clusters run side by side in the pool) and
    its best layout's time to train, cost and energy with the 80% interval; where no layout runs
    the job there, a row with ``cannot_run`` (the sweep's reason) instead. Module level: picklable."""
    (preset, size, scenario, base_parallel, tokens, price, kwh_price, rerank, asked, sized_by, settings, constraints,
     evaluators) = job
    n = size.nodes
    cluster = scenario.cluster
    try:
        space = constraints.apply(scenario_space(scenario, SearchSpace()), scenario.model)
        result = run_sweep(SweepSpec(scenario, space, constraints=constraints, evaluators=evaluators,
                                     own_layout=base_parallel is not None),
                           SerialExecutor(), rerank=rerank, keep=max(1, rerank))
    except NoLayoutError as exc:
        return {**_cannot_run(preset, cluster, size, asked, settings, exc.reason), "error": exc.allowed,
                "error_named": (exc.field, exc.value) if constraints else None}
    except InputError as exc:
        raise _size_error(preset, cluster.num_gpus, n, asked, sized_by, exc.allowed) from None
    best = result.top(1)[0]
    gpus_n = cluster.num_gpus
    tps = float(best["tokens_per_s"])  # type: ignore[arg-type]
    cost = train_cost(tokens, tps, gpus_n, price)
    step = float(best["step_time_s"])  # type: ignore[arg-type]
    power = energy_report(cluster, step, tps * step)
    energy_kwh = power.run_energy_kwh(tokens)
    own = None if base_parallel is None else own_layout_tokens_per_s(result)
    row: dict[str, object] = {
        "cluster": preset, "gpu": cluster.gpu.name, "nodes": n, "gpus": gpus_n, "gpus_requested": asked,
        "scale_up_domain": cluster.gpus_per_domain, "size_note": size.note, "cluster_settings": dict(settings),
        "best_layout": best["parallel"], "step_time_s": step, "mfu": best["mfu"],
        "tokens_per_s": tps, "tokens_per_s_per_gpu": tps / gpus_n,
        "peak_bytes_per_gpu": best["peak_bytes_per_gpu"],
        # "tight": the best layout fits only at the low end of its memory interval (its predicted
        # peak may exceed the GPU): the row says so, as the sweep's verdict does
        "memory_verdict": best["memory_verdict"], "free_bytes_per_gpu": best["free_bytes_per_gpu"],
        "scenario_layout": None if base_parallel is None else parallel_dict(layout_key(base_parallel),
                                                                             base_parallel.global_batch,
                                                                             base_parallel.cp_comm),
        "scenario_layout_tokens_per_s_per_gpu": None if own is None else own / gpus_n,
        "tokens": tokens, "time_to_train_s": cost.time_to_train_s, "gpu_hours": cost.gpu_hours,
        "price_per_gpu_hour_usd": price, "gpu_cost_usd": cost.cost_usd,
        "facility_power_kw": power.facility_power_w / 1e3, "pue": power.pue,
        "energy_kwh": energy_kwh, "price_per_kwh_usd": kwh_price,
        "energy_cost_usd": energy_kwh * kwh_price, "cost_usd": cost.cost_usd + energy_kwh * kwh_price,
        "layouts_evaluated": result.evaluated, "layouts_feasible": result.fitting,
        # the scenario's parallel.offload held fixed on every layout (clustersim.sweep.runner.scenario_space)
        "fixed_offload": fixed_offload(scenario, space)[0],
    }
    best_iv = best["interval"]  # clustersim.uncertainty.step_interval of the best layout
    lo, hi = best_iv["step_time_s"]  # type: ignore[index]
    row["interval"] = run_interval(float(best_iv["level"]), lo, hi, row)  # type: ignore[index]
    # what the interval rests on (clustersim.uncertainty), beside it: the interval holds only the contract's keys
    row["interval_regime"] = best_iv["regime"]  # type: ignore[index]
    row["interval_validated"] = best_iv["validated"]  # type: ignore[index]
    row["interval_widened_for"] = best_iv["widened_for"]  # type: ignore[index]
    row["interval_evidence_runs"] = best_iv["evidence_runs"]  # type: ignore[index]
    return row


def expected_work(scenario: Scenario, evaluators: Evaluators) -> float:
    """What a compare job is expected to cost, to start the longest first: its layouts times the
    GPU's dense peak. A faster GPU shrinks compute against communication, so more layouts come
    within the bound's gap of the best and its branch and bound runs the closed form longer
    (measured 2026-11-23 on Llama-3-70B: 623 closed-form runs on dgx-b200 against 4-154 on the
    others). Only the order in which the pool starts the jobs follows it (longest-processing-
    time-first list scheduling, Graham 1969); the rows come back in the jobs' order."""
    spec = SweepSpec(scenario, scenario_space(scenario, SearchSpace()), evaluators=evaluators)
    return float(sum(make_tasks(spec, 1)[1])) * scenario.cluster.gpu.peak(scenario.training.dtype)


def longest_first(jobs: list[tuple]) -> list[int]:
    """Job indices by ``expected_work``, largest first (ties: the given order)."""
    work = [expected_work(job[2], job[-1]) for job in jobs]
    return sorted(range(len(jobs)), key=lambda i: (-work[i], i))


def _sizes(preset: str, nodes: list[int] | None, gpus: list[int],
           settings: dict[str, object]) -> list[tuple[ClusterSize, int | None]]:
    """(size, the GPU count asked for or None for --nodes) of each requested size of ``preset``."""
    if nodes:
        return [(cluster_size(preset, nodes=n, settings=settings), None) for n in nodes]
    return list(distinct_sizes(preset, gpus, settings))


def note_unequal_nodes(rows: list[dict[str, object]]) -> None:
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
                 progress: Callable[[int, int, str], None] | None = None, *,
                 evaluators: Evaluators) -> Comparison:
    """One row per cluster and size: the best layout, time to train, cost and energy with intervals.

    Sizes: ``nodes`` (node counts), else ``gpus`` (GPU counts), else the scenario's GPU count: the
    same GPU count on every cluster (``cluster_size``; a row whose cluster cannot hold exactly that
    count says why in ``size_note``). Each cluster and size is one task of the executor (a serial
    sweep inside it): clusters run side by side, which costs less than spreading each small sweep
    over the pool. ``progress(done, total, cluster)`` is called as each finishes; ``evaluators``:
    the closed form and the event engine of every sweep (clustersim.api.SWEEP_EVALUATORS).

    A cluster and size on which no layout runs the job is listed in ``cannot_run`` and the others
    are still compared; where none can run it, InputError (exit 2) names the first."""
    from clustersim.sweep.runner import check_uniform

    raw = apply_overrides(read_scenario_dict(scenario_path), list(overrides))
    base, own = load_template(raw)
    check_uniform(base)
    # --set on a searched dimension constrains every cluster's search, as sweep's --set does (it was
    # applied to the template only, which the search then left: `--set parallel.tp=2` changed nothing)
    fixes, _ = searched_overrides(overrides)
    constraints = parse_constraints(base.model, (), (), fixes)
    own_preset, own_settings = own_cluster_settings(raw)
    kwh_price = parse_price_per_kwh(price_per_kwh)
    recipe = stated_recipe(raw)
    jobs = []
    unfit: dict[int, tuple[dict[str, object], InputError]] = {}   # position among the rows -> why, the error
    for preset in clusters:
        settings = own_settings if preset == own_preset else {}
        for size, asked in _sizes(preset, nodes, gpus or [base.cluster.num_gpus], settings):
            cluster = compare_cluster(preset, size, settings)
            if pue is not None:   # before the scenario is built on the cluster: its energy reads the PUE there
                cluster = replace(cluster, pue=pue)
            try:   # the job's dtype or recipe this GPU does not run: that cluster cannot, the others are compared
                scenario = scenario_on(base, cluster, recipe)
            except InputError as exc:
                if not exc.field.startswith("training."):
                    raise
                unfit[len(jobs) + len(unfit)] = (_cannot_run(
                    preset, cluster, size, asked, settings,
                    f"{exc.field} {exc.value} does not run on {cluster.gpu.name}: {exc.allowed}"), exc)
                continue
            price = _price(preset, prices, cluster.gpu.price_per_gpu_hour_usd)
            jobs.append((preset, size, scenario, base.parallel if own else None, tokens, price,
                         kwh_price, rerank,
                         asked, "--nodes" if nodes else "--gpus" if gpus else None, settings, constraints,
                         evaluators))
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
        done = pool.run(_compare_one, [jobs[i] for i in order], on_done) if jobs else []
        ran = iter([row for _, row in sorted(zip(order, done, strict=True), key=lambda x: x[0])])
        results = [unfit[i][0] if i in unfit else next(ran) for i in range(len(jobs) + len(unfit))]
    except KeyboardInterrupt:
        pool.terminate()  # Ctrl-C: stop the workers now (clustersim.cli prints one line, exit 130)
        raise
    finally:
        pool.close()
    rows = [r for r in results if "cannot_run" not in r]
    if not rows:   # no cluster can: exit 2 naming the first, as a single cluster's sweep would
        if 0 in unfit:
            raise unfit[0][1]
        first, job = results[0], jobs[0]
        named = first.get("error_named")
        if named and named[0] != "--gpus":   # the --set/--fix/--max constraints left no layout: name them
            raise InputError(named[0], named[1], str(first["error"]))
        raise _size_error(str(first["cluster"]), int(first["gpus"]), int(first["nodes"]),  # type: ignore[call-overload]
                          job[8], job[9], str(first["error"]))
    cannot = [{k: v for k, v in r.items() if k not in ("error", "error_named")} for r in results if "cannot_run" in r]
    note_unequal_nodes(rows)
    return Comparison(rank_rows(rows, rank_by), cannot)
