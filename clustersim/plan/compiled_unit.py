"""Units of compute-stream work, compiled once per step: costs resolved, collectives planned.

A *unit* is what the step engine runs between two points where something else may happen (a
layer, the embedding, the output layer): a sequence of kernels (Op) and collectives (CommOp).
Compiling looks every collective up once (`comm_plan`), merges consecutive kernels, and computes
the unit's contention-free duration and its split by cause, which both engines use.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import inf as INF

from clustersim.collectives import CollectivePlan
from clustersim.compute import CommOp, Op
from clustersim.plan.comm_plans import group_shape, op_plan
from clustersim.plan.overlap import MIN_COMPUTE_RATE, Interval, advance_many, compute_rate, overlap_slowdown
from clustersim.plan.speed_scaling import scale_plan
from clustersim.plan.stage_work import Work
from clustersim.scenario import Scenario


@dataclass(frozen=True, slots=True)
class Step:
    """Kernels (``plan is None``) or one collective, with its contention-free duration."""

    name: str
    cause: str
    time_s: float
    plan: CollectivePlan | None = None
    overlapped: bool = False  # runs beside the following kernels; the unit waits for it at its end
    join: int = -1            # >= 0: no work, the stream waits here for overlapped step ``join``


@dataclass(frozen=True, slots=True)
class CompiledUnit:
    steps: tuple[Step, ...]
    time_s: float                               # duration when no link is shared
    by_cause: tuple[tuple[str, float], ...]      # that duration split by cause (sums to time_s)
    tiers: frozenset[str]                        # link tiers its collectives use
    slowdown: float = 0.0                        # compute rate lost per concurrent collective


def compile_unit(scenario: Scenario, work: Work, link_speed: float = 1.0) -> CompiledUnit:
    """``link_speed``: scale-out bandwidth factor of this GPU's links (clustersim.plan.speed_scaling)."""
    steps: list[Step] = []
    # whether the framework runs the backward's TP collectives beside the GEMMs (FrameworkSpec)
    mode = scenario.framework.tp_backward_overlap
    async_tp = mode == "always" or (mode == "with-sp" and scenario.parallel.sequence_parallel)
    compute_s = 0.0
    countdown: list[list[int]] = []   # [step index, compute ops left] of collectives that join early
    # a unit repeats some collective ops (a context-parallel ring's transfers): plan each object once
    planned: dict[int, Step] = {}
    tp_comm_overlap = scenario.parallel.tp_comm_overlap
    for op in work:
        if isinstance(op, Op):
            compute_s += op.time_s
            if not countdown:   # no collective waits for this kernel
                continue
            joins = []
            for c in countdown:
                c[1] -= 1
                if c[1] == 0:
                    joins.append(c[0])
            if joins:
                steps.append(Step("compute", "compute", compute_s))
                compute_s = 0.0
                for j in joins:
                    s = steps[j]
                    steps.append(Step("join " + s.name, s.cause, 0.0, None, False, j))
                countdown = [c for c in countdown if c[1] > 0]
            continue
        assert isinstance(op, CommOp)
        if compute_s > 0:
            steps.append(Step("compute", "compute", compute_s))
            compute_s = 0.0
        known = planned.get(id(op))
        if known is None:
            plan = op_plan(scenario, op)
            if link_speed != 1.0:
                plan = scale_plan(plan, link_speed)
            # Overlappable collectives (the backward's async TP all-gather/reduce-scatter that Megatron-Core
            # overlaps with the dgrad/wgrad GEMMs, where the framework does; CP exchanges) run beside the next
            # kernels; with tp_comm_overlap (Megatron --tp-comm-overlap, userbuffers) every TP collective does.
            overlapped = (op.overlappable and (op.group != "tp" or async_tp)) or (op.group == "tp" and tp_comm_overlap)
            known = planned[id(op)] = Step(op.name, op.cause, plan.time_s, plan, overlapped)
        overlapped = known.overlapped
        if overlapped and op.overlap_ops > 0:
            countdown.append([len(steps), op.overlap_ops])
        steps.append(known)  # frozen: one object may stand at several indices
    if compute_s > 0:
        steps.append(Step("compute", "compute", compute_s))
    slowdown = overlap_slowdown(scenario.cluster.gpu)
    end, causes = unit_timing(tuple(steps), 0.0, (), slowdown)
    tiers = frozenset(ph.tier for s in steps if s.plan is not None for ph in s.plan.phases)
    return CompiledUnit(tuple(steps), end, tuple(sorted(causes.items())), tiers, slowdown)


def unit_key(scenario: Scenario, work: Work) -> tuple[object, ...]:
    """What ``compile_unit(scenario, work)`` reads of the layout, for scenarios that share their
    cluster, framework and overlap options: the ops, sequence parallelism and, for each
    collective the ops name (host copies aside: their plan reads the cluster alone), the shape of
    its group (``comm_plans.op_plan``: ``comm_plan`` and ``deepep_plan`` read the cluster and
    ``group_shape``). Two layouts of one base scenario with equal keys compile a unit alike: the
    sweep's bounds compile each distinct unit once across thousands of layouts
    (tests/sweep/test_screen.py checks it against ``compile_unit``)."""
    groups = sorted({op.group for op in work if isinstance(op, CommOp) and op.collective != "host_copy"})
    return work, scenario.parallel.sequence_parallel, tuple(group_shape(scenario, g) for g in groups), tuple(groups)


def unit_timing(steps: tuple[Step, ...], start_s: float, busy: tuple[Interval, ...] | list[Interval],
                slowdown: float) -> tuple[float, dict[str, float]]:
    """End time and seconds by cause of a unit started at ``start_s`` with no link shared.

    Blocking collectives hold the compute stream; overlapped ones run beside the kernels that follow
    them (which run slower meanwhile, clustersim.plan.overlap) and the unit waits for them at its
    end. ``busy`` lists the rank's other collectives in flight (data-parallel streams), which slow
    the kernels too.

    Each kernel runs as ``overlap.advance`` runs it (``live_intervals``, then ``advance_one`` or
    ``advance_many``), called directly in the closed form's innermost loop: the same
    floating-point operations in the same order, so the results are identical to the bit.
    """
    t = start_s
    causes: dict[str, float] = {}
    pending: list[Interval] = []
    index: dict[int, Interval] = {}
    # a collective that ends by the unit's start ends before every kernel of it (``advance`` skips it)
    busy = [iv for iv in busy if iv[1] > start_s and iv[0] < iv[1]] if busy else []
    slowed = slowdown > 0
    rate1 = compute_rate(slowdown, 1)
    stale = min([iv[1] for iv in busy], default=INF)   # the earliest end among ``busy``
    for i, s in enumerate(steps):
        if s.join >= 0:
            iv = index.pop(s.join)
            pending.remove(iv)
            if iv[1] > t:
                causes[iv[2]] = causes.get(iv[2], 0.0) + (iv[1] - t)
                t = iv[1]
            continue
        if s.plan is not None and s.overlapped:
            iv = (t, t + s.time_s, s.cause)
            pending.append(iv)
            index[i] = iv
            continue
        if s.plan is not None:
            t += s.time_s
            causes[s.cause] = causes.get(s.cause, 0.0) + s.time_s
            continue
        work_s = s.time_s
        causes["compute"] = causes.get("compute", 0.0) + work_s
        if work_s <= 0:
            continue
        if slowed and (busy or pending):
            if stale <= t:   # drop what has ended: it can never be live again (the clock only moves on)
                busy = [iv for iv in busy if iv[1] > t]
                stale = min([iv[1] for iv in busy], default=INF)
            # ``live_intervals`` (the same tests, in the same order)
            horizon = t + work_s / MIN_COMPUTE_RATE * (1.0 + 1e-9)
            live = [iv for iv in busy if iv[0] < horizon]
            if pending:
                live += [iv for iv in pending if iv[1] > t and iv[0] < iv[1] and iv[0] < horizon]
            if len(live) == 1:   # ``advance_one``, inline: the same operations in the same order
                begin, end, cause = live[0]
                left = work_s
                if begin > t:
                    if left <= begin - t:
                        t = t + left
                        continue
                    left -= begin - t
                    t = begin
                span = end - t
                if left <= span * rate1:
                    seconds = (left / rate1) * (1.0 - rate1)
                    t = t + left / rate1
                else:
                    left -= span * rate1
                    seconds = span * (1.0 - rate1)
                    t = end + left
                if seconds > 0:
                    causes[cause] = causes.get(cause, 0.0) + seconds
                continue
            if live:
                end, lost = advance_many(t, work_s, live, slowdown)
                for cause, sec in lost.items():
                    causes[cause] = causes.get(cause, 0.0) + sec
                t = end
                continue
        t = t + work_s
    for _, end, cause in pending:  # the unit waits for its overlapped collectives at its end
        if end > t:
            causes[cause] = causes.get(cause, 0.0) + (end - t)
            t = end
    return t, causes


class UnitCache:
    """Compiled units of one step, keyed by the identity of the (shared, immutable) work tuples."""

    def __init__(self, scenario: Scenario) -> None:
        self._scenario = scenario
        self._units: dict[int, CompiledUnit] = {}
        self._keep: list[Work] = []

    def __call__(self, work: Work) -> CompiledUnit:
        key = id(work)
        unit = self._units.get(key)
        if unit is None:
            unit = self._units[key] = compile_unit(self._scenario, work)
            self._keep.append(work)  # keep the id valid for the cache's lifetime
        return unit
