"""Screening every layout cheaply: its exact peak memory and a lower bound on its step time.

The closed form (``clustersim.api.estimate``) replays the whole pipeline schedule, so it costs
milliseconds to a second per layout; the sweep cannot afford it on ~10^6 layouts. The screen
computes, from the same cost functions and with results shared between layouts:

* **Peak memory per GPU**, exactly as the engine does (``clustersim.plan.memory_plan``): for
  every pipeline rank, ``memory_report`` with the layers it holds and the activations in flight
  that its schedule implies; the peak is the largest. ``memory_report`` does not read the
  schedule or virtual_stages (only through the in-flight count), so it is called with those
  normalised and shared between schedules. Layouts that do not fit are pruned here.
* **A lower bound on the closed-form step time** (``step_bound_s``). The compute stream of a
  pipeline rank runs every work unit of its actions one after another (``engine.recurrence``:
  the rank's clock advances by ``unit_time`` of each unit and only waits otherwise), so with
  ``W_r`` the sum of rank ``r``'s unit times over the step, ``F_s``/``B_s`` those of one forward /
  backward of chunk 0 on rank ``s``, and ``opt_0`` the optimizer step of rank 0:
      - rank r cannot start before micro-batch 0 has gone forward through ranks 0..r-1;
      - when every rank ends with the backward of chunk 0 of the same micro-batch (true of GPipe,
        1F1B and interleaved 1F1B, and checked per schedule), rank r-1 ends after rank r ends
        plus its own B; the step ends after rank 0 ends plus ``opt_0`` (DP waits only add);
  so ``step >= max_r [ sum_{s<r} (F_s + B_s) + W_r ] + opt_0``: Narayanan et al. 2021's
  ``(m + p - 1) (t_f + t_b)`` for uniform 1F1B (arXiv 2104.04473, §2.2.1), with the interleaved
  schedule's fill shortened to one chunk (§2.2.2). Pipeline transfers and exposed DP
  communication are left out, which keeps it a bound. The unit times of a layer depend only on
  (tp, cp, ep, micro_batch, sequence_parallel, recompute) and are shared between layouts.

``tests/sweep/test_screen.py`` checks both against ``api.estimate`` on random layouts: equal
memory, and ``step_bound_s <= step_time_s``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from clustersim.collectives import plan_collective
from clustersim.compute.ops import COMM_GROUPS, CommOp, Op
from clustersim.compute.variation import sync_wait_fraction
from clustersim.errors import InputError
from clustersim.memory.activations import LayerUnits, combine, layer_units
from clustersim.memory.allocator import FRAGMENTATION
from clustersim.memory.buffers import (
    CUBLAS_WORKSPACE_BYTES,
    CUDA_CONTEXT_BYTES,
    buffer_bytes,
    nccl_buffer_bytes,
)
from clustersim.memory.evidence import interval_factors
from clustersim.memory.policies import RankPolicies, rank_policies, uniform_policies
from clustersim.memory.report import (
    MemoryReport,
    assemble,
    moe_share,
    offload,
    peak_numbers,
    states,
    verdict_index,
)
from clustersim.parallel.layout import RECOMPUTE, SCHEDULES, ParallelLayout
from clustersim.parallel.pipeline import build_schedule, max_in_flight, model_split, split_layers, stage_graph
from clustersim.parallel.placement import axis_shape_for
from clustersim.perrank.run import per_rank_mode
from clustersim.plan.comm_plans import comm_plan, group_shape, link_shape
from clustersim.plan.compiled_unit import CompiledUnit, compile_unit
from clustersim.plan.dp_rules import grad_reduce_bytes
from clustersim.plan.element_bytes import activation_bytes
from clustersim.plan.memory_plan import layers_in_flight, scenario_kernels
from clustersim.plan.optimizer_step import optimizer_step_s
from clustersim.plan.overlap import overlap_slowdown
from clustersim.plan.stage_work import build_step_work
from clustersim.plan.zero3 import zero3_backward_gathers, zero3_collective, zero3_shard_axis
from clustersim.scenario import Scenario
from clustersim.sweep.dpbound import (
    DpStream,
    RankStream,
    chunk_stream_s,
    final_prefixes,
    rank_streams,
    stream_of,
    streams_of,
)
from clustersim.sweep.programs import Tcm, final_counts, pair_s, stage_durations, start_paths
from clustersim.sweep.space import (
    SearchSpace,
    Shape,
    offload_options,
    schedule_options,
    schedule_zero_ok,
    sequence_parallel_options,
    zero_options,
)

# The bound is compared with floating-point sums taken in another order: shave a little off so
# that a layout whose step time equals its bound is never pruned by rounding.
BOUND_SLACK = 1e-9
# The first level of the bound sums the same seconds in yet another order than the second: shave
# a little more off, so that it never exceeds the second by rounding (the lazy branch and bound
# relies on first <= second).
FIRST_SLACK = 1.0 - 1e-9
# and the kernels-only level (0) a little more again, below the first (compiled units) level
KERNEL_SLACK = 1.0 - 3e-9


@dataclass(frozen=True, slots=True)
class UnitTimes:
    """Seconds of one micro-batch on one GPU (forward, and recompute + backward)."""

    layer_f_s: float
    layer_b_s: float
    first_f_s: float  # embedding
    first_b_s: float
    last_f_s: float  # logits and loss
    last_b_s: float
    layer_params: int
    first_params: int
    last_params: int
    p2p_bytes: float  # activation sent between pipeline stages per micro-batch
    layer_all_params: int = 0  # the first layer's parameters with its experts (the optimizer steps them all)
    moe_all_params: int = 0    # the last layer's (a MoE layer in a MoE model)
    layer_expert_params: int = 0  # expert parameters of a layer, the least over the layers (0: a dense layer)


@dataclass(frozen=True, slots=True)
class Extra:
    """Per micro-batch seconds that the bound adds for one layout's DP and pipeline groups: the
    ZeRO-3 parameter gather of each unit (before its forward and again before its backward;
    0 below ZeRO-3) and one pipeline transfer."""

    gather_layer_s: float = 0.0
    gather_first_s: float = 0.0
    gather_last_s: float = 0.0
    p2p_s: float = 0.0
    backward_gathers: int = 1  # gathers of a unit in each backward (plan.zero3.zero3_backward_gathers)


@dataclass(frozen=True, slots=True)
class ScheduleProfile:
    """What memory and the bound need from a schedule: per rank (layers held, activations in
    flight as the engine counts them), chunk-0 layers per rank, and whether the bound's backward
    chain holds (every rank ends with chunk 0's backward of one micro-batch)."""

    ranks: tuple[tuple[int, float], ...]
    chunk0_layers: tuple[int, ...]
    first_layers: int  # layers of global stage 0 (with the embedding) and of the last (with the output)
    last_layers: int
    plain_chunks: tuple[tuple[tuple[int, int], ...], ...]  # per rank: (layers, how many chunks) of its
                                                          # chunks without embedding or output
    backward_chain: bool
    check_ranks: tuple[int, ...]  # the ranks that can hold the peak memory
    moe_held: tuple[int, ...] = ()   # MoE layers among each rank's layers
    firsts: tuple[bool, ...] = ()    # ranks holding the embedding (model stage 0)
    lasts: tuple[bool, ...] = ()     # ranks holding the output head (last model stage)
    fill: bool = True                # rank r waits for the first forward through ranks < r (GPipe/1F1B/interleaved)
    share: float = 1.0               # micro-batches through each chunk / all (DualPipe: each direction's half)
    ends: tuple[tuple[float, float], ...] = ()  # per rank: in flight on its embedding's / head's chunk (0: none)
    # without ``fill``: per rank, the forward chains its first action waits for (programs.start_paths)
    starts: tuple[tuple[tuple[int, int, int, int], ...], ...] = ()


def class_scenario(base: Scenario, layout: ParallelLayout) -> Scenario:
    """The representative of a layout's unit-time class: one stage, no data parallelism."""
    # an expert-parallel layout keeps its data-parallel ranks: the EP group (and where its ranks
    # sit) is part of the layer's cost
    dp = layout.dp if layout.ep > 1 else 1
    rep = replace(layout, pp=1, dp=dp, zero_stage=0, schedule="1f1b", virtual_stages=1,
                  global_batch=layout.micro_batch * dp, offload_optimizer=False)
    return replace(base, parallel=rep)


# The groups a layer's collectives name (clustersim.compute.ops.COMM_GROUPS, less the host link,
# whose plan depends on the cluster alone).
LAYER_GROUPS = tuple(g for g in COMM_GROUPS if g != "host")


def class_dp_key(base: Scenario, layout: ParallelLayout) -> tuple[object, ...]:
    """The data-parallel size as a unit-time class sees it: the shape of every group a layer's
    collectives run over in ``class_scenario``. A layer's ops depend on the layout only through
    ``compute.layer.compute_layout`` (no dp) and its collectives' plans only through the cluster
    and these group shapes (``plan.comm_plans.op_plan``, ``plan.comm_plans.group_shape``), so two
    layouts with equal (tp, cp, ep, etp, micro-batch, sp, recompute) and equal keys have equal
    unit times (tests/sweep/test_screen.py checks it against ``unit_times`` on random layouts).
    A layout whose groups the placement cannot shape keeps its dp (never shared)."""
    rep = class_scenario(base, layout).parallel
    c = base.cluster
    try:
        return tuple((g, axis_shape_for(rep, c.gpus_per_domain, g, c.gpus_per_domain > c.gpus_per_node))
                     for g in LAYER_GROUPS)
    except (InputError, ValueError):
        return ("dp", layout.dp)


@functools.lru_cache(maxsize=4096)
def unit_times(rep: Scenario) -> UnitTimes:
    """Unit times of the class that ``rep`` (from ``class_scenario``) stands for: each unit
    compiled as the engines run it (``plan.compiled_unit.compile_unit``)."""
    return _class_times(rep, lambda w: compile_unit(rep, w).time_s)


@functools.lru_cache(maxsize=4096)
def lower_unit_times(rep: Scenario) -> UnitTimes:
    """A lower bound on every unit time of ``unit_times(rep)``, with the same parameter counts:
    each unit's compute kernels alone (``compute_s``), no collective planned. About a sixth of
    the cost of compiling the units; the sweep's first level of the bound (module docstring)."""
    return _class_times(rep, compute_s)


def _shortened(rep: Scenario) -> Scenario:
    """A class representative on as few layers as give its minima: with uniform recompute
    policies every layer of one kind (dense, MoE) has the same units and parameters, so one
    layer of each kind the model has gives the same unit times (tests/sweep/test_lazy_bound.py)."""
    m = rep.model
    if uniform_policies(rep.parallel) and m.layers > m.layers_covering_kinds():   # one layer of each kind
        rep = replace(rep, model=replace(m, layers=m.layers_covering_kinds()))
    return rep


def _lower_of_class(rep: Scenario) -> UnitTimes:
    """``lower_unit_times`` of a class representative, on the shortened model."""
    return lower_unit_times(_shortened(rep))


class UnitCompiler:
    """``plan.compiled_unit.compile_unit`` for the classes of one base scenario, each distinct unit
    compiled once. A unit compiles from its ops, sequence parallelism and, for each collective,
    its plan, which depends on the class only through the shape of the group it runs over
    (``plan.comm_plans.op_plan``: ``comm_plan`` and ``deepep_plan`` read the cluster and
    ``group_shape``, ``host_copy_plan`` the cluster); the rest (cluster, framework, the
    template's overlap options) is the base's. So two classes with equal ops and equal shapes
    of the groups those ops name share the compiled unit: the embedding's and the head's units
    across expert layouts, a layer's forward across recompute policies
    (tests/sweep/test_screen.py checks it against ``compile_unit``)."""

    def __init__(self) -> None:
        self._units: dict[tuple[object, ...], CompiledUnit] = {}

    def __call__(self, rep: Scenario, work: tuple) -> CompiledUnit:
        groups = sorted({op.group for op in work if isinstance(op, CommOp) and op.collective != "host_copy"})
        key = (work, rep.parallel.sequence_parallel, tuple(group_shape(rep, g) for g in groups), tuple(groups))
        unit = self._units.get(key)
        if unit is None:
            unit = self._units[key] = compile_unit(rep, work)
        return unit


def runs_pairs(layout: ParallelLayout, schedule: str) -> bool:
    """Whether ``schedule`` runs a forward and a backward as one overlapped pair (DualPipe,
    DualPipe-V, Megatron's EP all-to-all overlap under 1F1B and interleaved 1F1B: ``engine.pair``)."""
    return schedule in ("dualpipe", "dualpipe-v") or layout.overlap_moe_expert_parallel_comm \
        and schedule in ("1f1b", "interleaved-1f1b")


def pair_unit_times(lower: UnitTimes, compiled: UnitTimes, slowdown: float) -> UnitTimes:
    """What a unit takes at least inside an overlapped pair, or alone: ``c + s (u - c)`` with
    ``c`` its kernels' seconds (``lower``), ``u`` its compiled time (``compiled``) and ``s`` the
    GPU's overlap slow-down. A pair of actions with kernel seconds ``C`` and collective seconds
    ``M`` lasts at least ``C + s M`` (``sweep.programs.pair_s``: the kernels run slowed wherever a
    collective of the pair is in flight, or the collectives alone take longer), an action alone
    at least its compiled time ``u >= c + s (u - c)``, and a unit's collectives take at least
    ``u - c`` (its compiled time is its kernels plus its blocking collectives and waits for its
    overlapped ones). Increasing in ``c`` and ``u``, so the least over the layer kinds of each
    gives at most any kind's."""
    def mix(c: float, u: float) -> float:
        return c + slowdown * max(0.0, u - c)

    return replace(lower, **{f: mix(getattr(lower, f), getattr(compiled, f))
                             for f in ("layer_f_s", "layer_b_s", "first_f_s", "first_b_s", "last_f_s", "last_b_s")})


def compute_s(work: tuple) -> float:
    """Seconds of a unit's kernels (``Op``) run back to back: a lower bound on the unit's
    contention-free time (``plan.compiled_unit.unit_timing``: every kernel advances the compute stream
    by at least its own time, ``plan.overlap.advance`` only slows it, and blocking
    collectives and waits for overlapped ones only add; tests/sweep/test_screen.py)."""
    return sum(op.time_s for op in work if isinstance(op, Op))


def _class_times(rep: Scenario, unit_time: Callable[[tuple], float]) -> UnitTimes:
    """Unit times of a class, each unit priced by ``unit_time``."""
    # pp = 1: forward [embedding, layers..., mtp..., output], backward [output, mtp..., layers..., embedding];
    # layers of different kinds (a MoE model's dense first layers) enter with the cheaper kind: a bound
    stage = build_step_work(rep).stages[0]
    fwd, bwd, params = stage.forward, stage.backward, stage.unit_params
    n, k = stage.num_layers, rep.model.mtp_layers
    # the layers of one kind share one op tuple (plan.stage_work): price each distinct tuple once
    layers_f = {id(w): w for w in fwd[1:1 + n]}.values()
    layers_b = {id(w): w for w in bwd[1 + k:1 + k + n]}.values()
    last_f = sum(unit_time(w) for w in (*fwd[1 + n:-1], fwd[-1]))
    last_b = sum(unit_time(w) for w in bwd[:1 + k])
    return UnitTimes(
        layer_f_s=min(unit_time(w) for w in layers_f),
        layer_b_s=min(unit_time(w) for w in layers_b),
        first_f_s=unit_time(fwd[0]), first_b_s=unit_time(bwd[-1]),
        last_f_s=last_f, last_b_s=last_b,
        layer_params=min(params[1 + k:1 + k + n]), first_params=params[-1], last_params=params[0],
        # backward units run the layers last to first: the last is layer 0 (dense if any is), the first a MoE layer
        layer_all_params=params[k + n] + stage.unit_expert_params[k + n],
        moe_all_params=params[1 + k] + stage.unit_expert_params[1 + k],
        layer_expert_params=min(stage.unit_expert_params[1 + k:1 + k + n]),
        p2p_bytes=build_step_work(rep).p2p_bytes)


PARTS = ("F", "B", "Bi", "W")


@dataclass(frozen=True, slots=True)
class PartTimes:
    """Per part of an action (``PARTS``: forward, whole backward, its input- and weight-gradient
    halves) the ``Tcm`` of one layer (each the least over the layer kinds), of the embedding's
    unit and of the units after the layers (MTP modules and the head), for the sweep's third
    level (clustersim.sweep.replay)."""

    layer: dict[str, Tcm]
    first: dict[str, Tcm]
    last: dict[str, Tcm]


def _tcm(rep: Scenario, work: tuple, compile: Callable[[Scenario, tuple], CompiledUnit]) -> Tcm:
    unit = compile(rep, work)
    c = sum(s.time_s for s in unit.steps if s.plan is None and s.join < 0)
    m = sum(s.time_s for s in unit.steps if s.plan is not None)
    return unit.time_s, c, m


def part_times(rep: Scenario, compile: Callable[[Scenario, tuple], CompiledUnit] = compile_unit) -> PartTimes:
    """``PartTimes`` of the class that ``rep`` (from ``class_scenario``) stands for, each unit
    compiled by ``compile`` (``compile_unit``, or a Screen's ``UnitCompiler``)."""
    stage = build_step_work(rep).stages[0]
    n, k = stage.num_layers, rep.model.mtp_layers
    layer, first, last = {}, {}, {}
    for part, works in (("F", stage.forward), ("B", stage.backward), ("Bi", stage.backward_input),
                        ("W", stage.backward_weight)):
        if part == "F":
            emb, layers, rest = works[0], works[1:1 + n], works[1 + n:]
        else:  # backward order: head and MTP, layers last to first, embedding
            emb, layers, rest = works[-1], works[1 + k:1 + k + n], works[:1 + k]
        kinds = [_tcm(rep, w, compile) for w in {id(w): w for w in layers}.values()]
        layer[part] = (min(x[0] for x in kinds), min(x[1] for x in kinds), min(x[2] for x in kinds))
        first[part] = _tcm(rep, emb, compile)
        parts = [_tcm(rep, w, compile) for w in rest]
        last[part] = (sum(x[0] for x in parts), sum(x[1] for x in parts), sum(x[2] for x in parts))
    return PartTimes(layer, first, last)


def _profile_micro_batches(schedule: str, pp: int, num_micro_batches: int) -> int:
    """Micro-batches whose schedule has the same memory profile as ``num_micro_batches``: GPipe
    holds all (counted in closed form), 1F1B at most pp - r on rank r, interleaved 1F1B peaks
    during its warm-up of fewer than 2 pp micro-batches (Narayanan et al. 2021 §2.2; checked
    against the full schedules in tests/sweep/test_screen.py). The zero-bubble and DualPipe
    schedules are built in full."""
    cap = {"gpipe": 2, "1f1b": pp, "interleaved-1f1b": 2 * pp}.get(schedule, num_micro_batches)
    return min(num_micro_batches, cap)


@functools.lru_cache(maxsize=65536)
def schedule_profile(schedule: str, pp: int, num_micro_batches: int, virtual_stages: int,
                     layers: int, first_dense: int = 0, mtp_layers: int = 0, moe_every: int = 1) -> ScheduleProfile:
    """The memory and bound profile of a schedule (see ScheduleProfile); ``first_dense``: the
    model's leading dense layers (MoE models); ``moe_every``: MoE on every N-th layer after them."""
    m = _profile_micro_batches(schedule, pp, num_micro_batches)
    if m != num_micro_batches:
        short = schedule_profile(schedule, pp, m, virtual_stages, layers, first_dense, mtp_layers, moe_every)
        if schedule == "gpipe":  # every forward runs before any backward: all micro-batches in flight
            ranks = tuple((held, float(num_micro_batches)) for held, _ in short.ranks)
            ends = tuple((float(num_micro_batches) if f else 0.0, float(num_micro_batches) if la else 0.0)
                         for f, la in zip(short.firsts, short.lasts, strict=True))
            return replace(short, ranks=ranks, ends=ends)
        return short
    actions = build_schedule(schedule, pp, num_micro_batches, virtual_stages)
    graph = stage_graph(schedule, pp, virtual_stages, num_micro_batches)
    model_counts = model_split(graph, layers, mtp_layers)
    counts = tuple(model_counts[graph.model_stage[g]] for g in range(graph.num_stages))
    starts = [sum(model_counts[:k]) for k in range(len(model_counts))]
    last_model = graph.num_model_stages - 1
    ranks, moe_held, firsts, lasts, ends = [], [], [], [], []
    for r in range(pp):
        ms = graph.rank_model_stages(r)
        held = sum(model_counts[k] for k in ms)
        ranks.append((held, layers_in_flight(actions[r], r, graph, counts) / held))
        ends.append(_ends(actions[r], ms, last_model))
        moe_held.append(sum(max(0, model_counts[k] - max(0, first_dense - starts[k])) for k in ms) if moe_every == 1
                        else sum(i >= first_dense and (i + 1) % moe_every == 0
                                 for k in ms for i in range(starts[k], starts[k] + model_counts[k])))
        firsts.append(0 in ms)
        lasts.append(last_model in ms)
    old = schedule in ("gpipe", "1f1b", "interleaved-1f1b")
    last = [a[-1] for a in actions]
    chain = old and all(a.kind == "B" and a.chunk == 0 and a.micro_batch == last[0].micro_batch for a in last)
    plain = []
    for r in range(pp):
        sizes: dict[int, int] = {}
        for c in range(graph.chunks):
            g = graph.stage(r, c)
            if graph.model_stage[g] not in (0, last_model):
                sizes[counts[g]] = sizes.get(counts[g], 0) + 1
        plain.append(tuple(sorted(sizes.items())))
    return ScheduleProfile(tuple(ranks), tuple(counts[graph.stage(r, 0)] for r in range(pp)), model_counts[0],
                           model_counts[-1], tuple(plain), chain, _check_ranks(ranks, firsts, lasts),
                           tuple(moe_held), tuple(firsts), tuple(lasts), old,
                           0.5 if schedule == "dualpipe" else 1.0, tuple(ends),
                           () if old else start_paths(schedule, pp, num_micro_batches, virtual_stages, layers,
                                                      mtp_layers))


def _ends(actions, model_stages: tuple[int, ...], last_model: int) -> tuple[float, float]:
    """As clustersim.plan.memory_plan.chunk_in_flight, for the chunks running model stage 0
    and the last model stage (0 where the rank holds neither)."""
    def peak(stage: int) -> float:
        chunks = [c for c, m in enumerate(model_stages) if m == stage]
        return float(max_in_flight(tuple(a for a in actions if a.chunk in chunks))) if chunks else 0.0
    return peak(0), peak(last_model)


def _check_ranks(ranks: list[tuple[int, float]], firsts: list[bool], lasts: list[bool]) -> tuple[int, ...]:
    """Ranks whose memory can be the peak: those with the embedding or the output head and the
    other ranks that no other such rank matches in both layers held and micro-batches in
    flight (memory grows with both: ``MemoryModel.peak_bytes``)."""
    keep = {r for r in range(len(ranks)) if firsts[r] or lasts[r]}
    middle = [(held, f, r) for r, (held, f) in enumerate(ranks) if r not in keep]
    for held, k, r in middle:
        if not any((h2 >= held and k2 >= k) and (h2, k2) != (held, k) or ((h2, k2) == (held, k) and r2 < r)
                   for h2, k2, r2 in middle):
            keep.add(r)
    return tuple(sorted(keep))


def _action_s(n: int, c: float, g: float, extra_c: float = 0.0, extra_g: float = 0.0,
              extra_min_c: float | None = None, extra_min_g: float | None = None) -> float:
    """Least duration of one action over ``n`` layers (compute ``c``, ZeRO-3 gather ``g`` each)
    plus an embedding/output unit (``extra_*``).

    ``engine.recurrence``: at the action's start the DP stream is given every unit's gather, in
    order; a unit computes once its gather is done. So the action lasts at least the first
    gather plus all compute, and all gathers plus the last unit's compute. Without ZeRO-3 the
    gathers are 0 and this is the compute.
    """
    total_c = n * c + extra_c
    total_g = n * g + extra_g
    min_g = min([g] * (n > 0) + ([extra_min_g] if extra_min_g is not None else []), default=0.0)
    min_c = min([c] * (n > 0) + ([extra_min_c] if extra_min_c is not None else []), default=0.0)
    return max(total_c + min_g, total_g + min_c)


def pipeline_bound_s(u: UnitTimes, x: Extra, profile: ScheduleProfile, num_micro_batches: int) -> float:
    """``max_r [fill_r + W_r]`` (module docstring), without the optimizer; every action lasts at
    least ``_action_s``."""
    if x.gather_layer_s == 0.0 and x.gather_first_s == 0.0 and x.gather_last_s == 0.0:
        return _plain_bound_s(u, x.p2p_s, profile, num_micro_batches)
    pp = len(profile.ranks)
    f, b, g = u.layer_f_s, u.layer_b_s, x.gather_layer_s
    k = x.backward_gathers
    if k != 1:  # B actions: k gathers per unit; compute after the last gather unknown: take none
        return _bound_with_backward_gathers(u, x, profile, num_micro_batches)
    n0, nl = profile.first_layers, profile.last_layers
    single = pp == 1 and len(profile.plain_chunks[0]) == 0 and n0 == profile.ranks[0][0]  # one chunk, both ends
    if single:
        ef, eb = u.first_f_s + u.last_f_s, u.first_b_s + u.last_b_s
        eg = x.gather_first_s + x.gather_last_s
        first_f = _action_s(n0, f, g, ef, eg, min(u.first_f_s, u.last_f_s), min(x.gather_first_s, x.gather_last_s))
        first_b = _action_s(n0, b, g, eb, eg, min(u.first_b_s, u.last_b_s), min(x.gather_first_s, x.gather_last_s))
    else:
        first_f = _action_s(n0, f, g, u.first_f_s, x.gather_first_s, u.first_f_s, x.gather_first_s)
        first_b = _action_s(n0, b, g, u.first_b_s, x.gather_first_s, u.first_b_s, x.gather_first_s)
    last_f = _action_s(nl, f, g, u.last_f_s, x.gather_last_s, u.last_f_s, x.gather_last_s)
    last_b = _action_s(nl, b, g, u.last_b_s, x.gather_last_s, u.last_b_s, x.gather_last_s)
    best = 0.0
    fill = 0.0  # rank r starts after chunk 0's F on ranks < r (and ends before their B: the chain)
    # _action_s of a forward / backward over n layers, once per n (ranks share them)
    af = functools.cache(lambda n: _action_s(n, f, g))
    ab = functools.cache(lambda n: _action_s(n, b, g))
    for r in range(pp):
        work = sum(k * (af(n) + ab(n)) for n, k in profile.plain_chunks[r])
        if r == 0:
            work += first_f + first_b
        if r == pp - 1 and not single:
            work += last_f + last_b
        best = max(best, fill + num_micro_batches * work)
        c0 = profile.chunk0_layers[r]
        fill += (first_f if r == 0 else af(c0)) + x.p2p_s
        if profile.backward_chain:
            fill += (first_b if r == 0 else ab(c0)) + x.p2p_s
    return best


def _bound_with_backward_gathers(u: UnitTimes, x: Extra, profile: ScheduleProfile, num_micro_batches: int) -> float:
    """``pipeline_bound_s`` when a backward gathers each unit 0 or 2 times: forwards as in
    ``_action_s``; a backward lasts at least its compute plus its first unit's first gather, and
    at least all its gathers (the compute after the last one is not counted: a bound)."""
    pp = len(profile.ranks)
    f, b, g, k = u.layer_f_s, u.layer_b_s, x.gather_layer_s, x.backward_gathers

    def fwd(n: int, ec: float, eg: float) -> float:
        return _action_s(n, f, g, ec, eg, ec if n == 0 else None, eg if n == 0 else None)

    def bwd(n: int, ec: float, eg: float) -> float:
        if k == 0:
            return n * b + ec
        first_g = g if n else eg
        return max(n * b + ec + first_g, k * (n * g + eg))

    best = fill = 0.0
    for r, (held, _) in enumerate(profile.ranks):
        ec_f = (u.first_f_s if r == 0 else 0.0) + (u.last_f_s if r == pp - 1 else 0.0)
        ec_b = (u.first_b_s if r == 0 else 0.0) + (u.last_b_s if r == pp - 1 else 0.0)
        eg = (x.gather_first_s if r == 0 else 0.0) + (x.gather_last_s if r == pp - 1 else 0.0)
        work = fwd(held, ec_f, eg) + bwd(held, ec_b, eg)
        best = max(best, fill + num_micro_batches * work)
        c0 = profile.chunk0_layers[r]
        fill += c0 * f + x.p2p_s
        if profile.backward_chain:
            fill += c0 * b + x.p2p_s
    return best


def _plain_bound_s(u: UnitTimes, p2p_s: float, profile: ScheduleProfile, num_micro_batches: int,
                   fill_first: bool = True) -> float:
    """``pipeline_bound_s`` without ZeRO-3 gathers: every action lasts its compute, so a rank's
    work is its layers times (F + B) plus the embedding / output units. ``fill_first=False``
    leaves the embedding out of the fill (``first_level_pipe_s``)."""
    layer = u.layer_f_s + u.layer_b_s
    first = u.first_f_s + u.first_b_s
    last = u.last_f_s + u.last_b_s
    chain = profile.backward_chain
    step_layer = layer if chain else u.layer_f_s
    step_first = first if chain else u.first_f_s
    hop = 2 * p2p_s if chain else p2p_s
    best = fill = 0.0
    c0 = profile.chunk0_layers
    emb_f = u.first_f_s if fill_first else 0.0
    for r, (held, _) in enumerate(profile.ranks):
        work = held * layer
        if profile.firsts[r]:
            work += first
        if profile.lasts[r]:
            work += last
        if profile.starts:  # the zero-bubble and DualPipe programs: the chains the rank's first action awaits
            fill = max((n * u.layer_f_s + e * emb_f + h * u.last_f_s + k * p2p_s for n, e, h, k in profile.starts[r]),
                       default=0.0)
        total = fill + num_micro_batches * profile.share * work
        if total > best:
            best = total
        if profile.fill:
            fill += c0[r] * step_layer + hop + (step_first if r == 0 and fill_first else 0.0)
    return best


def first_level_pipe_s(u: UnitTimes, p2p_s: float, profile: ScheduleProfile, num_micro_batches: int,
                       zero3: bool) -> float:
    """The first level of ``pipeline_bound_s``: no ZeRO-3 gathers at all (every action lasts at
    least its compute, ``_action_s``), and under ZeRO-3 no embedding in the fill (as
    ``_bound_with_backward_gathers`` counts it), so that with ``u`` at most the class's unit
    times it is at most ``pipeline_bound_s`` of any ZeRO stage (tests/sweep/test_lazy_bound.py)."""
    return _plain_bound_s(u, p2p_s, profile, num_micro_batches, fill_first=not zero3)


class MemoryModel:
    """``clustersim.memory.memory_report(...)`` of a pipeline rank assembled from the memory
    model's own parts (clustersim/memory/report.py: ``states``, ``activation_parts``,
    ``buffer_bytes``, ``assemble``), each cached at the coarsest key it depends on, so that a
    layout costs a few dictionary look-ups. tests/sweep/test_screen.py checks equality with the
    engine's memory on random layouts."""

    def __init__(self, base: Scenario) -> None:
        self.model, self.dtype = base.model, base.training.dtype
        self.framework = base.framework
        self.kernels = scenario_kernels(base)
        self.capacity = base.cluster.gpu.hbm_capacity_bytes
        self._states: dict[tuple[object, ...], tuple[int, int, int]] = {}
        self._units: dict[tuple[object, ...], LayerUnits] = {}
        self._buffers: dict[tuple[object, ...], tuple[float, float, int]] = {}
        self._factors: dict[tuple[object, ...], tuple[float, float]] = {}

    def report(self, p: ParallelLayout, rank: int, held: int, in_flight: float, first: bool, last: bool,
               ends: tuple[float, float], moe_held: int | None = None) -> MemoryReport:
        """The rank's MemoryReport (as the engine's ``memory_report``)."""
        *parts, host = self._parts(p, rank, held, in_flight, first, last, ends, moe_held)
        return assemble(*parts, rank, host)

    def rank_key(self, p: ParallelLayout, rank: int, held: int, in_flight: float, first: bool, last: bool,
                 ends: tuple[float, float], moe_held: int | None = None,
                 block: dict[tuple[object, ...], tuple] | None = None) -> tuple[int, int, int]:
        """(verdict index, reserved peak, -rank) of a rank, without building its MemoryReport."""
        st, act, trans, buf, nccl, _, factors, _ = self._parts(p, rank, held, in_flight, first, last, ends, moe_held,
                                                               block)
        *_, peak, interval = peak_numbers(st, act, trans, buf, nccl, factors)
        return verdict_index(interval, self.capacity), peak, -rank

    def _parts(self, p: ParallelLayout, rank: int, held: int, in_flight: float, first: bool, last: bool,
               ends: tuple[float, float], moe_held: int | None = None,
               block: dict[tuple[object, ...], tuple] | None = None) -> tuple:
        """``block``: the parts that depend on the layout and the rank's layers only, shared by the
        calls for one layout (uniform recompute policies: its schedules differ only in the
        in-flight counts)."""
        k = float(in_flight)
        static = block.get((held, moe_held, first, last)) if block is not None else None
        if static is None:
            static = self._static(p, rank, held, first, last, moe_held)
            if block is not None:
                block[(held, moe_held, first, last)] = static
        st, buf, pol, units, factors = static
        act, trans = combine(units, pol, held, k, first, last, ends, buf[1])
        st, act, host = offload(p, st, act, k, held, last)
        return st, act, trans, buf[0], buf[2], self.capacity, factors, host

    def _static(self, p: ParallelLayout, rank: int, held: int, first: bool, last: bool,
                moe_held: int | None) -> tuple:
        moe_layers = (held if moe_held is None else moe_held) if self.model.is_moe else None
        skey = (p.tp, p.ep, p.etp, p.dp, p.cp, p.zero_stage, p.hsdp_replicas, p.adam_moment_bytes, held, moe_layers,
                first, last)
        st = self._states.get(skey)
        if st is None:
            st = self._states[skey] = states(self.model, p, self.dtype, held, first, last, self.framework, moe_layers)
        bkey = (p.tp, p.cp, p.pp, p.dp, p.ep, p.etp, p.micro_batch, p.sequence_parallel, p.zero_stage,
                p.dp_bucket_params, p.hsdp_replicas, p.fsdp_version, p.fsdp_prefetch, p.reshard_after_forward,
                p.num_micro_batches > 1, held, first, last)
        buf = self._buffers.get(bkey)
        if buf is None:
            held_b, backward_b = buffer_bytes(self.model, p, self.dtype, held, first, last, self.framework)
            buf = self._buffers[bkey] = (held_b, backward_b, nccl_buffer_bytes(p))
        if uniform_policies(p):
            pol = RankPolicies(((p.recompute, held),) if held else (), 1)
        else:
            pol = rank_policies(p, self.model.layers, rank)
        share = moe_share(self.model, held, moe_layers)
        ukey = (p.tp, p.cp, p.ep, p.etp, p.cp_comm, p.micro_batch, p.sequence_parallel, p.recompute_modules,
                tuple(n for n, _ in pol.counts), pol.group_layers, share)
        units = self._units.get(ukey)
        if units is None:
            units = self._units[ukey] = layer_units(self.model, p, self.dtype, self.framework, self.kernels, pol,
                                                    share)
        fkey = (p.cp,)
        factors = self._factors.get(fkey)
        if factors is None:
            factors = self._factors[fkey] = interval_factors(self.model, p, self.framework)
        return st, buf, pol, units, factors

    def peak_bytes(self, p: ParallelLayout, held: int, in_flight: float, first: bool, last: bool,
                   rank: int = 0, ends: tuple[float, float] | None = None, moe_held: int | None = None) -> int:
        k = float(in_flight)
        return self.rank_key(p, rank, held, k, first, last, (k, k) if ends is None else ends, moe_held)[1]


class Screen:
    """Memory and step-time bound of layouts of one base scenario, with per-sweep caches
    (dicts keyed by layouts, so that the big Scenario is never hashed per layout)."""

    def __init__(self, base: Scenario) -> None:
        self.base = base
        self.memory = MemoryModel(base)
        self.compile = UnitCompiler()
        self._units: dict[tuple[object, ...], UnitTimes] = {}
        self._lower: dict[tuple[object, ...], UnitTimes] = {}
        self._parts: dict[tuple[object, ...], PartTimes] = {}
        self._pairs: dict[tuple[object, ...], UnitTimes] = {}
        # the third level's rank ends per class and schedule (clustersim.sweep.replay)
        self.replays: dict[tuple[object, ...], tuple[tuple[float, ...], tuple[tuple[tuple[int, float], ...], ...]]] = {}
        self._dp_keys: dict[tuple[int, ...], object] = {}
        self._p2p: dict[tuple[object, ...], float] = {}
        self._opt: dict[tuple[int, int, int], float] = {}
        self._extra: dict[tuple[object, ...], Extra] = {}
        self._tail: dict[tuple[object, ...], float] = {}
        self._dp: dict[tuple[object, ...], DpStream] = {}
        self._streams: dict[tuple[object, ...], tuple[RankStream, ...]] = {}
        self._sums: dict[tuple[object, ...], tuple[tuple[tuple[tuple[int, float], ...], float], ...]] = {}
        self._per_rank = per_rank_mode(base)
        # jitter_floor_s: the class's kernel seconds per layer and the profile's least layers, by identity
        self._floor_layer: dict[int, tuple[UnitTimes, float]] = {}
        self._floor_held: dict[int, tuple[ScheduleProfile, float]] = {}
        self._floor_frac: dict[int, float] = {}
        # the data-parallel stream term of the second level: on for MoE models (total_s)
        self.dp_term = base.model.is_moe

    def unit_times(self, layout: ParallelLayout) -> UnitTimes:
        """``unit_times`` of the layout's class (its units compiled by ``self.compile``)."""
        def price(rep: Scenario) -> UnitTimes:
            short = _shortened(rep)
            return _class_times(short, lambda w: self.compile(short, w).time_s)

        return self._of_class(self._units, price, layout)

    def part_times(self, layout: ParallelLayout) -> PartTimes:
        """``part_times`` of the layout's class (the third level, clustersim.sweep.replay)."""
        return self._of_class(self._parts, lambda rep: part_times(rep, self.compile), layout)

    def _of_class(self, cache: dict, price: Callable[[Scenario], Any], layout: ParallelLayout) -> Any:
        """``price`` of the layout's class representative, once per class."""
        key = self.class_key(layout)
        value = cache.get(key)
        if value is None:
            value = cache[key] = price(class_scenario(self.base, layout))
        return value

    def lower_times(self, layout: ParallelLayout) -> UnitTimes:
        """``lower_unit_times`` of the layout's class: every unit time at most ``unit_times``'."""
        return self._of_class(self._lower, _lower_of_class, layout)

    def class_key(self, p: ParallelLayout) -> tuple[object, ...]:
        """The unit-time class of a layout (the key of ``unit_times`` and ``lower_times``)."""
        return (p.tp, p.cp, p.ep, p.etp, self._dp_key(p), p.micro_batch, p.sequence_parallel, p.recompute)

    def count_classes(self, keys: np.ndarray) -> int:
        """Distinct unit-time classes of these rows of (tp, cp, pp, dp, ep, expert_tp, micro_batch,
        recompute index, sequence_parallel)."""
        from clustersim.sweep.evaluate import layout_from_key

        tmpl = self.base.parallel
        return len({self.class_key(layout_from_key((tp, cp, pp, dp, ep, etp, mb, 0, rec, sp, 1, 1, 0), tmpl))
                    for tp, cp, pp, dp, ep, etp, mb, rec, sp in keys.astype(np.int64).tolist()})

    def _dp_key(self, p: ParallelLayout) -> object:
        """What the data-parallel size changes in a unit-time class: nothing without expert
        parallelism (the class has dp = 1); with it, only the shapes of the groups that a layer's
        collectives run over (``class_dp_key``). Layouts whose EP sizes differ only in dp but
        whose groups sit alike on the domains share one class (MoE sweeps: dp from 1 to 1,024)."""
        if p.ep == 1:
            return 1
        k = (p.tp, p.cp, p.ep, p.etp, p.dp, p.cp_a2a)
        d = self._dp_keys.get(k)
        if d is None:
            d = self._dp_keys[k] = class_dp_key(self.base, p)
        return d

    def worst(self, layout: ParallelLayout, profile: ScheduleProfile,
              cache: dict[tuple[object, ...], tuple[int, int, int]] | None = None) -> tuple[int, int]:
        """(verdict index, reserved peak) of the pipeline rank that decides the verdict (the
        engine's ``worst_stage``). ``cache`` shares ranks between schedules of one layout
        (uniform recompute policies only)."""
        uniform = cache is not None or uniform_policies(layout)
        best: tuple[int, int, int] | None = None
        if cache is not None:
            # a rank's memory depends on its rank number only through non-uniform policies: the
            # entries of one layout are shared by ranks and schedules alike (the parts that do not
            # depend on the in-flight counts under the key None)
            block = cache.setdefault(None, {})  # type: ignore[call-overload]
        for r in profile.check_ranks if uniform else range(layout.pp):
            held, inflight = profile.ranks[r]
            first, last, ends, moe = profile.firsts[r], profile.lasts[r], profile.ends[r], profile.moe_held[r]
            if cache is not None:
                key = (held, inflight, ends, first, last, moe)
                vp = cache.get(key)
                if vp is None:
                    vp = cache[key] = self.memory.rank_key(layout, r, held, inflight, first, last, ends, moe, block)[:2]
                entry = (vp[0], vp[1], -r)
            else:
                entry = self.memory.rank_key(layout, r, held, inflight, first, last, ends, moe)
            if best is None or entry > best:
                best = entry
        assert best is not None
        return best[0], best[1]

    def peak_bytes(self, layout: ParallelLayout, profile: ScheduleProfile) -> int:
        """Peak memory per GPU of the deciding rank."""
        return self.worst(layout, profile)[1]

    def extra(self, layout: ParallelLayout, u: UnitTimes) -> Extra:
        """ZeRO-3 gathers and the pipeline transfer of this layout (``plan.zero3``, ``plan.comm_plans``).

        A unit's gathers all run on the rank's one data-parallel stream (``engine.recurrence``):
        its dense parameters over the shard group and, in a MoE layer, its experts' over the
        expert-data-parallel group (``plan.zero3.zero3_plan``), one after the other, so a layer's
        gather takes at least the two collectives' sum at the least parameters of any layer."""
        p = layout
        key = (p.tp, p.cp, p.pp, p.dp, p.ep, p.expert_tp, p.zero_stage == 3, p.recompute, u.p2p_bytes,
               u.layer_params, u.layer_expert_params)
        x = self._extra.get(key)
        if x is None:
            grid = replace(self.base, parallel=replace(p, schedule="1f1b", virtual_stages=1))
            # the fastest pipeline boundary stands for every hop (a bound)
            p2p = self.p2p_s(p, u.p2p_bytes)
            if p.zero_stage == 3 and p.dp * p.cp > 1:
                nbytes = activation_bytes(self.base.training.dtype)
                axis = zero3_shard_axis(grid)
                shard = p.dp * p.cp // p.hsdp_replicas > 1

                def gather(params: int, experts: int = 0) -> float:
                    t = zero3_collective(grid, "all_gather", params * nbytes, axis).time_s if params and shard else 0.0
                    if experts:
                        t += zero3_collective(grid, "all_gather", experts * nbytes, "edp").time_s
                    return t

                largest = max(u.layer_params + u.layer_expert_params, u.first_params, u.last_params)
                x = Extra(gather(u.layer_params, u.layer_expert_params), gather(u.first_params),
                          gather(u.last_params), p2p, zero3_backward_gathers(grid, largest))
            else:
                x = Extra(p2p_s=p2p)
            self._extra[key] = x
        return x

    def p2p_s(self, p: ParallelLayout, size_bytes: float) -> float:
        """The fastest pipeline boundary's transfer of ``size_bytes`` (``plan.comm_plans.pp_plan``):
        its time depends on the boundary only through the link's shape, priced once per shape."""
        if p.pp == 1:
            return 0.0
        stride, gpn = p.tp * p.cp * p.dp, self.base.cluster.gpus_per_domain
        key = (stride, p.pp, size_bytes)
        t = self._p2p.get(key)
        if t is None:
            links = {link_shape(stride, p.pp, gpn, r) for r in range(p.pp)}
            t = self._p2p[key] = min(plan_collective("send_recv", size_bytes, self.base.cluster, s).time_s
                                     for s in sorted(links, key=repr))
        return t

    def step_bound_s(self, layout: ParallelLayout, profile: ScheduleProfile, exact: bool = True,
                     level: int | None = None) -> float:
        """A lower bound on ``api.estimate(...).step_time_s`` (module docstring) at ``level``
        (default: 2 if ``exact`` else 0): 0 each unit's kernels alone (``lower_times``, what the
        screen computes), 1 the compiled units (``unit_times``) with the ZeRO-3 gathers, 2 also
        the data-parallel stream term of MoE models (``total_s``). Each level is at most the next."""
        if level is None:
            level = 2 if exact else 0
        if level == 0:
            u = self.lower_times(layout)
            bound = self.kernel_pipe_s(layout, u, profile, layout.num_micro_batches, layout.schedule)
        else:
            u = self.unit_times(layout)
            bound = self.exact_pipe_s(layout, u, profile, layout.num_micro_batches, layout.schedule)
            if level == 1:
                bound *= FIRST_SLACK
        return self.total_s(layout, u, profile, bound, level == 2, (layout.schedule, layout.virtual_stages)) \
            * (1.0 - BOUND_SLACK)

    def exact_pipe_s(self, layout: ParallelLayout, u: UnitTimes, profile: ScheduleProfile, num_micro_batches: int,
                     schedule: str) -> float:
        """The second level's ``pipeline_bound_s``; where the schedule runs a forward and a backward
        as one overlapped pair (DualPipe, DualPipe-V, Megatron's EP overlap: ``engine.pair``) a
        pair can take less than its two compiled actions, whose collectives hide behind each
        other's compute, so there every unit counts only ``pair_unit_times``."""
        if runs_pairs(layout, schedule):
            lo = self.pair_times(layout)
            return first_level_pipe_s(lo, self.p2p_s(layout, lo.p2p_bytes), profile, num_micro_batches,
                                      layout.zero_stage == 3) * FIRST_SLACK
        return pipeline_bound_s(u, self.extra(layout, u), profile, num_micro_batches)

    def kernel_pipe_s(self, layout: ParallelLayout, lower: UnitTimes, profile: ScheduleProfile,
                      num_micro_batches: int, schedule: str) -> float:
        """Level 0's pipeline bound (the screen's): ``exact_pipe_s`` with each unit's kernels alone
        (``lower``, at most the compiled units and the pair times: the bound is increasing in
        them), ZeRO-3 gathers included except in pair schedules, which level 1 prices without."""
        if layout.zero_stage == 3 and not runs_pairs(layout, schedule):
            return pipeline_bound_s(lower, self.extra(layout, lower), profile, num_micro_batches) * KERNEL_SLACK
        return first_level_pipe_s(lower, self.p2p_s(layout, lower.p2p_bytes), profile, num_micro_batches,
                                  layout.zero_stage == 3) * KERNEL_SLACK

    def pair_times(self, layout: ParallelLayout) -> UnitTimes:
        """``pair_unit_times`` of the layout's class, from the class's cached kernel and compiled times."""
        key = self.class_key(layout)
        t = self._pairs.get(key)
        if t is None:
            t = self._pairs[key] = pair_unit_times(self.lower_times(layout), self.unit_times(layout),
                                                   overlap_slowdown(self.base.cluster.gpu))
        return t

    def total_s(self, layout: ParallelLayout, u: UnitTimes, profile: ScheduleProfile, pipe_s: float,
                exact: bool, schedule: tuple[str, int]) -> float:
        """The bound from the pipeline bound ``pipe_s``: plus the optimizer step and, with the
        backward chain, ``tail_s``; at the second level (``exact``) of a MoE model at least the
        bound from rank 0's data-parallel stream (``dp_bound_s``); then the least wait for the
        slowest GPU (``jitter_floor_s``). ``schedule``: the layout's
        (schedule, virtual stages), which the screen's ``layout`` does not carry.

        Dense models leave the data-parallel term out (still a bound, only looser): measured on
        idle cores it doubled the GPT-3 175B sweep (27.8 s -> 52.4 s wall, 45.6 -> 83.3 s CPU) and
        left its closed-form evaluations at 102 (the five-cluster compare: 2,686 -> 2,634), while
        a MoE bound without it is as low as 0.42 of the closed form (expert gradients over their
        own group; docs/sweep.md)."""
        opt, tail = self.step_terms(layout, u, profile)
        bound = pipe_s + opt + tail
        if exact and self.dp_term:
            if profile.backward_chain:
                bound = max(bound, self.dp_bound_s(layout, schedule, u, profile, pipe_s, opt))
            else:
                bound = max(bound, self.stream_floor_s(layout, schedule, u, profile))
        return bound + self.jitter_floor_s(layout, profile, u)

    def jitter_floor_s(self, layout: ParallelLayout, profile: ScheduleProfile, u: UnitTimes) -> float:
        """The least wait for the slowest GPU that the plan adds to any rank before its optimizer
        step (clustersim.plan.step_terms: ``sync_wait_fraction`` of the rank's kernel seconds),
        from the kernels alone of the layers each rank holds: every bound above ends with some
        rank's optimizer step, which comes after that wait, so adding it keeps them bounds.
        ``u``: the layout's unit times (of its class), which key the class's kernel seconds."""
        if self._per_rank:
            return 0.0
        gpus = layout.num_gpus
        frac = self._floor_frac.get(gpus)
        if frac is None:
            frac = self._floor_frac[gpus] = sync_wait_fraction(gpus)
        if frac <= 0.0:
            return 0.0
        layer = self._floor_layer.get(id(u))
        if layer is None:
            lo = self.lower_times(layout)
            self._floor_layer[id(u)] = layer = (u, lo.layer_f_s + lo.layer_b_s)   # keeps u alive: its id stays valid
        held = self._floor_held.get(id(profile))
        if held is None:
            self._floor_held[id(profile)] = held = (profile, min(h for h, _ in profile.ranks) * profile.share)
        return frac * held[1] * layout.num_micro_batches * layer[1]

    def step_terms(self, layout: ParallelLayout, u: UnitTimes, profile: ScheduleProfile) -> tuple[float, float]:
        """What ``total_s`` adds to the pipeline bound below the second level: the optimizer step
        and, with the backward chain, ``tail_s`` (else 0). Both read the class only through its
        parameter counts."""
        return (self.optimizer_s(layout, u, profile),
                self.tail_s(layout, u, profile) if profile.backward_chain else 0.0)

    def stream_floor_s(self, layout: ParallelLayout, schedule: tuple[str, int], u: UnitTimes,
                       profile: ScheduleProfile) -> float:
        """The second level of the schedules without the backward chain (zero-bubble, DualPipe):
        every pipeline rank runs its actions back to back (``programs.final_counts``: an action
        alone lasts its compiled units, a pair ``pair_s``) from no earlier than its first
        action's inputs arrive (their producers' ranks run back to back from their own start up
        to them, then one transfer), so it ends no earlier than its start plus all of them,
        then its optimizer step; with a data-parallel stream (ZeRO 0-2, ``dpbound.RankStream``)
        each final backward enqueues its buckets no earlier than its start plus the actions
        before it (a pair: plus itself). The third level replays every wait instead
        (clustersim.sweep.replay); this one reads each rank's sums only."""
        p = layout
        if (p.schedule, p.virtual_stages) != schedule:
            p = replace(p, schedule=schedule[0], virtual_stages=schedule[1])
        if p.pp == 1:
            return 0.0
        streams = self.rank_streams(p) if self.dp_term else ()
        best = 0.0
        for r, (at, end) in enumerate(self._rank_sums(p, u)):
            opt = self.rank_optimizer_s(p, u, profile, r)
            best = max(best, streams[r].bound_s(at, end, opt) if streams else end + opt)
        return best

    def _rank_sums(self, p: ParallelLayout, u: UnitTimes
                   ) -> tuple[tuple[tuple[tuple[int, float], ...], float], ...]:
        """Per rank of ``stream_floor_s``: each final backward's (stage, earliest enqueue) and
        the rank's earliest end; they depend on the layout only through its class and program (ZeRO stages
        and offload share them)."""
        p2p = self.p2p_s(p, u.p2p_bytes)
        key = (self.class_key(p), p.schedule, p.pp, p.num_micro_batches, p.virtual_stages,
               p.overlap_moe_expert_parallel_comm, p2p)
        sums = self._sums.get(key)
        if sums is not None:
            return sums
        durations = stage_durations(self.base.model, p, self.part_times(p))
        slowdown = overlap_slowdown(self.base.cluster.gpu)
        ranks = final_counts(p.schedule, p.pp, p.num_micro_batches, p.virtual_stages,
                             p.overlap_moe_expert_parallel_comm)
        seconds = [[durations[k[0]][0] if len(k) == 1 else pair_s(durations[k[0]], durations[k[1]], slowdown)
                    for k in kinds] for kinds, _, _, _ in ranks]

        def dot(counts: tuple[int, ...], d: list[float]) -> float:
            return sum(n * x for n, x in zip(counts, d, strict=True))

        starts: dict[int, float] = {}

        def start(r: int) -> float:
            t = starts.get(r)
            if t is None:
                t = starts[r] = max((start(q) + dot(c, seconds[q]) + p2p for q, c in ranks[r][3]), default=0.0)
            return t

        out = []
        for r, (_, finals, total, _) in enumerate(ranks):
            d, t0 = seconds[r], start(r)
            at = tuple((g, t0 + dot(counts, d) + (d[own] if own >= 0 else 0.0))
                       for counts, own, stages in finals for g in stages)
            out.append((at, t0 + dot(total, d)))
        sums = self._sums[key] = tuple(out)
        return sums

    def dp_bound_s(self, layout: ParallelLayout, schedule: tuple[str, int], u: UnitTimes, profile: ScheduleProfile,
                   pipe_s: float, optimizer_s: float) -> float:
        """The step's lower bound from rank 0's data-parallel stream (clustersim.sweep.dpbound)
        given ``pipe_s`` from the second level (``_plain_bound_s``: ZeRO 0-2); 0 where it does not
        apply (no backward chain, ZeRO-3, per-rank scenarios)."""
        p = layout
        stream = self.dp_stream(p, schedule, profile)
        if stream is None:
            return 0.0
        # what _plain_bound_s counts for rank 0's last action (chunk 0's backward), or more
        last_action = profile.chunk0_layers[0] * u.layer_b_s + u.first_b_s + u.last_b_s
        chunks = 0.0
        sched, v = schedule
        if sched == "interleaved-1f1b" and v > 1 and p.pp > 1 and not p.overlap_moe_expert_parallel_comm:
            # rank 0's chunks hold global stages c * pp (neither the last stage nor, past chunk 0, the embedding)
            counts = split_layers(self.base.model.layers, self.base.model.mtp_layers, p.pp, v)
            fwd = [counts[c * p.pp] * u.layer_f_s + (u.first_f_s if c == 0 else 0.0) for c in range(v)]
            bwd = [counts[c * p.pp] * u.layer_b_s + (u.first_b_s if c == 0 else 0.0) for c in range(v)]
            chunks = chunk_stream_s(stream, final_prefixes(p.pp, p.num_micro_batches, v), fwd, bwd)
        return stream.bound_s(pipe_s, last_action, optimizer_s, chunks)

    def dp_stream(self, layout: ParallelLayout, schedule: tuple[str, int], profile: ScheduleProfile
                  ) -> DpStream | None:
        """Rank 0's data-parallel stream (``dpbound.dp_stream``) of ``layout`` run with ``schedule``
        (schedule, virtual stages); None where the stream term does not apply (no backward
        chain, ZeRO-3, no data parallelism, per-rank scenarios)."""
        p = layout
        if not profile.backward_chain or p.zero_stage == 3 or p.dp * p.cp == 1 or self._per_rank:
            return None
        if (p.schedule, p.virtual_stages) != schedule:
            p = replace(p, schedule=schedule[0], virtual_stages=schedule[1])
        key = self._stream_key(p)
        stream = self._dp.get(key)
        if stream is None:  # rank 0's stages alone, unless every rank's streams are at hand
            streams = self._streams.get(key) or streams_of(replace(self.base, parallel=p), (0,))
            stream = self._dp[key] = stream_of(streams[0], p.pp)
        return stream

    def _stream_key(self, p: ParallelLayout) -> tuple[object, ...]:
        """What a layout's data-parallel plan depends on: its groups, its stages and whether ZeRO
        is on (plan.data_parallel._dp_plan: stages 1 and 2 reduce and gather alike); schedules that
        place the stages alike (GPipe, 1F1B and ZB-H1; ZB-V and DualPipe-V) share it."""
        graph = stage_graph(p.schedule, p.pp, p.virtual_stages, p.num_micro_batches)
        return p.tp, p.cp, p.pp, p.dp, p.ep, p.expert_tp, min(p.zero_stage, 1), graph.placement, graph.model_stage

    def rank_streams(self, layout: ParallelLayout) -> tuple[RankStream, ...]:
        """``dpbound.rank_streams`` of the layout (the third level, clustersim.sweep.replay); ()
        for scenarios run per rank class, whose plans are priced per class."""
        p = layout
        if p.zero_stage == 3 or p.dp * p.cp == 1 or self._per_rank:
            return ()
        key = self._stream_key(p)
        streams = self._streams.get(key)
        if streams is None:
            streams = self._streams[key] = rank_streams(replace(self.base, parallel=p))
        return streams

    def tail_s(self, layout: ParallelLayout, u: UnitTimes, profile: ScheduleProfile) -> float:
        """Data-parallel work of rank 0 that can only start once its last backward unit (the
        embedding) is done and that the optimizer step waits for, or that follows the step
        (``plan.data_parallel``): without overlap, the reduction of all its gradients (at least one
        collective of their total size: a collective's time is concave in its size, so the
        buckets take no less); with overlap, the reduction of the last bucket, which holds at
        least the embedding's gradients; without overlapped parameter gathers, the gather of
        all its parameters after the step. ZeRO-3 reduce-scatters the embedding's gradients."""
        p = layout
        if p.dp * p.cp == 1:
            return 0.0
        held0 = profile.ranks[0][0]
        params0 = held0 * u.layer_params + u.first_params + (u.last_params if p.pp == 1 else 0)
        key = (p.tp, p.cp, p.pp, p.dp, p.ep, p.zero_stage, p.overlap_grad_reduce, p.overlap_param_gather,
               params0, u.first_params)
        t = self._tail.get(key)
        if t is None:
            grid = replace(self.base, parallel=replace(p, schedule="1f1b", virtual_stages=1))
            grad_bytes = grad_reduce_bytes(grid)
            t = 0.0
            if p.zero_stage == 3:
                if not self.base.model.is_moe and u.first_params:
                    rb = grad_reduce_bytes(grid)
                    ranks = p.dp * p.cp // p.hsdp_replicas
                    if ranks > 1:
                        t = zero3_collective(grid, "reduce_scatter", u.first_params * rb,
                                             zero3_shard_axis(grid)).time_s
            elif not self.base.model.is_moe:
                op = "all_reduce" if p.zero_stage == 0 else "reduce_scatter"
                reduced = params0 if not p.overlap_grad_reduce else min(u.first_params, params0)
                t = comm_plan(grid, op, reduced * grad_bytes, "dp_cp").time_s if reduced else 0.0
                if p.zero_stage in (1, 2) and not p.overlap_param_gather:
                    nbytes = activation_bytes(self.base.training.dtype)
                    t += comm_plan(grid, "all_gather", params0 * nbytes, "dp_cp").time_s
            self._tail[key] = t
        return t

    def optimizer_s(self, layout: ParallelLayout, u: UnitTimes, profile: ScheduleProfile) -> float:
        """Rank 0's optimizer step (``plan.stage_work``: its parameters, before ZeRO sharding); for
        the schedules without the backward chain (zero-bubble, DualPipe), where the step ends with
        some rank's optimizer after all its work, the step of the rank holding the fewest layers
        (no embedding or head counted): every rank's own step takes at least that long."""
        if profile.backward_chain:  # rank 0 holds the embedding, and the head only when pp == 1
            return self.rank_optimizer_s(layout, u, profile, 0)
        params0 = min(m * u.moe_all_params + (held - m) * u.layer_all_params
                      for (held, _), m in zip(profile.ranks, profile.moe_held, strict=True))
        return self._step_s(layout, params0)

    def rank_optimizer_s(self, layout: ParallelLayout, u: UnitTimes, profile: ScheduleProfile, rank: int) -> float:
        """Pipeline rank ``rank``'s optimizer step, at most the engine's (its layers, the
        embedding and the head where it holds them; layers at the cheaper kind's parameters)."""
        (held, _), m = profile.ranks[rank], profile.moe_held[rank] if self.base.model.is_moe else 0
        params = m * u.moe_all_params + (held - m) * u.layer_all_params \
            + (u.first_params if profile.firsts[rank] else 0) + (u.last_params if profile.lasts[rank] else 0)
        return self._step_s(layout, params)

    def _step_s(self, layout: ParallelLayout, params: int) -> float:
        """The optimizer step of a rank holding ``params`` parameters, as ``plan.stage_work`` prices
        it: Adam (or the host's), the passes over the whole gradient buffer and the gradient
        norm's all-reduce (all monotone in the parameters)."""
        key = (params, layout.dp, layout.cp, layout.zero_stage, layout.offload_optimizer, layout.num_gpus)
        opt = self._opt.get(key)
        if opt is None:
            opt = self._opt[key] = optimizer_step_s(replace(self.base, parallel=layout), params)
        return opt

    def profile(self, layout: ParallelLayout) -> ScheduleProfile:
        return self.profile_of(layout.schedule, layout.pp, layout.num_micro_batches, layout.virtual_stages)

    def profile_of(self, schedule: str, pp: int, num_micro_batches: int, virtual_stages: int) -> ScheduleProfile:
        return schedule_profile(schedule, pp, num_micro_batches, virtual_stages, self.base.model.layers,
                                self.base.model.moe_first_dense_layers, self.base.model.mtp_layers,
                                self.base.model.moe_every)


@functools.lru_cache(maxsize=4)
def screen_for(base: Scenario) -> Screen:
    """One Screen (with its caches) per base scenario in each worker process."""
    return Screen(base)


def kernel_screen_shape(base: Scenario, shape: Shape, micro_batches: tuple[int, ...],
                        space: SearchSpace) -> np.ndarray:
    """``screen_shape`` at level 0 (each unit's kernels alone), which ``compiled_bounds`` then
    raises lazily: the sweep's screener before the screen priced the compiled units itself
    (tests/sweep/test_lazy_bound.py keeps the three-level branch and bound exact)."""
    return screen_shape(base, shape, micro_batches, space, level=0)


def compiled_bounds(base: Scenario, keys: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """The first level of the bound (``step_bound_s`` at level 1: the compiled units and the ZeRO-3
    gathers, no data-parallel stream term) of each layout key."""
    from clustersim.sweep.evaluate import layout_from_key

    sc = screen_for(base)
    out = np.empty(len(keys), dtype=np.float64)
    for i, key in enumerate(keys):
        layout = layout_from_key(key, base.parallel)
        out[i] = sc.step_bound_s(layout, sc.profile(layout), level=1)
    return out


def exact_bounds(base: Scenario, keys: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """The second-level bound (``step_bound_s`` with the class's unit times) of each layout key:
    what ``screen_shape(..., exact=True)`` puts in its bound column for the same layout."""
    from clustersim.sweep.evaluate import layout_from_key

    sc = screen_for(base)
    out = np.empty(len(keys), dtype=np.float64)
    for i, key in enumerate(keys):
        layout = layout_from_key(key, base.parallel)
        out[i] = sc.step_bound_s(layout, sc.profile(layout))
    return out


def screen_shape(base: Scenario, shape: Shape, micro_batches: tuple[int, ...],
                 space: SearchSpace, exact: bool = False, vectorized: bool = True, level: int = 1) -> np.ndarray:
    """Rows ``layout_key + (fits, peak_bytes_per_gpu, bound_step_time_s, verdict)`` (verdict: the index in
    clustersim.memory.report.VERDICTS; fits = not does-not-fit) of the layouts of ``shape`` with these micro-batch
    sizes, in the order of ``space.shape_layouts`` (the loops below are its loops; work that
    does not depend on an inner loop's option is done outside it). The bound is at ``level``
    (``Screen.step_bound_s``: 0 the kernels alone, 1 the compiled units) or, with ``exact``, at
    the second level; the sweep refines it where it matters (``exact_bounds``).
    ``vectorized``: a layout's schedules and offload options at once (``_Rows``) where its
    recompute policies are uniform (False: one by one through ``Screen.worst``, for tests)."""
    sc = screen_for(base)
    level = 2 if exact else level
    exact = level == 2
    model, tmpl = base.model, base.parallel
    gb, layers = tmpl.global_batch, model.layers
    sps = sequence_parallel_options(model, shape, space)
    zeros = zero_options(shape, space, tmpl.hsdp_replicas)
    offloads = offload_options(model, space, base.cluster.pcie is not None)
    rows: list[np.ndarray] = []
    collect: _Rows | None = None
    for mb in micro_batches:
        nmb = gb // (shape.dp * mb)
        scheds = schedule_options(shape, nmb, layers, space, model.is_moe)
        profiles = [sc.profile_of(s, shape.pp, nmb, v) for s, v in scheds]
        bounds: dict[tuple[str, bool, bool], list[float]] = {}
        for zero in zeros:
            for rec in space.recompute:
                for sp in sps:
                    # the template carries the options the sweep does not search (overlaps, FSDP
                    # settings, partial recompute)
                    p0 = replace(tmpl, tp=shape.tp, pp=shape.pp, dp=shape.dp, cp=shape.cp, ep=shape.ep,
                                 expert_tp=shape.etp, sequence_parallel=sp, zero_stage=zero, micro_batch=mb,
                                 global_batch=gb, recompute=rec, schedule="1f1b", virtual_stages=1,
                                 offload_optimizer=False)
                    uniform = uniform_policies(p0)
                    zero3 = zero == 3
                    pipe = bounds.get((rec, sp, zero3))
                    if level:
                        u = sc.unit_times(p0)
                        if pipe is None:
                            slack = FIRST_SLACK if level == 1 else 1.0
                            pipe = bounds[(rec, sp, zero3)] = [sc.exact_pipe_s(p0, u, prof, nmb, sched) * slack
                                                               for (sched, _), prof in zip(scheds, profiles, strict=True)]
                    else:
                        u = sc.lower_times(p0)
                        if pipe is None:
                            pipe = bounds[(rec, sp, zero3)] = [sc.kernel_pipe_s(p0, u, prof, nmb, sched)
                                                               for (sched, _), prof in zip(scheds, profiles, strict=True)]
                    key_head = (shape.tp, shape.cp, shape.pp, shape.dp, shape.ep, shape.etp, mb, zero,
                                RECOMPUTE.index(rec), int(sp))
                    by_off = [(off, replace(p0, offload_optimizer=off) if off else p0) for off in offloads]
                    if uniform and not p0.offload_activations and vectorized:
                        if collect is None:
                            collect = _Rows(sc)
                        collect.add(key_head, by_off, scheds, profiles, pipe, u, zero, exact)
                        continue
                    if collect is not None:  # keep the loops' order: what was collected goes first
                        rows.append(collect.array())
                        collect = None
                    ranks: dict[bool, dict[tuple[object, ...], tuple[int, int, int]]] = {}
                    block: list[tuple[float, ...]] = []
                    for (sched, v), prof, pipe_s in zip(scheds, profiles, pipe, strict=True):
                        if not schedule_zero_ok(sched, zero):
                            continue
                        for off, p in by_off:
                            pv = p if uniform else replace(p, schedule=sched, virtual_stages=v)
                            verdict, peak = sc.worst(pv, prof, ranks.setdefault(off, {}) if uniform else None)
                            bound = sc.total_s(p, u, prof, pipe_s, exact, (sched, v))
                            block.append((*key_head, SCHEDULES.index(sched), v, int(off), float(verdict != 2),
                                          float(peak), bound * (1.0 - BOUND_SLACK), float(verdict)))
                    rows.append(np.array(block, dtype=np.float64).reshape(len(block), 17))
    if collect is not None:
        rows.append(collect.array())
    return np.concatenate(rows, axis=0) if rows else np.zeros((0, 17))


# A peak and its verdict in one int64 that orders like (verdict, peak): peaks stay below 2**50
# (MAX_SIZE_BYTES, clustersim.limits), verdicts are 0-2.
_VERDICT_SCALE = 2**53


class _Rows:
    """Rows of a task's layouts with uniform recompute policies and no activation offload,
    collected layout by layout and given their memory at the end, all at once: the arithmetic of
    ``MemoryModel.rank_key`` (``memory.activations.combine``, ``memory.report.offload``,
    ``peak_numbers``, ``verdict_index``) on arrays of the ranks that can hold the peak, to the
    byte (tests/sweep/test_lazy_bound.py compares it with ``Screen.worst`` row by row). Each
    (layout row, rank) pair is kept as two indices: the rank's schedule-dependent numbers
    (``dyn``) and the layout's static parts of that rank (``static``), both stored once."""

    def __init__(self, sc: Screen) -> None:
        self.sc = sc
        self.rows: list[tuple[float, ...]] = []
        self.dyn_of: list[int] = []      # per pair: its row of self.dyn
        self.static_of: list[int] = []   # per pair: its row of self.static
        self.dyn: list[tuple[float, ...]] = []
        self.static: list[tuple[float, ...]] = []
        self.starts: list[int] = []
        self._ranks: dict[int, list[tuple[int, tuple[object, ...], int]]] = {}
        self._keep: list[ScheduleProfile] = []  # keeps the ids of _ranks' keys valid
        # the optimizer step and tail of the bound per (profile, layout) of one micro-batch size
        # and ZeRO stage: they read the class only through its parameter counts (``total_s``),
        # which recompute and sequence parallelism leave alone
        self._steps: dict[tuple[object, ...], tuple[float, float]] = {}

    def _profile_ranks(self, prof: ScheduleProfile) -> list[tuple[int, tuple[object, ...], int]]:
        """Per rank that can hold the peak: its row of ``dyn`` ((held, in flight, ends, first,
        last)), the key of its static parts, the rank."""
        out = self._ranks.get(id(prof))
        if out is None:
            out = self._ranks[id(prof)] = []
            for r in prof.check_ranks:
                out.append((len(self.dyn), (prof.ranks[r][0], prof.moe_held[r], prof.firsts[r], prof.lasts[r]), r))
                self.dyn.append((float(prof.ranks[r][0]), float(prof.ranks[r][1]), float(prof.ends[r][0]),
                                 float(prof.ends[r][1]), float(prof.firsts[r]), float(prof.lasts[r])))
            self._keep.append(prof)
        return out

    def add(self, key_head: tuple[int, ...], by_off: list[tuple[bool, ParallelLayout]],
            scheds: list[tuple[str, int]], profiles: list[ScheduleProfile], pipe: list[float], u: UnitTimes,
            zero: int, exact: bool) -> None:
        """The rows of one layout's schedules and offload options, in the order of the loops."""
        sc = self.sc
        statics = [(off, p, {}) for off, p in by_off]
        uparams = (u.layer_params, u.first_params, u.last_params, u.layer_all_params, u.moe_all_params,
                   u.layer_expert_params)
        for (sched, v), prof, pipe_s in zip(scheds, profiles, pipe, strict=True):
            if not schedule_zero_ok(sched, zero):
                continue
            ranks = self._profile_ranks(prof)
            head = (*key_head, SCHEDULES.index(sched), v)
            for off, p, parts in statics:
                self.starts.append(len(self.dyn_of))
                for dyn, key, r in ranks:
                    c = parts.get(key)
                    if c is None:
                        st, buf, pol, units, factors = sc.memory._static(p, r, key[0], key[2], key[3], key[1])
                        w, g, o = st
                        if p.offload_optimizer:  # memory.report.offload
                            o = 0
                        if p.offload_params:
                            w = 0
                        per = dict(units.per_policy)[p.recompute] if pol.counts else 0.0
                        c = parts[key] = len(self.static)
                        self.static.append((w, g, o, buf[0], buf[1], buf[2], per, units.embedding, units.output,
                                            units.working, units.loss, *factors))
                    self.dyn_of.append(dyn)
                    self.static_of.append(c)
                if exact:
                    bound = sc.total_s(p, u, prof, pipe_s, exact, (sched, v))
                else:  # total_s below the second level
                    skey = (id(prof), off, p.dp, p.cp, p.zero_stage, uparams)
                    terms = self._steps.get(skey)
                    if terms is None:
                        terms = self._steps[skey] = sc.step_terms(p, u, prof)
                    bound = pipe_s + terms[0] + terms[1] + sc.jitter_floor_s(p, prof, u)
                self.rows.append((*head, int(off), bound * (1.0 - BOUND_SLACK)))

    def array(self) -> np.ndarray:
        """The collected rows (KEY_FIELDS + SCREEN_FIELDS)."""
        if not self.rows:
            return np.zeros((0, 17))
        d = np.array(self.dyn, dtype=np.float64)[np.array(self.dyn_of, dtype=np.int64)]
        held, k, e0, e1 = d[:, 0], d[:, 1], d[:, 2], d[:, 3]
        first, last = d[:, 4] == 1.0, d[:, 5] == 1.0
        a = np.array(self.static, dtype=np.float64)[np.array(self.static_of, dtype=np.int64)]
        w, g, o, buf0, buf1, nccl = (a[:, i].astype(np.int64) if i in (0, 1, 2, 5) else a[:, i] for i in range(6))
        per, emb, outb, working, loss, lo, hi = (a[:, i] for i in range(6, 13))
        act = np.where(held > 0, held * per, 0.0) * k                       # combine
        act = np.where(first, act + emb * e0, act)
        act = np.where(last, act + outb * e1, act)
        busy = (held > 0) & (k != 0.0)
        trans = np.where(busy, working + buf1, 0.0)
        trans = np.where(busy & last, np.maximum(trans, loss), trans)
        states_b = w + g + o                                                # peak_numbers
        allocated = states_b + np.rint(act).astype(np.int64) + np.rint(trans).astype(np.int64) \
            + np.rint(buf0).astype(np.int64) + CUBLAS_WORKSPACE_BYTES
        frag = np.rint(np.maximum(0.0, (allocated - states_b).astype(np.float64)) * FRAGMENTATION).astype(np.int64)
        outside = CUDA_CONTEXT_BYTES + nccl
        lo_b = np.rint((allocated + outside).astype(np.float64) * lo).astype(np.int64)
        hi_b = np.rint((allocated + frag + outside).astype(np.float64) * hi).astype(np.int64)
        peak = allocated + frag + outside
        cap = self.sc.memory.capacity
        verdict = np.where(lo_b > cap, 2, np.where(hi_b <= cap, 0, 1))     # verdict_index
        worst = np.maximum.reduceat(verdict * _VERDICT_SCALE + peak, np.array(self.starts))
        v_w, peak_w = worst // _VERDICT_SCALE, worst % _VERDICT_SCALE
        rows = np.array(self.rows, dtype=np.float64)
        out = np.empty((len(self.rows), 17))
        out[:, :13] = rows[:, :13]
        out[:, 13] = v_w != 2
        out[:, 14] = peak_w
        out[:, 15] = rows[:, 13]
        out[:, 16] = v_w
        return out
