"""Unit times of a layout's class: what one micro-batch's units take on one GPU, for the bounds.

The bounds read a layout's work through its *unit-time class* (tp, cp, ep, etp, micro-batch,
sequence parallelism, recompute; for expert-parallel layouts also the shapes of the groups a
layer's collectives run over, ``class_dp_key``): the class's representative is the layout on one
pipeline stage without data parallelism (``class_scenario``), whose stage work
(``plan.stage_work.build_step_work``) holds every unit the layout's stages run. Each unit is
priced as the engines run it (``plan.compiled_unit.compile_unit``, shared between classes by
``plan.compiled_unit.unit_key``) or, for the level-0 bound, by its kernels alone (``compute_s``).
``ClassTimes`` keeps them per class in the run's ``SweepMemo``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import NamedTuple

from clustersim.compute.host import own_deficit_s
from clustersim.compute.ops import COMM_GROUPS, Op
from clustersim.errors import InputError
from clustersim.memory.policies import uniform_policies
from clustersim.parallel.layout import ParallelLayout
from clustersim.parallel.placement import axis_shape_for
from clustersim.plan.compiled_unit import CompiledUnit, compile_unit, unit_key
from clustersim.plan.overlap import overlap_slowdown
from clustersim.plan.stage_work import StepWork, Work, build_step_work
from clustersim.plan.step_terms import issue_rules
from clustersim.scenario import Scenario
from clustersim.sweep.memo import SweepMemo


class UnitSeconds(NamedTuple):
    """A unit (or a sum of units) in four numbers: its compiled contention-free seconds, the
    seconds of its kernels, those of its collectives and those of its blocking collectives."""

    compiled_s: float
    kernels_s: float
    collectives_s: float
    blocking_s: float = 0.0   # of them, the collectives that hold the compute stream (not overlapped)


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
    layer_all_expert_params: int = 0  # the experts' share of layer_all_params (the optimizer steps them over edp)
    moe_all_expert_params: int = 0    # the experts' share of moe_all_params


PARTS = ("F", "B", "Bi", "W")


@dataclass(frozen=True, slots=True)
class PartTimes:
    """Per part of an action (``PARTS``: forward, whole backward, its input- and weight-gradient
    halves) the ``UnitSeconds`` of one layer (each the least over the layer kinds), of the
    embedding's unit and of the units after the layers (MTP modules and the head), for the
    sweep's third level (clustersim.sweep.replay)."""

    layer: dict[str, UnitSeconds]
    first: dict[str, UnitSeconds]
    last: dict[str, UnitSeconds]
    # parameters (experts included) of one layer (the least over the layer kinds), of the
    # embedding and of the units after the layers: what a stage's gradient pass reads
    layer_params: int = 0
    first_params: int = 0
    last_params: int = 0


def class_scenario(base: Scenario, layout: ParallelLayout) -> Scenario:
    """The representative of a layout's unit-time class: one stage, no data parallelism, and no
    pass over the gradients after each backward (``FrameworkSpec.micro_batch_grad_bytes_per_param``):
    the plan runs that pass once per stage over the stage's parameters, which one stage holding
    the whole model would price over all of them on the embedding's unit; the third level adds
    it per stage (``programs.stage_durations``)."""
    # an expert-parallel layout keeps its data-parallel ranks: the EP group (and where its ranks
    # sit) is part of the layer's cost
    dp = layout.dp if layout.ep > 1 else 1
    rep = replace(layout, pp=1, dp=dp, zero_stage=0, schedule="1f1b", virtual_stages=1,
                  global_batch=layout.micro_batch * dp, offload_optimizer=False)
    fw = base.framework
    if fw.micro_batch_grad_bytes_per_param:
        fw = replace(fw, micro_batch_grad_bytes_per_param=0)
    return replace(base, parallel=rep, framework=fw)


# The groups a layer's collectives name (clustersim.compute.ops.COMM_GROUPS, less the host link,
# whose plan depends on the cluster alone).
LAYER_GROUPS = tuple(g for g in COMM_GROUPS if g != "host")


def class_dp_key(base: Scenario, layout: ParallelLayout) -> tuple[object, ...]:
    """The data-parallel size as a unit-time class sees it: the shape of every group a layer's
    collectives run over in ``class_scenario``. A layer's ops depend on the layout only through
    ``compute.layer.compute_layout`` (no dp) and its collectives' plans only through the cluster
    and these group shapes (``plan.compiled_unit.unit_key``), so two layouts with equal (tp, cp,
    ep, etp, micro-batch, sp, recompute) and equal keys have equal unit times
    (tests/sweep/test_lazy_bound.py checks it on random layouts). A layout whose groups the
    placement cannot shape keeps its dp (never shared)."""
    rep = class_scenario(base, layout).parallel
    c = base.cluster
    try:
        return tuple((g, axis_shape_for(rep, c.gpus_per_domain, g, c.gpus_per_domain > c.gpus_per_node))
                     for g in LAYER_GROUPS)
    except (InputError, ValueError):
        return ("dp", layout.dp)


def shortened(rep: Scenario) -> Scenario:
    """A class representative on as few layers as give its minima: with uniform recompute
    policies every layer of one kind (dense, MoE) has the same units and parameters, so one
    layer of each kind the model has gives the same unit times (tests/sweep/test_lazy_bound.py)."""
    m = rep.model
    if uniform_policies(rep.parallel) and m.layers > m.layers_covering_kinds():   # one layer of each kind
        rep = replace(rep, model=replace(m, layers=m.layers_covering_kinds()))
    return rep


def compute_s(work: Work) -> float:
    """Seconds of a unit's kernels (``Op``) run back to back: a lower bound on the unit's
    contention-free time (``plan.compiled_unit.unit_timing``: every kernel advances the compute
    stream by at least its own time, ``plan.overlap.advance`` only slows it, and blocking
    collectives and waits for overlapped ones only add; tests/sweep/test_lazy_bound.py)."""
    return sum(op.time_s for op in work if isinstance(op, Op))


def class_times(rep: Scenario, unit_time: Callable[[Work], float], work: StepWork | None = None) -> UnitTimes:
    """Unit times of the class ``rep`` (from ``class_scenario``) stands for, each unit priced by
    ``unit_time``; ``work``: ``build_step_work(rep)`` where the caller holds it."""
    # pp = 1: forward [embedding, layers..., mtp..., output], backward [output, mtp..., layers..., embedding];
    # layers of different kinds (a MoE model's dense first layers) enter with the cheaper kind: a bound
    if work is None:
        work = build_step_work(rep)
    stage = work.stages[0]
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
        layer_all_expert_params=stage.unit_expert_params[k + n],
        moe_all_expert_params=stage.unit_expert_params[1 + k],
        p2p_bytes=work.p2p_bytes)


def unit_times(rep: Scenario) -> UnitTimes:
    """Unit times of the class that ``rep`` (from ``class_scenario``) stands for: each unit
    compiled as the engines run it (``plan.compiled_unit.compile_unit``)."""
    return class_times(rep, lambda w: compile_unit(rep, w).time_s)


def lower_unit_times(rep: Scenario, work: StepWork | None = None) -> UnitTimes:
    """A lower bound on every unit time of ``unit_times(rep)``, with the same parameter counts:
    each unit's compute kernels alone (``compute_s``), no collective planned. About a sixth of
    the cost of compiling the units; the sweep's level 0 of the bound."""
    return class_times(rep, compute_s, work)


def moe_sync_s(rep: Scenario, compile: Callable[[Scenario, Work], CompiledUnit] = compile_unit,
               work: StepWork | None = None) -> float:
    """The least issue deficit a MoE layer of the class ``rep`` stands for pays by itself in its
    forward of one micro-batch: where a MoE layer's dispatch syncs (``plan.step_terms.
    issue_rules``), the forward unit's ``compute.host.own_deficit_s``, each unit priced as the
    engines run it (``compile``) with the host time ``plan.stage_work.StageWork.issues`` gives
    it; 0 where none syncs. An action's deficit is at least the sum of its units' own deficits
    (``compute.host.issue_deficit_s``), so a rank's is at least this times the MoE layers it runs
    forward (the sweep's floor, ``Screen.wait_floor_s``; a backward that recomputes the
    dispatch syncs too, which the floor leaves out). ``work``: ``build_step_work(rep)`` where
    the caller holds it."""
    megatron, syncs = issue_rules(rep)
    if not syncs or not rep.model.is_moe:
        return 0.0
    stage = (work if work is not None else build_step_work(rep)).stages[0]
    issues = stage.issues("F", megatron, syncs)
    return min((own_deficit_s(issues[i], compile(rep, stage.forward[i]).time_s)
                for i in range(1, 1 + stage.num_layers) if stage.forward_roles[i] == "moe"), default=0.0)


def _seconds(unit: CompiledUnit) -> UnitSeconds:
    c = sum(s.time_s for s in unit.steps if s.plan is None and s.join < 0)
    m = sum(s.time_s for s in unit.steps if s.plan is not None)
    b = sum(s.time_s for s in unit.steps if s.plan is not None and not s.overlapped)
    return UnitSeconds(unit.time_s, c, m, b)


def part_times(rep: Scenario, compile: Callable[[Scenario, Work], CompiledUnit] = compile_unit) -> PartTimes:
    """``PartTimes`` of the class that ``rep`` (from ``class_scenario``) stands for, each unit
    compiled by ``compile`` (``compile_unit``, or a run's ``ClassTimes.compile``)."""
    stage = build_step_work(rep).stages[0]
    n, k = stage.num_layers, rep.model.mtp_layers
    layer, first, last = {}, {}, {}
    for part, works in (("F", stage.forward), ("B", stage.backward), ("Bi", stage.backward_input),
                        ("W", stage.backward_weight)):
        if part == "F":
            emb, layers, rest = works[0], works[1:1 + n], works[1 + n:]
        else:  # backward order: head and MTP, layers last to first, embedding
            emb, layers, rest = works[-1], works[1 + k:1 + k + n], works[:1 + k]
        kinds = [_seconds(compile(rep, w)) for w in {id(w): w for w in layers}.values()]
        layer[part] = UnitSeconds(*(min(x[f] for x in kinds) for f in range(4)))
        first[part] = _seconds(compile(rep, emb))
        parts = [_seconds(compile(rep, w)) for w in rest]
        last[part] = UnitSeconds(*(sum(x[f] for x in parts) for f in range(4)))
    # backward order of the units' parameters: head and MTP, layers last to first, embedding
    params = [a + b for a, b in zip(stage.unit_params, stage.unit_expert_params, strict=True)]
    return PartTimes(layer, first, last, min(params[1 + k:1 + k + n]), params[-1], sum(params[:1 + k]))


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


class ClassTimes:
    """The unit times of every class of one base scenario's layouts, each computed once per run
    (in the run's ``SweepMemo``): compiled (``unit_times``), kernels alone (``lower_times``),
    per part (``part_times``) and inside overlapped pairs (``pair_times``)."""

    def __init__(self, base: Scenario, memo: SweepMemo) -> None:
        self.base, self.memo = base, memo

    def compile(self, rep: Scenario, work: Work) -> CompiledUnit:
        """``compile_unit(rep, work)``, once per ``plan.compiled_unit.unit_key`` in the run: the
        embedding's and the head's units are shared by every expert layout, a layer's forward by
        every recompute policy."""
        units = self.memo.compiled
        key = unit_key(rep, work)
        unit = units.get(key)
        if unit is None:
            unit = units[key] = compile_unit(rep, work)
        return unit

    def unit_times(self, layout: ParallelLayout) -> UnitTimes:
        """``unit_times`` of the layout's class (its units compiled by ``self.compile``)."""
        def price(rep: Scenario) -> UnitTimes:
            short, work = self.short_work(layout)
            return class_times(short, lambda w: self.compile(short, w).time_s, work)

        return self._of_class(self.memo.unit_times, price, layout)

    def lower_times(self, layout: ParallelLayout) -> UnitTimes:
        """``lower_unit_times`` of the layout's class: every unit time at most ``unit_times``'."""
        return self._of_class(self.memo.lower_times, lambda rep: lower_unit_times(*self.short_work(layout)), layout)

    def part_times(self, layout: ParallelLayout) -> PartTimes:
        """``part_times`` of the layout's class (the third level, clustersim.sweep.replay)."""
        return self._of_class(self.memo.part_times, lambda rep: part_times(rep, self.compile), layout)

    def moe_sync_s(self, layout: ParallelLayout) -> float:
        """``moe_sync_s`` of the layout's class (its units compiled by ``self.compile``)."""
        def price(rep: Scenario) -> float:
            short, work = self.short_work(layout)
            return moe_sync_s(short, self.compile, work)

        return self._of_class(self.memo.moe_sync, price, layout)

    def short_work(self, layout: ParallelLayout) -> tuple[Scenario, StepWork]:
        """The layout's class representative on as few layers as give its minima (``shortened``)
        and its stage work, built once per class for the unit times, the kernel times and the
        MoE layer's own issue deficit."""
        key = self.class_key(layout)
        got = self.memo.class_work.get(key)
        if got is None:
            short = shortened(class_scenario(self.base, layout))
            got = self.memo.class_work[key] = (short, build_step_work(short))
        return got

    def pair_times(self, layout: ParallelLayout) -> UnitTimes:
        """``pair_unit_times`` of the layout's class, from the class's kernel and compiled times."""
        key = self.class_key(layout)
        t = self.memo.pair_times.get(key)
        if t is None:
            t = self.memo.pair_times[key] = pair_unit_times(self.lower_times(layout), self.unit_times(layout),
                                                            overlap_slowdown(self.base.cluster.gpu))
        return t

    def _of_class(self, cache: dict, price: Callable[[Scenario], object], layout: ParallelLayout):  # noqa: ANN202
        """``price`` of the layout's class representative, once per class."""
        key = self.class_key(layout)
        value = cache.get(key)
        if value is None:
            value = cache[key] = price(class_scenario(self.base, layout))
        return value

    def class_key(self, p: ParallelLayout) -> tuple[object, ...]:
        """The unit-time class of a layout (the key of every table above)."""
        return (p.tp, p.cp, p.ep, p.etp, self.dp_key(p), p.micro_batch, p.sequence_parallel, p.recompute)

    def dp_key(self, p: ParallelLayout) -> object:
        """What the data-parallel size changes in a unit-time class: nothing without expert
        parallelism (the class has dp = 1); with it, only the shapes of the groups that a layer's
        collectives run over (``class_dp_key``). Layouts whose EP sizes differ only in dp but
        whose groups sit alike on the domains share one class (MoE sweeps: dp from 1 to 1,024)."""
        if p.ep == 1:
            return 1
        k = (p.tp, p.cp, p.ep, p.etp, p.dp, p.cp_a2a)
        d = self.memo.dp_keys.get(k)
        if d is None:
            d = self.memo.dp_keys[k] = class_dp_key(self.base, p)
        return d

    def count_classes(self, layouts: Iterable[ParallelLayout]) -> int:
        """Distinct unit-time classes of these layouts."""
        return len({self.class_key(p) for p in layouts})
