"""One sweep: screen every layout, evaluate what can matter in closed form, re-rank the best.

1. **Screen** (every layout of the search space, narrowed by the constraints, in parallel tasks
   of the shapes that share unit-time classes, ``make_tasks``): exact peak memory, and a lower
   bound on the closed-form step time (clustersim.sweep.screen), at its first level (the
   compiled units). Layouts that do not fit are done.
2. **Branch and bound** with the closed form (clustersim.sweep.bnb): fitting layouts in order of
   their bound on the ranked value, until the next bound exceeds the value of the ``keep``-th
   best group found so far (and, with ``find_plain``, the best plain 3D layout's).
3. **Re-rank** the best ``rerank`` groups' rows with the event engine (``api.simulate``), plus
   the scenario's own layout when it is valid on this cluster and within the constraints, plus
   the best plain 3D row with ``find_plain``; then, while the best row is a closed-form one (the
   event engine slowed the rows above it), the best ``rerank`` rows not yet simulated, in rounds
   (twice as many rows per round after ``MAX_RERANK_ROUNDS``) until the best row is simulated, so
   that the answer is always the event engine's.
4. The ranking (clustersim.sweep.groups): group rows by the ranked value, then the other timed
   layouts, the bounded-out layouts (by bound), the layouts that do not fit. Ties are broken by
   the canonical layout key, so the order is total.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from typing import Any

import numpy as np

from clustersim.errors import InputError
from clustersim.hardware.load import check_domain
from clustersim.hardware.spec import ClusterSpec
from clustersim.limits import MAX_SWEEP_LAYOUTS, check_gpus
from clustersim.scenario import Scenario, check_layout, check_recompute
from clustersim.sweep.bnb import Progress, Target, branch_and_bound, keys_of
from clustersim.sweep.compare import (
    domain_split,
    holds_part_of_node,
    nearest_split,
    part_of_node,
    splits_well,
)
from clustersim.sweep.constraints import Constraints
from clustersim.sweep.dominance import slower_zero2
from clustersim.sweep.evaluate import (
    COL,
    COLUMNS,
    ESTIMATE_FIELDS,
    KEY_FIELDS,
    METRIC_FIELDS,
    SweepSpec,
    Task,
    estimate_keys,
    host_unfit_mask,
    screen_task,
    simulate_key,
)
from clustersim.sweep.evaluators import Evaluators
from clustersim.sweep.executors import Executor, SerialExecutor
from clustersim.sweep.groups import rank_groups
from clustersim.sweep.objective import (
    check_rank_by,
    group_codes,
    interval_factors,
    plain_mask,
    time_scale,
    validated_space,
)
from clustersim.sweep.rank import key_codes
from clustersim.sweep.result import SweepResult, parallel_dict
from clustersim.sweep.space import (
    TORCHTITAN_RECOMPUTE,
    SearchSpace,
    Shape,
    count_shape_layouts,
    layout_from_key,
    layout_key,
    micro_batch_sizes,
    shapes,
)

__all__ = ["Evaluators", "Progress", "SweepResult", "make_tasks", "parallel_dict", "run_sweep", "sweep_spec"]

TASKS_PER_WORKER = 16
N_KEY = len(KEY_FIELDS)
# rows re-ranked by default: all of ``keep`` up to this many (each is an event-engine run)
DEFAULT_RERANK = 8


def make_tasks(spec: SweepSpec, workers: int) -> tuple[list[Task], list[int]]:
    """Screening tasks and the number of layouts in each.

    A block is a shape and some of its micro-batch sizes (about ``total / (workers *
    TASKS_PER_WORKER)`` layouts at most, in canonical order); a task holds every block whose
    layouts share unit-time classes (same tp, cp, ep and expert tp: ``Screen.class_key``), so
    each worker prices a class once instead of every worker pricing most classes. Tasks come in
    the order of their first block; ``canonical_order`` restores the canonical order of rows."""
    return _tasks(spec, workers)[:2]


def _tasks(spec: SweepSpec, workers: int) -> tuple[list[Task], list[int], list[list[tuple[int, int]]]]:
    """``make_tasks`` and, per task, each of its blocks' (first canonical row, layouts)."""
    s = spec.scenario
    gb = s.parallel.global_batch
    units = [(shape, mb, count_shape_layouts(s.model, shape, gb, mb, spec.space, s.parallel.hsdp_replicas,
                                                    s.cluster.host_memory_link is not None, s.parallel.overlap_moe_expert_parallel_comm,
                                                    s.parallel))
             for shape in shapes(s.model, s.cluster, gb, spec.space, s.parallel.cp_comm)
             for mb in micro_batch_sizes(shape, gb, spec.space)]
    units = [u for u in units if u[2] > 0]
    total = sum(u[2] for u in units)
    target = max(32, math.ceil(total / max(1, workers * TASKS_PER_WORKER)))
    blocks: list[tuple[Shape, tuple[int, ...], int, int]] = []  # shape, micro-batches, layouts, first row
    row = 0
    for shape, mb, n in units:
        if blocks and blocks[-1][0] == shape and blocks[-1][2] + n <= target:
            last = blocks[-1]
            blocks[-1] = (shape, (*last[1], mb), last[2] + n, last[3])
        else:
            blocks.append((shape, (mb,), n, row))
        row += n
    grouped: dict[tuple[int, int, int, int], list[tuple[Shape, tuple[int, ...], int, int]]] = {}
    for block in blocks:
        x = block[0]
        grouped.setdefault((x.tp, x.cp, x.ep, x.etp), []).append(block)
    tasks = [Task(tuple((b[0], b[1]) for b in group)) for group in grouped.values()]
    sizes = [sum(b[2] for b in group) for group in grouped.values()]
    placed = [[(b[3], b[2]) for b in group] for group in grouped.values()]
    return tasks, sizes, placed


def canonical_order(placed: list[list[tuple[int, int]]], parts: list[np.ndarray]) -> np.ndarray:
    """The screened rows of ``parts`` (one array per task, its blocks one after another) in
    canonical order; ``placed``: per task, each block's (first canonical row, layouts)."""
    total = sum(n for blocks in placed for _, n in blocks)
    out = np.empty((total, parts[0].shape[1]))
    for part, blocks in zip(parts, placed, strict=True):
        if part.shape[0] != sum(n for _, n in blocks):
            raise RuntimeError("the screener returned another number of layouts than the space counts")
        at = 0
        for start, n in blocks:
            out[start:start + n] = part[at:at + n]
            at += n
    return out


class NoLayoutError(InputError):
    """No layout of the job runs on this cluster at this size (none valid, none within the
    constraints, or none fits in memory): a fact about one cluster, which `compare` reports as a
    row that cannot run the job instead of ending the comparison. ``reason``: that fact as a sentence."""

    def __init__(self, field: str, value: object, allowed: str, reason: str) -> None:
        super().__init__(field, value, allowed)
        self.reason = reason


def no_layout_error(spec: SweepSpec, table: np.ndarray | None) -> NoLayoutError:
    s = spec.scenario
    what = f"{s.model.name} on {s.cluster.num_gpus} GPUs of {s.cluster.name} (global_batch {s.parallel.global_batch})"
    c = spec.constraints
    if c and (table is None or table.shape[0] == 0):
        return NoLayoutError(*c.named(),
                             f"constraints that some valid layout of {what} satisfies (without them the sweep "
                             "searches tp dividing the heads inside a node, dp dividing the global batch, pp up to "
                             f"the {s.model.layers} layers; --fix parallel.schedule needs a pipeline"
                             + (f"; recompute: full rows need parallel.recompute_num_layers "
                                f"({s.parallel.recompute_num_layers}) layers in a pipeline stage"
                                if s.parallel.recompute_num_layers > 1 else "") + ")",
                             f"no valid layout of {what} satisfies the constraints ({c.describe()})")
    if table is None or table.shape[0] == 0:
        return NoLayoutError("--gpus", s.cluster.num_gpus,
                             f"a GPU count that some valid layout of {what} can use (tp dividing heads "
                             f"{s.model.heads} inside a node, dp dividing the global batch, pp <= layers "
                             f"{s.model.layers})", f"no valid layout of {what}")
    least = float(np.min(table[:, COL["peak_bytes_per_gpu"]]))
    within = f" within the constraints ({c.describe()})" if c else ""
    host_rows = np.flatnonzero(host_unfit_mask(table))
    if host_rows.size:   # some fit the GPUs: what they offload is more than a node's host memory holds
        from clustersim.sweep.screen import screen_for

        screen = screen_for(s)
        needs = []
        for i in host_rows:
            layout = layout_from_key(tuple(int(x) for x in table[i, :len(KEY_FIELDS)]), s.parallel)
            host = screen.host(layout, screen.profile(layout))
            if host is not None:
                needs.append(host.bytes_per_node)
        need = f"the least {min(needs) / 2**30:,.1f} GiB per node" if needs else "more"
        cap = s.cluster.host_memory_bytes / 2**30
        fact = (f"none of {table.shape[0]} layouts of {what}{within} fits in memory: {host_rows.size} fit the GPUs' "
                f"memory but offload (parallel.offload) more than a node's host memory holds "
                f"({need}, the node has {cap:,.0f} GiB: the cluster profile's host_memory_GiB)")
        allowed = (f"a GPU count (or parallel.offload) with which some layout fits in GPU and host memory: {fact}")
        return NoLayoutError(*(c.named() if c else ("--gpus", s.cluster.num_gpus)), allowed, fact)
    if c:   # the constraints cut what fits: name them (the GPU count may be fine without them)
        return NoLayoutError(*c.named(),
                             f"constraints under which some layout fits in memory: of {table.shape[0]} layouts of "
                             f"{what}{within}, the smallest needs {least / 2**30:.1f} GiB per GPU, the GPU has "
                             f"{s.cluster.gpu.hbm_capacity_bytes / 2**30:.1f} GiB (or more GPUs: --gpus)",
                             f"none of {table.shape[0]} layouts of {what}{within} fits in memory: the smallest "
                             f"needs {least / 2**30:.1f} GiB per GPU, the GPU has "
                             f"{s.cluster.gpu.hbm_capacity_bytes / 2**30:.1f} GiB")
    return NoLayoutError("--gpus", s.cluster.num_gpus,
                         f"a GPU count on which some layout fits in memory: of {table.shape[0]} layouts of {what}"
                         f"{within}, the smallest needs {least / 2**30:.1f} GiB per GPU, the GPU has "
                         f"{s.cluster.gpu.hbm_capacity_bytes / 2**30:.1f} GiB",
                         f"none of {table.shape[0]} layouts of {what}{within} fits in memory: the smallest needs "
                         f"{least / 2**30:.1f} GiB per GPU, the GPU has {s.cluster.gpu.hbm_capacity_bytes / 2**30:.1f} GiB")


def check_sweep_size(spec: SweepSpec, total: int) -> None:
    """InputError (exit 2) before any work when the space holds more than MAX_SWEEP_LAYOUTS layouts."""
    if total > MAX_SWEEP_LAYOUTS:
        s = spec.scenario
        raise InputError("sweep", f"{total:,} layouts of {s.model.name} on {s.cluster.num_gpus:,} GPUs "
                                  f"(global_batch {s.parallel.global_batch:,}, {s.model.layers:,} layers)",
                         f"at most {MAX_SWEEP_LAYOUTS:,} layouts per sweep (clustersim's limit, a few minutes); "
                         "sweep fewer GPUs (--gpus) or a global batch with fewer divisors (--set "
                         "parallel.global_batch=...); every layer count a pipeline stage can hold multiplies "
                         "the interleaved schedule's options")


def run_sweep(spec: SweepSpec, executor: Executor | None = None, rerank: int | None = None, keep: int = 10,
              pareto: bool = False, progress: Progress | None = None, rank_by: str = "time",
              find_plain: bool = False) -> SweepResult:
    """Screen every layout of ``spec``, evaluate what can matter, re-rank the best.

    ``keep``: how many groups (rows) the closed-form ranking must get exactly (at least
    ``rerank``, which defaults to ``keep`` up to DEFAULT_RERANK); ``rank_by``: clustersim.sweep.objective.RANK_BY;
    ``find_plain``: also find the best plain 3D layout (``objective.plain_mask``).
    Raises InputError when no layout is valid or none fits.
    """
    check_rank_by(rank_by)
    rerank = min(keep, DEFAULT_RERANK) if rerank is None else rerank
    executor = executor or SerialExecutor()
    table = screen_space(spec, executor, progress)
    scale = time_scale(rank_by, spec.scenario, table)
    if spec.zero2_dominated and rank_by != "memory-headroom":   # ZeRO-2 layouts their ZeRO-1 twin beats (dominance.py)
        table[slower_zero2(table, spec.scenario.parallel, scale), COL["bound_step_time_s"]] = math.inf
    target = Target(group_codes(table), scale, plain_mask(table) if find_plain else None)
    table, refined = branch_and_bound(spec, table, executor, max(keep, rerank, 1), pareto, progress, target)
    return _rerank(spec, table, executor, rerank, max(keep, 1), progress, refined, rank_by, scale, find_plain)


def screen_space(spec: SweepSpec, executor: Executor | None = None, progress: Progress | None = None) -> np.ndarray:
    """Step 1 (module doc): every layout of ``spec`` screened, in canonical order, as a table of
    COLUMNS. Raises InputError (exit 2) where the space is too large, no layout is valid or none
    fits (``NoLayoutError``): the rule `run`'s hint checks before it suggests a sweep."""
    executor = executor or SerialExecutor()
    workers = max(1, getattr(executor, "workers", 1))
    tasks, sizes, placed = _tasks(spec, workers)
    total = sum(sizes)
    if total == 0:
        raise no_layout_error(spec, None)
    check_sweep_size(spec, total)
    done = [0]

    def on_done(i: int) -> None:
        done[0] += sizes[i]
        if progress:
            progress("screen", done[0], total)

    if progress:
        progress("screen", 0, total)
    parts = executor.run(functools.partial(screen_task, spec), tasks, on_done)
    screened = canonical_order(placed, parts)
    if spec.constraints.only_validated:  # what the space's cut left of unvalidated regimes (none today)
        screened = screened[interval_factors(spec.scenario, screened)[1]]
        if screened.shape[0] == 0:
            raise no_layout_error(spec, None)
    table = np.full((screened.shape[0], len(COLUMNS)), np.nan)
    table[:, : screened.shape[1]] = screened
    if not (table[:, COL["fits"]] == 1.0).any():
        raise no_layout_error(spec, table)
    return table


def why_none_fits(spec: SweepSpec) -> str | None:
    """Why the sweep of ``spec`` would exit 2 before ranking a layout (``screen_space``: the space
    too large, no layout valid, none that fits in memory), or None where some layout fits: the rule
    `run`'s exit-3 hint checks before it suggests the sweep (clustersim.cli.does_not_fit). The layouts
    that need the least memory of each grid (full recompute, micro-batch 1, 1F1B) are screened first,
    a small part of the space: where one fits, the sweep has it; else the whole space decides."""
    try:
        check_sweep_size(spec, sum(_tasks(spec, 1)[1]))
        space = spec.space
        lean = replace(space, recompute=tuple(r for r in space.recompute if r == "full") or space.recompute,
                       schedules=tuple(s for s in space.schedules if s == "1f1b") or space.schedules,
                       limits=(*space.limits, ("micro_batch", 1, 1)))
        try:
            screen_space(replace(spec, space=lean))
            return None
        except InputError:
            pass
        screen_space(spec)
    except NoLayoutError as err:
        return err.reason
    except InputError as err:
        return str(err)
    return None


def _incumbent_key(spec: SweepSpec) -> tuple[int, ...] | None:
    """The scenario's own layout, if the loader accepts it on this (possibly resized) cluster and
    it satisfies the sweep's constraints."""
    s = spec.scenario
    if not spec.own_layout:
        return None
    try:
        check_layout(s.model, s.cluster, s.parallel)
        check_recompute(s.model, s.parallel)
    except InputError:
        return None
    key = layout_key(s.parallel)
    c = spec.constraints
    if not c.allows(parallel_dict(key, s.parallel.global_batch)):
        return None
    if c.only_validated and not interval_factors(s, np.array([key], dtype=np.float64))[1][0]:
        return None
    return key


def _add_incumbent(spec: SweepSpec, table: np.ndarray, refined: np.ndarray | None, scale: np.ndarray | None
                   ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, int | None]:
    """The table with the scenario's own layout (a row added where the space left it out: tp=3,
    a symmetric twin) and closed-form numbers for it; its row, or None."""
    incumbent = _incumbent_key(spec)
    if incumbent is None:
        return table, refined, scale, None
    present = (table[:, :N_KEY] == np.array(incumbent, dtype=np.float64)).all(axis=1)
    if not present.any():  # outside the enumerated space: add its row
        row = np.full((1, len(COLUMNS)), np.nan)
        row[0, :N_KEY] = incumbent
        table = np.concatenate([table, row], axis=0)
        if refined is not None:
            refined = np.concatenate([refined, [False]])
        if scale is not None:
            scale = np.concatenate([scale, interval_factors(spec.scenario, row)[0]])
        present = np.zeros(table.shape[0], dtype=bool)
        present[-1] = True
    i = int(np.flatnonzero(present)[0])
    m = estimate_keys(spec, (incumbent,))[0] if math.isnan(table[i, COL["step_time_s"]]) else None
    if m is not None and not math.isnan(m[0]):  # give it closed-form numbers too (within budget)
        table[i, COL["fits"]], table[i, COL["peak_bytes_per_gpu"]] = m[0], m[1]
        table[i, COL["verdict"]] = m[METRIC_FIELDS.index("verdict")]
        for f in ESTIMATE_FIELDS:
            table[i, COL[f]] = m[METRIC_FIELDS.index(f)]
    return table, refined, scale, i


MAX_RERANK_ROUNDS = 4   # event-engine rounds of `rerank` rows; then each round doubles (module doc, step 3)


def _roomier_twins(table: np.ndarray, rows: list[int]) -> list[int]:
    """Members of the groups of ``rows`` (clustersim.sweep.groups: virtual stages, ZeRO 1 against 2)
    with a closed-form time and less peak memory than the row: ranked by free memory, a group stands
    for its roomiest member, and a re-ranked ZeRO-1 row kept its twin's 26 GiB out of sight."""
    timed = np.flatnonzero(~np.isnan(table[:, COL["step_time_s"]]) & (table[:, COL["fits"]] == 1.0))
    if not rows or not timed.size:
        return []
    codes = group_codes(table)
    peak = table[:, COL["peak_bytes_per_gpu"]]
    out: list[int] = []
    for row in rows:
        twins = timed[(codes[timed] == codes[row]) & (peak[timed] < peak[row])]
        out += [int(i) for i in twins if int(i) not in rows and int(i) not in out]
    return out


def _rerank(spec: SweepSpec, table: np.ndarray, executor: Executor, rerank: int, keep: int,
            progress: Progress | None, refined: np.ndarray | None, rank_by: str, scale: np.ndarray | None,
            find_plain: bool) -> SweepResult:
    """The event engine on the best ``rerank`` rows (module doc, step 3), then the ranking."""
    table, refined, scale, incumbent = _add_incumbent(spec, table, refined, scale)
    codes = key_codes(table)
    sim = np.full((table.shape[0], len(METRIC_FIELDS)), np.nan)

    def ranked(full: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return rank_groups(table, sim, scale, spec.scenario.cluster.gpu.hbm_capacity_bytes, rank_by, keep, codes,
                           full)

    order, _, is_row = ranked()
    rows = order[is_row]
    wanted = [int(i) for i in rows[:rerank]]
    if find_plain and rows.size:
        plain = rows[plain_mask(table[rows])]
        if plain.size and int(plain[0]) not in wanted:
            wanted.append(int(plain[0]))
    if incumbent is not None and incumbent not in wanted:
        wanted.append(incumbent)
    if rank_by == "memory-headroom":
        wanted += _roomier_twins(table, wanted)
    finished, total = [0], [len(wanted)]

    def simulate(rows_: list[int]) -> None:
        def on_sim(_: int) -> None:
            finished[0] += 1
            if progress:
                progress("simulate", finished[0], total[0])

        if progress:
            progress("simulate", finished[0], total[0])
        results = executor.run(functools.partial(simulate_key, spec), keys_of(table[rows_]), on_sim)
        for row, metrics in zip(rows_, results, strict=True):
            sim[row] = metrics

    if wanted:
        simulate(wanted)
    # the event engine slows a row where its transfers contend, so a closed-form row may now lead:
    # re-rank in rounds until the best row carries the event engine's numbers (what `run` of it
    # prints): the best `rerank` rows not yet simulated, twice as many after MAX_RERANK_ROUNDS rounds
    # (where contention slows every row, so that the rounds stay few). Every round simulates the
    # leading row, so the rounds end; a closed-form row never ships as #1.
    # The best plain 3D row likewise: when the event engine slows it, the next plain row (a
    # closed-form one) takes its place and is simulated in turn.
    # With nothing asked for up front (--rerank 0, no plain row, no own layout) the rounds still run:
    # the first one simulates the leading row.
    batch, rounds = max(rerank, 1), 0
    while True:
        order, _, is_row = ranked()
        rows = order[is_row]
        lead_done = not rows.size or not np.isnan(sim[int(rows[0]), 0])
        plain_row = None
        if find_plain and rows.size:
            plain = rows[plain_mask(table[rows])]
            if plain.size and np.isnan(sim[int(plain[0]), 0]):
                plain_row = int(plain[0])
        if lead_done and plain_row is None:
            break
        more = []
        if not lead_done:
            rounds += 1
            if rounds > MAX_RERANK_ROUNDS:
                batch *= 2
            more = [int(i) for i in rows if np.isnan(sim[int(i), 0])][:batch]
        if plain_row is not None and plain_row not in more:
            more.append(plain_row)
        if rank_by == "memory-headroom":   # as the first round: a group stands for its roomiest member
            more += [i for i in _roomier_twins(table, more) if np.isnan(sim[i, 0])]
        total[0] += len(more)
        simulate(more)
    order, grank, is_row = ranked(full=True)
    return SweepResult(spec, table[order], sim[order], None if refined is None else refined[order], grank, is_row,
                       rank_by)


def resize_cluster(cluster: ClusterSpec, gpus: int) -> ClusterSpec:
    """The same kind of cluster with ``gpus`` GPUs: whole nodes, or part of one node."""
    check_gpus("--gpus", gpus)
    gpn = cluster.gpus_per_node
    if gpus >= gpn and gpus % gpn == 0:
        resized = replace(cluster, num_nodes=gpus // gpn)
        domain = cluster.scale_up_domain
        if domain and gpus > domain and gpus % domain:
            # no whole domains: the same part of each, as compare sizes it (sweep.compare.cluster_size:
            # 100 GPUs of NVL72 racks = 2 x 50), or the counts that split so
            if not splits_well(gpus, gpn, domain):
                raise InputError("--gpus", gpus, f"whole {domain}-GPU scale-up domains of {cluster.name}, at most "
                                                 "one, or equal parts of at least half a domain in whole nodes of "
                                                 f"{gpn} (e.g. {domain}, {2 * domain}; nearest: {nearest_split(gpus, gpn, domain)})")
            resized = replace(resized, scale_up_domain=domain_split(gpus, gpn, domain))
        check_domain(resized)  # whole scale-up domains (or at most one): InputError names the field
        return resized
    if holds_part_of_node(gpus, gpn):   # compare's rule too (sweep.compare.cluster_size)
        return part_of_node(cluster, gpus)
    raise InputError("--gpus", gpus, f"a multiple of gpus_per_node ({gpn}) of {cluster.name}, or a divisor of it")


def check_uniform(scenario: Scenario) -> None:
    """Sweep and compare search layouts of one kind of GPU on a healthy cluster: InputError for
    ``cluster.groups`` and ``faults:`` (clustersim.perrank)."""
    if scenario.node_groups:
        raise InputError("cluster.groups", [g.preset for g in scenario.node_groups],
                         "one cluster preset: sweep and compare search the layouts of one kind of GPU")
    if scenario.faults is not None:
        raise InputError("faults", "present", "a scenario without faults: sweep and compare rank layouts on a "
                         "healthy cluster (clustersim run simulates the faults of one layout)")


def scenario_space(scenario: Scenario, space: SearchSpace) -> SearchSpace:
    """``space`` with what the scenario holds fixed, for the sweep and the comparison alike: its
    framework (whose rule, clustersim.frameworks.framework_refusal, the loader applies too) and its
    host offload. The sweep searches optimizer offload for MoE models only; a dense model's
    ``parallel.offload.optimizer: true`` is kept as a fixed dimension (every layout offloads, as
    ``clustersim run`` of the scenario does; it was dropped, and the memory verdicts were those of
    layouts without offload). Parameter and activation offload stay in the template; parameter
    offload needs ZeRO-3 (clustersim.parallel.rules), so the sweep then searches ZeRO-3 only."""
    space = replace(space, framework=scenario.framework)
    par = scenario.parallel
    if par.offload_optimizer and not scenario.model.is_moe:
        space = replace(space, offload=(True,))
    if par.offload_params:
        space = replace(space, zero_stages=tuple(z for z in space.zero_stages if z == 3))
    return space


def fixed_offload(scenario: Scenario, space: SearchSpace) -> tuple[dict[str, bool], str | None]:
    """(the offload the sweep holds fixed from the scenario, as ``parallel.offload`` keys; the
    output's line saying so, or None where nothing is held): ``scenario_space``'s rule in words."""
    par = scenario.parallel
    fixed = {"optimizer": space.offload == (True,) and not scenario.model.is_moe and par.offload_optimizer,
             "params": par.offload_params, "activations": par.offload_activations}
    held = [k for k, v in fixed.items() if v]
    if not held:
        return fixed, None
    return fixed, (f"the scenario's parallel.offload ({', '.join(held)}) is held fixed: every layout here offloads "
                   "it, as `clustersim run` does, and its memory verdict counts the offloaded states on the host"
                   + (" (parameter offload needs ZeRO-3: only ZeRO-3 layouts are searched)" if par.offload_params
                      else ""))


def held_recompute_line(scenario: Scenario) -> str | None:
    """The output's line saying which rows carry the scenario's partial-recompute options
    (clustersim.sweep.space.with_recompute), or None where it has none."""
    par = scenario.parallel
    parts = []
    if par.recompute_modules:
        parts.append(f"parallel.recompute_modules ({', '.join(par.recompute_modules)}) applies to its recompute: "
                     "selective rows")
    if par.recompute_method != "uniform" or par.recompute_num_layers != 1:
        parts.append(f"parallel.recompute_method ({par.recompute_method}) and recompute_num_layers "
                     f"({par.recompute_num_layers}) apply to its recompute: full rows, where the stages hold that "
                     "many layers")
    if not parts:
        return None
    return ("the scenario's " + "; ".join(parts) + ": rows of another recompute run without them (the loader's rule), "
            "so `clustersim run` of such a row needs them left out of the scenario")


def sweep_spec(scenario: Scenario, gpus: int | None = None, space: SearchSpace | None = None,
               constraints: Constraints | None = None, *, evaluators: Evaluators,
               **options: Any) -> SweepSpec:
    """The spec of a sweep of ``scenario``'s model and batch on its cluster, resized to ``gpus``,
    with ``space`` narrowed to ``constraints`` (clustersim.sweep.constraints), evaluated by
    ``evaluators`` (clustersim.api.SWEEP_EVALUATORS); ``options``: other SweepSpec fields."""
    check_uniform(scenario)
    # an explicit split (or a framework's: clustersim.parallel.split) belongs to the template's pipeline
    # depth; the sweep varies it and splits every candidate evenly
    scenario = replace(scenario, parallel=replace(scenario.parallel, layers_per_stage=(), first_stage_layers=0,
                                                  last_stage_layers=0, account_for_embedding=0, account_for_loss=0,
                                                  pipeline_layout=""))
    if gpus is not None and gpus != scenario.cluster.num_gpus:
        scenario = replace(scenario, cluster=resize_cluster(scenario.cluster, gpus))
    if space is None:
        space = SearchSpace(recompute=TORCHTITAN_RECOMPUTE) if scenario.framework.name == "torchtitan" \
            else SearchSpace()
    space = scenario_space(scenario, space)
    constraints = constraints or Constraints()
    space = constraints.apply(space, scenario.model)
    if constraints.only_validated:
        space = validated_space(scenario, space)
    return SweepSpec(scenario, space, constraints=constraints, evaluators=evaluators, **options)
