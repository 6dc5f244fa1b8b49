"""A lower bound on the step's exposed data-parallel stream (ZeRO 0/1/2, dense and MoE).

The screen's pipeline bound ``P`` (``pipe_bound.pipeline_bound_s``) bounds when pipeline rank 0's last
action ends. For the schedules with the backward chain (GPipe, 1F1B, interleaved 1F1B: every rank
ends with chunk 0's backward of the last micro-batch) the closed form
(``clustersim.engine.recurrence``) then does on rank 0, of global stages ``0, pp, 2 pp, ...``:

* ``issue_param_gathers``: at step start, every ZeRO-1/2 parameter gather of its stages
  (``DpPlan.param_gathers``, ``overlap_param_gather``) is enqueued on its "dp" stream;
* ``_backward`` with ``final`` (the last backward of a chunk): every gradient bucket of the
  stage (``DpPlan.grad_buckets``: dense over dp x cp, a MoE layer's expert gradients over the
  expert-data-parallel group) is enqueued on the same stream as its unit finishes
  (``overlap_grad_reduce``);
* ``finish``: the non-overlapped reductions (``DpPlan.after_backward``) are enqueued when the last
  action is done, the clock waits for every collective enqueued (``pending``), then runs the
  optimizer step and then the non-overlapped parameter gathers (``after_optimizer``) one after
  another.

A ``Stream`` runs its collectives one after another, each from ``max(enqueue, stream free)``, for
exactly ``plan.time_s``. So with ``S`` the end of the "dp" stream and ``opt`` the optimizer step:

1. ``S >= sum(all collectives enqueued on it)`` (all start at or after 0);
2. ``S >= start(last action) + sum(stage 0's gradient buckets)``: the last action is chunk 0's
   final backward, which enqueues them, none before it starts;
3. ``S >= end(last action) + sum(after_backward)``;
4. under interleaved 1F1B, for each chunk c: ``S >= start(chunk c's final backward) + the
   buckets of every chunk whose final backward runs at or after it``, and that start is at least
   the actions rank 0 runs before it (its compute stream runs them one after another, each at
   least its units' times: ``chunk_stream_s``);
5. step ``>= S + opt + sum(after_optimizer)``.

``end(last action) >= P`` and ``start(last action) >= P - B0`` where ``B0`` is what ``P`` counts
for rank 0's chunk-0 backward (its layers' backward units and the embedding's, plus the head's
where chunk 0 holds it): every term of ``P`` is a chain of lower bounds ending with that action
(rank 0's own actions one after another, or rank 1's last backward, the hop, then it). Each
collective is priced by the plan the closed form runs (``plan.data_parallel.dp_plan`` of the layout: the
same ``comm_plan``), and nothing the closed form adds to it (waits for the stream, compute slowed
beside it, link contention in the event engine) is counted, which keeps it a bound.

The schedules without the backward chain (zero-bubble, DualPipe) get each rank's stream at the
second level instead (``RankStream``, ``StreamTerms.stream_floor_s``: every rank's actions back to back
from the earliest its first action's inputs arrive), and the third level
(``clustersim.sweep.replay``) bounds every rank's stream for every schedule, with the replay's
own start of each final backward and its ends, and the gathers' ends as the forwards' gates.

Not covered by ``DpStream`` (the term is 0): ZeRO-3 (``pipe_bound.Extra`` and ``StepTerms.tail_s`` bound its gathers and
reductions), the zero-bubble and DualPipe schedules (no backward chain), and scenarios run per
rank class (faults, node groups: ``perrank``), whose data-parallel plans are priced per class.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from clustersim.plan.data_parallel import dp_plan_from
from clustersim.plan.stage_work import StepWork, build_step_work, parameter_layout
from clustersim.scenario import Scenario


@dataclass(frozen=True, slots=True)
class DpStream:
    """Seconds of rank 0's data-parallel collectives in one step, as the closed form issues them."""

    all_s: float = 0.0             # every collective on its "dp" stream (gathers, buckets, after_backward)
    chunk_buckets_s: tuple[float, ...] = ()  # per chunk c: the gradient buckets of global stage c * pp
    last_buckets_s: float = 0.0    # the gradient buckets of global stage 0 (enqueued during the last action)
    after_backward_s: float = 0.0  # enqueued after the last action
    after_optimizer_s: float = 0.0  # run after the optimizer step

    def bound_s(self, pipe_s: float, last_action_s: float, optimizer_s: float, chunks_s: float = 0.0) -> float:
        """The step's lower bound from this stream (module docstring), given ``pipe_s`` (a lower
        bound on the end of rank 0's last action), ``last_action_s`` (at least what ``pipe_s``
        counts for that action) and ``chunks_s`` (``chunk_stream_s``, interleaved 1F1B)."""
        stream = max(self.all_s, pipe_s - last_action_s + self.last_buckets_s, pipe_s + self.after_backward_s,
                     chunks_s)
        return stream + optimizer_s + self.after_optimizer_s


def _sum_s(items) -> float:
    return sum(plan.time_s for _, plan in items)


def stream_of(rank0: RankStream, pp: int) -> DpStream:
    """Rank 0's ``DpStream`` from its ``RankStream``: its stages are the global stages ``c * pp``
    (chunk c) under the schedules with the backward chain."""
    buckets = dict(rank0.buckets)
    chunks = tuple(buckets.get(c * pp, 0.0) for c in range(max(buckets) // pp + 1)) if buckets else ()
    return DpStream(rank0.gathers_s + sum(buckets.values()) + rank0.after_backward_s, chunks, buckets.get(0, 0.0),
                    rank0.after_backward_s, rank0.after_optimizer_s)


@dataclass(frozen=True, eq=False)
class Prefixes:
    """Rank 0 of interleaved 1F1B, per chunk c (row c): how many forwards (``forwards``) and
    backwards (``backwards``) of each chunk (column) run before chunk c's final backward, and
    (``later``, 0/1) the chunks whose final backward runs at or after it."""

    forwards: np.ndarray
    backwards: np.ndarray
    later: np.ndarray


@functools.lru_cache(maxsize=1024)
def final_prefixes(pp: int, num_micro_batches: int, virtual_stages: int) -> Prefixes:
    """``Prefixes`` of interleaved 1F1B's rank 0 (``parallel.pipeline.build_schedule``)."""
    from clustersim.parallel.pipeline import build_schedule

    acts = build_schedule("interleaved-1f1b", pp, num_micro_batches, virtual_stages)[0]
    final = {a.chunk: i for i, a in enumerate(acts) if a.kind == "B"}
    v = virtual_stages
    nf, nb, later = np.zeros((v, v)), np.zeros((v, v)), np.zeros((v, v))
    for c in range(v):
        for a in acts[:final[c]]:
            (nf if a.kind == "F" else nb)[c, a.chunk] += 1
        for k in range(v):
            later[c, k] = float(final[k] >= final[c])
    for m in (nf, nb, later):
        m.setflags(write=False)
    return Prefixes(nf, nb, later)


def chunk_stream_s(stream: DpStream, prefixes: Prefixes, forward_s: list[float], backward_s: list[float]) -> float:
    """Interleaved 1F1B: rank 0's compute stream runs its actions one after another, so chunk c's
    final backward starts no earlier than the actions before it (each at least ``forward_s`` /
    ``backward_s`` of its chunk), and it and every final backward after it enqueue their
    chunk's gradient buckets on the serial "dp" stream: the stream ends no earlier than that
    start plus those buckets."""
    v = prefixes.later.shape[0]
    buckets = np.zeros(v)
    held = stream.chunk_buckets_s[:v]
    buckets[:len(held)] = held
    ends = prefixes.forwards @ np.asarray(forward_s) + prefixes.backwards @ np.asarray(backward_s) \
        + prefixes.later @ buckets
    return max(0.0, float(ends.max()))


def dp_stream(scenario: Scenario) -> DpStream:
    """``stream_of`` rank 0 in the scenario's own data-parallel plan (``rank_streams``; its
    layout's dp x cp > 1, ZeRO 0-2)."""
    streams = streams_of(scenario, (0,))
    return stream_of(streams[0], scenario.parallel.pp) if streams else DpStream()


class EveryBackward(NamedTuple):
    """One rank's backwards where every one that produces weight gradients launches its buckets
    (``plan.data_parallel.backward_reduces`` with ``every_backward``): the replay's start of the
    first (no bucket is enqueued before it), the kernel seconds of the actions the rank runs
    after it, and per stage how many of its backwards from that first on launch buckets."""

    first_s: float
    kernels_after_s: float
    blocking_after_s: float   # the blocking collectives of the actions after it (they hold the compute stream)
    reductions: tuple[tuple[int, int], ...]


class GatherGate(NamedTuple):
    """When a stage's ZeRO-1/2 parameter gathers end on its rank's stream: its first and its last."""

    stage: int
    first_end_s: float
    last_end_s: float


@dataclass(frozen=True, slots=True)
class RankStream:
    """One pipeline rank's "dp" stream as the closed form fills it (ZeRO 0-2; module docstring).

    ``issue_param_gathers`` enqueues every overlapped parameter gather of the rank's stages at
    step start, on its empty stream, over its stages in chunk order and their units in forward
    order: each ends exactly at the sum of the rank's gathers up to it, and a forward unit
    starts only once its own has ended (``ready``). Each stage's final backward (or W) enqueues
    the stage's gradient buckets, none before it starts (alone or in an overlapped pair);
    ``finish`` enqueues the rest after the rank's last action, waits for the stream, runs the
    optimizer step, then the parameter gathers left after it."""

    ready: tuple[GatherGate, ...] = ()                # per stage holding gathers: when they end
    buckets: tuple[tuple[int, float], ...] = ()       # per stage g: (g, seconds of its gradient buckets)
    gathers_s: float = 0.0
    after_backward_s: float = 0.0
    after_optimizer_s: float = 0.0

    def bound_s(self, finals: tuple[tuple[int, float], ...], end_s: float, optimizer_s: float) -> float:
        """A lower bound on the rank's end of step given ``finals``, each final backward as
        (stage, a lower bound on when it enqueues its buckets) in the order the rank runs them
        (``replay.replay_times``), ``end_s`` (at most its last action's end) and ``optimizer_s``
        (at most its optimizer step). The stream is first in, first out and its collectives take
        their plan's time, so it ends no earlier than ``S`` of ``S <- max(S, enqueued) +
        buckets`` over the finals from ``S = gathers``, which is increasing in every input
        (max-plus), nor before ``end_s`` plus what ``finish`` enqueues."""
        buckets = dict(self.buckets)
        stream = self.gathers_s
        for g, at in finals:
            if g in buckets:
                stream = max(stream, at) + buckets[g]
        return max(stream, end_s + self.after_backward_s) + optimizer_s + self.after_optimizer_s


    def every_backward_bound_s(self, every: EveryBackward, rate: float, optimizer_s: float) -> float:
        """A lower bound on the rank's end of step where every backward launches its stage's
        buckets (``plan.data_parallel.grads_every_micro_batch``), from ``every`` (the replay's
        start of its first such backward; the kernel seconds ``K`` and blocking-collective
        seconds ``N`` of the actions after it; the backwards that reduce from it on) and
        ``rate``, the most a kernel runs at while a collective is in flight
        (``plan.overlap.compute_rate`` of one). From that start on the stream runs ``D`` seconds
        (these backwards' buckets, then what ``finish`` enqueues). With ``A`` the time kernels
        run beside the stream, the kernels take at least ``K + (1 - rate) A``, the blocking
        collectives ``N``, and the stream's time apart from kernels, ``D - A``, at best hides
        under those: the rank needs at least ``K + N + (1 - rate) A + max(0, D - A - N)``, which
        is smallest at ``A = min(D - N, K / rate)``: ``max(D, K + N + (1 - rate) max(0, D - N))``
        (the argument of ``programs.pair_s``). Then the optimizer step and the gathers after
        it, as in ``bound_s``."""
        buckets = dict(self.buckets)
        stream = sum(n * buckets.get(g, 0.0) for g, n in every.reductions) + self.after_backward_s
        k, n = every.kernels_after_s, every.blocking_after_s
        busy = max(stream, k + n + (1.0 - rate) * max(0.0, stream - n))
        return every.first_s + busy + optimizer_s + self.after_optimizer_s


def param_work(scenario: Scenario) -> StepWork:
    """``build_step_work`` of the layout's ``plan.stage_work.parameter_layout``: its stages, their
    placement and parameters per unit are the layout's own, and one build serves every
    data-parallel size and batch (the data-parallel plan prices the layout's own groups from
    them)."""
    return build_step_work(replace(scenario, parallel=parameter_layout(scenario.parallel)))


def rank_streams(scenario: Scenario) -> tuple[RankStream, ...]:
    """Per pipeline rank, its ``RankStream`` in the scenario's own data-parallel plan; () where
    there is none to bound this way (no data parallelism, ZeRO-3: its gathers and reductions run
    on other streams, ``pipe_bound.Extra``)."""
    return streams_of(scenario, tuple(range(scenario.parallel.pp)))


def streams_of(scenario: Scenario, ranks: tuple[int, ...], work: StepWork | None = None) -> tuple[RankStream, ...]:
    """``rank_streams`` of these pipeline ranks only, from the plan of their stages alone (rank
    0's, for the schedules with the backward chain: ``DpStream``); ``work``: the layout's
    ``param_work`` where the caller keeps it (None: built here)."""
    par = scenario.parallel
    if par.dp * par.cp == 1 or par.zero_stage == 3:
        return ()
    if work is None:
        work = param_work(scenario)
    graph = work.graph
    assert graph is not None
    held = {r: [graph.stage(r, chunk) for chunk in range(graph.chunks)] for r in ranks}
    plan = dp_plan_from(scenario, work, named=False, stages=frozenset(g for gs in held.values() for g in gs))
    gathers: dict[int, list[float]] = {}  # per stage, its gathers' seconds in unit order
    for (g, _), items in sorted(plan.param_gathers.items()):
        gathers.setdefault(g, []).append(_sum_s(items))
    buckets: dict[int, float] = {}
    for (g, _), items in plan.grad_buckets.items():
        buckets[g] = buckets.get(g, 0.0) + _sum_s(items)
    out = []
    for r in ranks:
        stages = held[r]
        clock, ready = 0.0, []
        for g in stages:
            if g in gathers:
                first = clock + gathers[g][0]
                clock += sum(gathers[g])
                ready.append(GatherGate(g, first, clock))
        out.append(RankStream(tuple(ready), tuple(sorted((g, buckets[g]) for g in set(stages) if g in buckets)),
                              clock, _sum_s(plan.after_backward_of(stages)), _sum_s(plan.after_optimizer_of(stages))))
    return tuple(out)
