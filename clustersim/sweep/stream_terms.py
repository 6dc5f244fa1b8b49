"""The bound's data-parallel stream terms of one run (clustersim.sweep.dpbound), per layout.

``dp_bound_s``: under the backward chain, rank 0's stream (``dpbound.DpStream``); ``stream_floor_s``:
without it (zero-bubble, DualPipe), every rank's actions back to back from the earliest its first
action's inputs arrive, and its stream (``dpbound.RankStream``). Both price every collective by
the data-parallel plan the closed form runs (``plan.data_parallel.dp_plan_from`` of the layout's
``plan.stage_work.parameter_layout`` work) and each rank's actions by the programs the closed form
runs (``sweep.programs``); the run's ``SweepMemo`` keeps them per plan and per class.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from clustersim.parallel.layout import ParallelLayout
from clustersim.parallel.pipeline import split_layers, stage_graph
from clustersim.plan.overlap import overlap_slowdown
from clustersim.plan.stage_work import StepWork, build_step_work, parameter_layout
from clustersim.scenario import Scenario
from clustersim.sweep.dpbound import (
    DpStream,
    RankStream,
    chunk_stream_s,
    final_prefixes,
    stream_of,
    streams_of,
)
from clustersim.sweep.memo import SweepMemo
from clustersim.sweep.profiles import ScheduleProfile
from clustersim.sweep.programs import final_counts, pair_s, stage_durations
from clustersim.sweep.step_terms import StepTerms
from clustersim.sweep.unit_times import ClassTimes, UnitTimes


class RankSums(NamedTuple):
    """One rank of ``stream_floor_s``: each final backward as (stage, earliest enqueue of its
    buckets), and the rank's earliest end."""

    finals: tuple[tuple[int, float], ...]
    end_s: float


class StreamTerms:
    """The data-parallel stream terms of the layouts of one base scenario (module docstring)."""

    def __init__(self, base: Scenario, memo: SweepMemo, classes: ClassTimes, terms: StepTerms,
                 per_rank: bool) -> None:
        self.base, self.memo, self.classes, self.terms = base, memo, classes, terms
        self.per_rank = per_rank   # scenarios run per rank class price their plans per class: no term

    def stream_floor_s(self, layout: ParallelLayout, schedule: tuple[str, int], u: UnitTimes,
                       profile: ScheduleProfile, with_streams: bool) -> float:
        """The second level of the schedules without the backward chain (zero-bubble, DualPipe):
        every pipeline rank runs its actions back to back (``programs.final_counts``: an action
        alone lasts its compiled units, a pair ``pair_s``) from no earlier than its first
        action's inputs arrive (their producers' ranks run back to back from their own start up
        to them, then one transfer), so it ends no earlier than its start plus all of them,
        then its optimizer step; with a data-parallel stream (``with_streams``, ZeRO 0-2,
        ``dpbound.RankStream``) each final backward enqueues its buckets no earlier than its
        start plus the actions before it (a pair: plus itself). The third level replays every
        wait instead (clustersim.sweep.replay); this one reads each rank's sums only."""
        p = layout
        if (p.schedule, p.virtual_stages) != schedule:
            p = replace(p, schedule=schedule[0], virtual_stages=schedule[1])
        if p.pp == 1:
            return 0.0
        streams = self.rank_streams(p) if with_streams else ()
        best = 0.0
        for r, (at, end) in enumerate(self.rank_sums(p, u)):
            opt = self.terms.rank_optimizer_s(p, u, profile, r)
            best = max(best, streams[r].bound_s(at, end, opt) if streams else end + opt)
        return best

    def rank_sums(self, p: ParallelLayout, u: UnitTimes) -> tuple[RankSums, ...]:
        """Per rank of ``stream_floor_s``, its ``RankSums``; they depend on the layout only through
        its class and program (ZeRO stages and offload share them).

        Each rank's start is the list-scheduling recurrence (``parallel.list_schedule``) with
        every wait but the first action's dropped: a rank then runs back to back, so each of its
        times is its start plus a sum of durations, counted per kind of action
        (``final_counts``) rather than replayed action by action."""
        p2p = self.terms.p2p_s(p, u.p2p_bytes)
        key = (self.classes.class_key(p), p.schedule, p.pp, p.num_micro_batches, p.virtual_stages,
               p.overlap_moe_expert_parallel_comm, p2p)
        sums = self.memo.rank_sums.get(key)
        if sums is not None:
            return sums
        durations = stage_durations(self.base, p, self.classes.part_times(p))
        slowdown = overlap_slowdown(self.base.cluster.gpu)
        ranks = final_counts(p.schedule, p.pp, p.num_micro_batches, p.virtual_stages,
                             p.overlap_moe_expert_parallel_comm)
        seconds = [[durations[k[0]][0] if len(k) == 1 else pair_s(durations[k[0]], durations[k[1]], slowdown)
                    for k in rank.kinds] for rank in ranks]

        def dot(counts: tuple[int, ...], d: list[float]) -> float:
            return sum(n * x for n, x in zip(counts, d, strict=True))

        starts: dict[int, float] = {}

        def start(r: int) -> float:
            t = starts.get(r)
            if t is None:
                t = starts[r] = max((start(q) + dot(c, seconds[q]) + p2p for q, c in ranks[r].producers),
                                    default=0.0)
            return t

        out = []
        for r, rank in enumerate(ranks):
            d, t0 = seconds[r], start(r)
            at = tuple((g, t0 + dot(f.before, d)) for f in rank.finals for g in f.stages)
            out.append(RankSums(at, t0 + dot(rank.total, d)))
        sums = self.memo.rank_sums[key] = tuple(out)
        return sums

    def dp_bound_s(self, layout: ParallelLayout, schedule: tuple[str, int], u: UnitTimes, profile: ScheduleProfile,
                   pipe_s: float, optimizer_s: float) -> float:
        """The step's lower bound from rank 0's data-parallel stream (clustersim.sweep.dpbound)
        given ``pipe_s`` from the second level (``pipe_bound.plain_bound_s``: ZeRO 0-2); 0 where it
        does not apply (no backward chain, ZeRO-3, per-rank scenarios)."""
        p = layout
        stream = self.dp_stream(p, schedule, profile)
        if stream is None:
            return 0.0
        # what plain_bound_s counts for rank 0's last action (chunk 0's backward), or more
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
        """Rank 0's data-parallel stream (``dpbound.stream_of``) of ``layout`` run with ``schedule``
        (schedule, virtual stages); None where the stream term does not apply (no backward
        chain, ZeRO-3, no data parallelism, per-rank scenarios)."""
        p = layout
        if not profile.backward_chain or p.zero_stage == 3 or p.dp * p.cp == 1 or self.per_rank:
            return None
        if (p.schedule, p.virtual_stages) != schedule:
            p = replace(p, schedule=schedule[0], virtual_stages=schedule[1])
        key = self.stream_key(p)
        stream = self.memo.dp_streams.get(key)
        if stream is None:  # rank 0's stages alone, unless every rank's streams are at hand
            scenario = replace(self.base, parallel=p)
            streams = self.memo.rank_streams.get(key) or streams_of(scenario, (0,), self.param_work(scenario))
            stream = self.memo.dp_streams[key] = stream_of(streams[0], p.pp)
        return stream

    def stream_key(self, p: ParallelLayout) -> tuple[object, ...]:
        """What a layout's data-parallel plan depends on: its groups, its stages and whether ZeRO
        is on (``plan.data_parallel.dp_plan``: stages 1 and 2 reduce and gather alike); schedules
        that place the stages alike (GPipe, 1F1B and ZB-H1; ZB-V and DualPipe-V) share it."""
        graph = stage_graph(p.schedule, p.pp, p.virtual_stages, p.num_micro_batches)
        return p.tp, p.cp, p.pp, p.dp, p.ep, p.expert_tp, min(p.zero_stage, 1), graph.placement, graph.model_stage

    def rank_streams(self, layout: ParallelLayout) -> tuple[RankStream, ...]:
        """``dpbound.rank_streams`` of the layout (the third level, clustersim.sweep.replay); ()
        for scenarios run per rank class, whose plans are priced per class."""
        p = layout
        if p.zero_stage == 3 or p.dp * p.cp == 1 or self.per_rank:
            return ()
        key = self.stream_key(p)
        streams = self.memo.rank_streams.get(key)
        if streams is None:
            scenario = replace(self.base, parallel=p)
            streams = self.memo.rank_streams[key] = streams_of(scenario, tuple(range(p.pp)), self.param_work(scenario))
        return streams

    def param_work(self, scenario: Scenario) -> StepWork:
        """``dpbound.param_work`` of ``scenario``, built once per run (``SweepMemo.plans``)."""
        canon = replace(scenario, parallel=parameter_layout(scenario.parallel))
        return self.memo.plans.remember("param_work", canon, lambda: build_step_work(canon))
