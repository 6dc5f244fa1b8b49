"""Compiled units run in simpy on a simulated rank's compute lane and links: the event engine's core.

A unit's kernels run on the rank's compute lane (``ComputeLane``: slowed while collectives run
beside it, clustersim.plan.overlap); each collective's phases run on the rank's link of their tier
(a processor-sharing ``FairShareLink``), so that transfers that meet on a link share it. Blocking
collectives hold the lane; overlapped ones run beside the kernels that follow them and the unit
waits for them at its end (clustersim.plan.compiled_unit).

``UnitRunner`` is what the event engine (clustersim.engine.event) builds a step on. ``action_alone``
runs one action by itself on a fresh lane and links: the duration that the hybrid engine's closed-form
stretches take for an action whose own overlapped collectives share links (clustersim.engine.hybrid).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

import simpy

from clustersim.collectives import CollectivePlan, Phase
from clustersim.engine.lane import ComputeLane
from clustersim.engine.timeline import Segment, Timeline
from clustersim.network import FairShareLink
from clustersim.plan.compiled_unit import CompiledUnit
from clustersim.plan.step_plan import SimRank, StepPlan, Total

Proc = Generator[simpy.Event, Any, None]
TIERS = ("scale_up", "scale_out", "host")


class UnitRunner:
    """Runs compiled units on simulated ranks: ``lanes[rank]``, ``links[rank][tier]``, segments into ``tl``."""

    def __init__(self, env: simpy.Environment, tl: Timeline, lanes: Sequence[ComputeLane] | Mapping[int, ComputeLane],
                 links: Sequence[dict[str, FairShareLink]] | Mapping[int, dict[str, FairShareLink]]) -> None:
        self.env = env
        self.tl = tl
        self.lanes = lanes
        self.links = links
        self.link_last: dict[tuple[int, str], float] = {}   # (rank, tier) -> when a transfer last left it

    def _transfer(self, rank: int, phase: Phase) -> simpy.Event:
        """A phase's bytes on this rank's link of the phase's tier."""
        return self.links[rank][phase.tier].transfer(phase.wire_bytes / phase.bw_bytes_per_s)

    def _run_plan(self, rank: int, plan: CollectivePlan, cause: str | None = None) -> Proc:
        """Run a collective's phases on this rank's links; ``cause`` marks it as running beside
        the compute lane (which then slows down)."""
        lane = self.lanes[rank]
        if cause is not None:
            lane.comm_started(cause)
        for phase in plan.phases:
            if phase.latency_s > 0:
                yield self.env.timeout(phase.latency_s)
            if phase.wire_bytes > 0:
                yield self._transfer(rank, phase)
                self.link_last[(rank, phase.tier)] = self.env.now
        if cause is not None:
            lane.comm_ended(cause)

    def _compute(self, rank: int, work_s: float, label: str) -> Proc:
        start = self.env.now
        lost = yield self.lanes[rank].run(work_s)
        t = start + work_s
        self.tl.add(rank, "compute", label, "compute", start, t)
        for cause in sorted(lost):
            self.tl.add(rank, "compute", f"{label} (slowed by {cause})", cause, t, t + lost[cause])
            t += lost[cause]

    def _run_unit(self, rank: int, unit: CompiledUnit, label: str) -> Proc:
        env, tl = self.env, self.tl
        pending: list[tuple[str, simpy.Process]] = []
        index: dict[int, tuple[str, simpy.Process]] = {}
        for i, step in enumerate(unit.steps):
            if step.join >= 0:
                item = index.pop(step.join)
                pending.remove(item)
                start = env.now
                yield item[1]
                tl.add(rank, "compute", f"wait {item[0]}", item[0], start, env.now)
            elif step.plan is None:
                yield from self._compute(rank, step.time_s, label)
            elif step.overlapped:
                item = (step.cause, env.process(self._run_plan(rank, step.plan, step.cause)))
                pending.append(item)
                index[i] = item
            else:
                start = env.now
                yield from self._run_plan(rank, step.plan)
                tl.add(rank, "compute", step.name, step.cause, start, env.now)
        for cause, proc in pending:
            start = env.now
            yield proc
            tl.add(rank, "compute", f"wait {cause}", cause, start, env.now)


def _alone_key(rk: SimRank, g: int, kind: str) -> tuple:
    """What an action run alone depends on: the rank's slowdown and its compiled units (ranks on the
    same host share them; keyed by the identity of units that the plan itself holds)."""
    return (rk.slowdown, *(id(u) for u in rk.units[(g, kind)]))


def alone_total(plan: StepPlan, rk: SimRank, g: int, kind: str) -> Total:
    """``action_alone``, memoised in the plan's memo per compiled units (``_alone_key``)."""
    key = _alone_key(rk, g, kind)
    alone = plan.memo.alone
    total = alone.get(key)
    if total is None:
        total = alone[key] = action_alone(plan, rk.index, g, kind)
    return total


def alone_segments(plan: StepPlan, rank: int, g: int, kind: str) -> list[Segment]:
    """The compute segments of ``action_alone``'s run, from time 0 (labelled "alone"): what a
    recorded timeline draws for an action whose duration ``alone_total`` gave; memoised as
    ``alone_total`` is (one run per compiled units, not one per micro-batch)."""
    key = _alone_key(plan.ranks[rank], g, kind)
    segments = plan.memo.alone_segments.get(key)
    if segments is None:
        tl = Timeline(record=True)
        action_alone(plan, rank, g, kind, tl)
        segments = plan.memo.alone_segments[key] = tl.segments
    return segments


def action_alone(plan: StepPlan, rank: int, g: int, kind: str, tl: Timeline | None = None) -> Total:
    """Duration and split by cause of one action of ``rank`` run alone in the event engine (its
    collectives sharing its links only with each other); ``tl``: a timeline to record it in."""
    rk = plan.ranks[rank]
    units = rk.units[(g, kind)]
    env = simpy.Environment()   # one rank's lane and links only
    sim = UnitRunner(env, tl if tl is not None else Timeline(record=False), {rank: ComputeLane(env, rk.slowdown)},
                     {rank: {tier: FairShareLink(env, f"alone.{tier}") for tier in TIERS}})
    end = [0.0]

    def run() -> Proc:
        for unit in units:
            yield from sim._run_unit(rank, unit, "alone")
        end[0] = sim.env.now

    sim.env.run(until=sim.env.process(run()))
    return Total(end[0], tuple(sorted((c, v) for c, v in sim.tl.busy(rank).items() if v > 0)))
