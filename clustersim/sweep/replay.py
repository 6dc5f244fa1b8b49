"""The third level of the sweep's bound: the pipeline schedule replayed on the unit times.

The second level (``pipe_bound.pipeline_bound_s``) charges a pipeline its fill once: rank r starts
after chunk 0's forward on ranks before it and ends before their backward. The closed form
(``clustersim.engine.recurrence.Recurrence``) waits more than that wherever an action's input
has not arrived: interleaved 1F1B with many chunks hands every micro-batch across a rank
boundary ``2 v`` times, and each hop costs a pipeline transfer, so its bubble and exposed
pipeline traffic grow with ``v`` (Narayanan et al. 2021, arXiv 2104.04473, §2.2.2: "the amount
of communication also increases by v") while the second level does not.

``replay_ends`` runs the same recurrence (``parallel.list_schedule``, the kernel that the pipeline's
dry run shares) on the schedule's own actions
(``plan.step_plan.classic_actions`` or ``plan.actions.action_skeleton``, as the closed form
resolves them for every schedule: each
rank's actions in order, each starting when the rank is free and its inputs have arrived), with
every action lasting only what its units must take: alone, the contention-free compiled time of
its units (layers of its stage times the layer's, taken at the layer kind that is cheapest, plus
the embedding / head units where the stage holds them; a backward also the framework's pass over
the stage's gradients, ``programs.stage_durations``); as a DualPipe or EP-overlap pair of a
forward and a backward, ``pair_s`` (one compute stream and one communication stream shared by
two chains of segments, ``engine.pair``). Every transfer takes the fastest boundary's time
(``StepTerms.p2p_s``). The recurrence is max-plus, every start a maximum of sums of durations, so it
is monotone in them, and the closed form's durations are at least these (its units only slow
down beside collectives and wait for gathers; its transfers take their own boundary's time):
each rank's end in the replay is at most the closed form's. The step bound is then
``Screen.total_s`` of that end (the optimizer step; under the backward chain the data-parallel
tail and, for MoE models, the stream term), as at the second level; without the chain, the
latest of every rank's end plus its own optimizer step. For MoE models with ZeRO 0-2 the replay
also gates each forward on its parameter gathers and bounds each rank's data-parallel stream
from the replayed start of each final backward (``replay_times``, ``dpbound.RankStream``).

The level applies to every schedule with more than one pipeline stage (one stage: 0, and the
runner keeps the second level, ``max``). Cost: one pass over the schedule's ``2 m pp v`` (or
``3 m pp``) actions, about a millisecond per thousand, against tens of milliseconds for the closed
form; the runner replays a layout only when it is about to be evaluated
(``bnb.branch_and_bound``). ``tests/sweep/test_replay.py`` checks it against
``api.estimate`` on random layouts.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from clustersim.frameworks import FrameworkSpec, blocking_from
from clustersim.parallel.layout import ParallelLayout
from clustersim.parallel.list_schedule import list_schedule
from clustersim.plan.data_parallel import backward_reduces, grads_every_micro_batch
from clustersim.plan.overlap import compute_rate, overlap_slowdown
from clustersim.scenario import Scenario
from clustersim.sweep.dpbound import EveryBackward, GatherGate
from clustersim.sweep.pipe_bound import BOUND_SLACK
from clustersim.sweep.programs import IndexedProgram, indexed_program, pair_s, stage_durations
from clustersim.sweep.screen import Screen, screen_for
from clustersim.sweep.space import layout_from_key
from clustersim.sweep.unit_times import UnitSeconds


def replay_ends(schedule: str, pp: int, num_micro_batches: int, virtual_stages: int,
                durations: dict[tuple[int, str], UnitSeconds], p2p_s: float, ep_overlap: bool = False,
                slowdown: float = 0.0) -> tuple[float, ...]:
    """Each pipeline rank's end of its last action when the part ``p`` ("F", "B", "Bi", "W") of
    global stage ``g`` has ``durations[(g, p)]`` (compiled, kernels, collectives) and every
    transfer takes ``p2p_s`` (module doc): an action alone lasts its compiled time, an
    overlapped pair ``pair_s`` (kernels slowed by ``slowdown`` beside its collectives), and
    starts when its rank is free and its inputs have arrived."""
    return replay_times(schedule, pp, num_micro_batches, virtual_stages, durations, p2p_s, ep_overlap, slowdown)[0]


class ReplayTimes(NamedTuple):
    """What a replay gives: each rank's end of its last action, per rank each final backward
    as (global stage, earliest enqueue of its buckets), in the order the rank runs them, and
    per rank the start of each of its actions (``every_backward`` reads them)."""

    ends: tuple[float, ...]
    finals: tuple[tuple[tuple[int, float], ...], ...]
    starts: tuple[list[float], ...] = ()


def replay_times(schedule: str, pp: int, num_micro_batches: int, virtual_stages: int,
                 durations: dict[tuple[int, str], UnitSeconds], p2p_s: float, ep_overlap: bool = False,
                 slowdown: float = 0.0, ready: tuple[tuple[GatherGate, ...], ...] = (),
                 blocks_from: tuple[int, ...] | None = None) -> ReplayTimes:
    """``replay_ends`` and, per rank, each of its stages' final backward (or W) as (global stage,
    when it enqueues the stage's gradient buckets at the earliest: the start of its action, alone
    or paired, which enqueues them unit by unit) in the order the rank runs them; at most the
    closed form's, as every time here.

    ``ready`` (``dpbound.RankStream.ready``, per rank; empty: none): per stage g of the rank,
    when its first and its last parameter gather end (``dpbound.GatherGate``); a forward of g starts no earlier
    than the first and ends no earlier than the last (each unit waits for its own gather); a pair
    ends no earlier than the last gather of its forward half (its backward half need not wait
    for them). ``blocks_from`` (per rank; None:
    none): from that step on a send holds its rank until it arrives, as the engines wait
    (``program_blocks_from``)."""
    prog = indexed_program(schedule, pp, num_micro_batches, virtual_stages, ep_overlap)
    # each kind of action's duration: alone its compiled time, a pair ``pair_s``
    seconds = [durations[k[0]][0] if len(k) == 1 else pair_s(durations[k[0]], durations[k[1]], slowdown)
               for k in prog.kinds]
    times = [[seconds[k] for k in kinds] for kinds in prog.kind]
    release = floor = None
    if ready:
        # a forward alone starts after its first gather and ends no earlier than its last; a
        # pair ends no earlier than the last gather of its forward half
        release, floor = [], []
        for r in range(pp):
            gate = {g: (first, last) for g, first, last in ready[r]}
            rel, fl = [], []
            for g, halves in zip(prog.forward[r], prog.pair_forward[r], strict=True):
                first, last = gate.get(g, (0.0, 0.0))
                for h in halves:
                    if h in gate and gate[h][1] > last:
                        last = gate[h][1]
                rel.append(first)
                fl.append(last)
            release.append(rel)
            floor.append(fl)
    run = list_schedule(prog.needs, prog.sends, times, prog.num_events, p2p_s, release, floor, blocks_from)
    if not run.complete:
        raise RuntimeError("pipeline schedule deadlocks (validate_schedule should have caught it)")
    finals = tuple(tuple((g, run.starts[r][i]) for i, g in prog.finals[r]) for r in range(pp))
    return ReplayTimes(run.clock, finals, run.starts)


def program_blocks_from(framework: FrameworkSpec, layout: ParallelLayout) -> tuple[int, ...]:
    """Per rank: the first step of the layout's replay program (``indexed_program``) whose sends
    hold the rank, by the engines' rule (clustersim.frameworks.blocking_from, the plan's
    ``SimRank.blocks_from``) over its steps' kinds: a step runs a forward alone or a pair with a
    forward half (a pair's backward half, which the engines may hold, is not: less wait, still a
    lower bound)."""
    prog = indexed_program(layout.schedule, layout.pp, layout.num_micro_batches, layout.virtual_stages,
                           layout.overlap_moe_expert_parallel_comm)
    return tuple(blocking_from(framework, layout, ["F" if f >= 0 or halves else "B"
                                                   for f, halves in zip(fwd, pairs, strict=True)])
                 for fwd, pairs in zip(prog.forward, prog.pair_forward, strict=True))


def every_backward(prog: IndexedProgram, r: int, starts: list[float],
                   durations: dict[tuple[int, str], UnitSeconds]) -> EveryBackward | None:
    """``EveryBackward`` of rank ``r`` from a replay's ``starts`` of its actions (``prog``, the
    replay's program, and ``durations``, its parts' seconds)."""
    kinds = [prog.kinds[k] for k in prog.kind[r]]
    final = {i for i, _ in prog.finals[r]}
    first = next((i for i, parts in enumerate(kinds)
                  if any(backward_reduces(True, part, i in final) for _, part in parts)), None)
    if first is None:
        return None
    counts: dict[int, int] = {}
    for i in range(first, len(kinds)):
        for g, part in kinds[i]:
            if backward_reduces(True, part, i in final):
                counts[g] = counts.get(g, 0) + 1
    after = [durations[key] for parts in kinds[first + 1:] for key in parts]
    return EveryBackward(starts[first], sum(x.kernels_s for x in after), sum(x.blocking_s for x in after),
                         tuple(sorted(counts.items())))


def replay_bound_s(sc: Screen, layout: ParallelLayout) -> float:
    """The third-level bound of one layout (0 where the level does not apply: one stage). Under
    the backward chain pipeline rank 0 ends last and ``Screen.total_s`` extends its end (the
    optimizer, the data-parallel tail and stream terms); otherwise every rank ends with its own
    optimizer step after its last action: the step is at least the latest of those."""
    every = grads_every_micro_batch(layout)
    if layout.pp == 1 and not every:
        return 0.0
    classes, terms = sc.classes, sc.terms
    u = classes.unit_times(layout)
    profile = sc.profile(layout)
    p2p = terms.p2p_s(layout, u.p2p_bytes)
    # the ends depend on the layout only through these (ZeRO stages and offload share them)
    held = program_blocks_from(sc.base.framework, layout)
    key = (classes.class_key(layout), layout.schedule, layout.pp, layout.num_micro_batches, layout.virtual_stages,
           p2p, layout.overlap_moe_expert_parallel_comm, held)
    streams = sc.streams.rank_streams(layout) if sc.dp_term else ()
    ready = tuple(x.ready for x in streams) if any(x.ready for x in streams) else ()
    key += (ready,)
    times = sc.memo.replays.get(key)
    if times is None:
        times = sc.memo.replays[key] = replay_times(
            layout.schedule, layout.pp, layout.num_micro_batches, layout.virtual_stages,
            _durations(sc, layout), p2p, layout.overlap_moe_expert_parallel_comm,
            overlap_slowdown(sc.base.cluster.gpu), ready, held)
    ends, finals = times.ends, times.finals
    floor = sc.wait_floor_s(layout, profile)   # each rank's waits for the slowest GPU and the host (total_s adds them too)
    if profile.backward_chain:
        bound = sc.total_s(layout, u, profile, ends[0], True, (layout.schedule, layout.virtual_stages))
    else:
        bound = max(end + terms.rank_optimizer_s(layout, u, profile, r) for r, end in enumerate(ends)) + floor
    for r, stream in enumerate(streams):  # each rank's data-parallel stream (dpbound.RankStream)
        bound = max(bound, stream.bound_s(finals[r], ends[r], terms.rank_optimizer_s(layout, u, profile, r)) + floor)
    if every:   # every backward reduces its gradients: compute slows beside the stream
        backwards = sc.memo.replays.get((key, "every"))
        if backwards is None:
            prog = indexed_program(layout.schedule, layout.pp, layout.num_micro_batches, layout.virtual_stages,
                                   layout.overlap_moe_expert_parallel_comm)
            durations = _durations(sc, layout)
            backwards = sc.memo.replays[(key, "every")] = tuple(
                every_backward(prog, r, times.starts[r], durations) for r in range(layout.pp))
        rate = compute_rate(overlap_slowdown(sc.base.cluster.gpu), 1)
        for r, stream in enumerate(streams or sc.streams.rank_streams(layout)):
            if backwards[r] is not None:
                bound = max(bound, stream.every_backward_bound_s(backwards[r], rate,
                                                                 terms.rank_optimizer_s(layout, u, profile, r)) + floor)
    return bound * (1.0 - BOUND_SLACK)


def _durations(sc: Screen, layout: ParallelLayout) -> dict[tuple[int, str], UnitSeconds]:
    return stage_durations(sc.base, layout, sc.classes.part_times(layout))


def replay_bounds(base: Scenario, keys: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """``replay_bound_s`` of each layout key (the sweep's third level; 0: not applicable)."""
    sc = screen_for(base)
    return np.array([replay_bound_s(sc, layout_from_key(k, base.parallel)) for k in keys], dtype=np.float64)
