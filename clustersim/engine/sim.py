"""The event-driven step simulation (simpy). A thin loop: all arithmetic is in the cost modules.

One representative GPU per pipeline rank is simulated (its DP replicas and TP peers do the same
work at the same time, so they are not simulated one by one). Each representative has a compute
lane that walks its schedule's actions (``ComputeLane``: slowed while collectives run beside it,
clustersim.engine.overlap), two communication streams that run their collectives in order, as
NCCL streams do ("dp": gradient buckets and parameter gathers; "rs": ZeRO-3's per-unit gradient
reduce-scatters, which FSDP and DeepSpeed issue on a stream of their own), and two
processor-sharing links (its NVLink port and its NIC share) on which every communication phase
runs, so that DP, ZeRO-3 and PP traffic contend where they meet.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import simpy

from clustersim.collectives import CollectivePlan
from clustersim.engine.groups import pp_plan
from clustersim.engine.lane import ComputeLane
from clustersim.engine.overlap import overlap_slowdown
from clustersim.engine.stages import StepWork, build_step_work
from clustersim.engine.timeline import StepResult, Timeline
from clustersim.engine.units import CompiledUnit, UnitCache
from clustersim.engine.zero import DpPlan, Item, dp_plan
from clustersim.network import FairShareLink
from clustersim.parallel.pipeline import build_schedule
from clustersim.scenario import Scenario

Proc = Generator[simpy.Event, Any, None]
STREAMS = ("dp", "rs")


@dataclass(frozen=True, slots=True)
class SimResult(StepResult):
    timeline: Timeline


class _Gathers:
    """ZeRO-3 parameter gathers of one action, issued ``prefetch`` slots ahead of the slot in use."""

    def __init__(self, sim: _StepSim, rank: int, slots: list[tuple[Item, ...]], prefetch: int) -> None:
        self.sim, self.rank, self.slots, self.prefetch = sim, rank, slots, prefetch
        self.events: list[simpy.Event | None] = []

    def before(self, k: int) -> simpy.Event | None:
        """Issue the gathers up to slot ``k + prefetch``; the event slot ``k`` waits for."""
        while len(self.events) < min(len(self.slots), k + self.prefetch + 1):
            items = self.slots[len(self.events)]
            evs = [self.sim._enqueue(self.rank, "dp", name, plan) for name, plan in items]
            self.events.append(evs[-1] if evs else None)
        return self.events[k] if k < len(self.events) else None


def tiers_used_beside_compute(scenario: Scenario, work: StepWork, dp: DpPlan) -> frozenset[str]:
    """Link tiers that DP collectives or pipeline transfers use while compute runs."""
    groups = [dp.grad_buckets, dp.param_gathers]
    if dp.zero3 is not None:
        groups += [dp.zero3.gather, dp.zero3.reduce]
    plans = [plan for group in groups for items in group.values() for _, plan in items]
    plans += [plan for items in dp.after_backward.values() for _, plan in items]
    par = scenario.parallel
    if par.pp * par.virtual_stages > 1:
        plans += [pp_plan(scenario, work.p2p_bytes, r) for r in range(par.pp)]
    return frozenset(ph.tier for plan in plans for ph in plan.phases)


def unit_isolated(unit: CompiledUnit, shared_tiers: frozenset[str]) -> bool:
    """True if no other transfer can share a link with this unit's collectives, so that its
    contention-free duration is exact (then one timeout stands for the whole unit)."""
    overlapped = any(s.plan is not None and s.overlapped for s in unit.steps)
    collectives = sum(1 for s in unit.steps if s.plan is not None)
    return not (unit.tiers & shared_tiers) and (not overlapped or collectives == 1)


class _StepSim:
    def __init__(self, scenario: Scenario, record: bool) -> None:
        par = scenario.parallel
        self.sc = scenario
        self.pp = par.pp
        self.num_global = par.pp * par.virtual_stages
        self.work: StepWork = build_step_work(scenario)
        self.dp: DpPlan = dp_plan(scenario, self.work)
        self.z3 = self.dp.zero3
        self.schedule = build_schedule(par.schedule, par.pp, par.num_micro_batches, par.virtual_stages)
        self.env = simpy.Environment()
        self.tl = Timeline(record=record)
        self.links = [{tier: FairShareLink(self.env, f"rank{r}.{tier}") for tier in ("scale_up", "scale_out")}
                      for r in range(self.pp)]
        slowdown = overlap_slowdown(scenario.cluster.gpu)
        self.lanes = [ComputeLane(self.env, slowdown) for _ in range(self.pp)]
        self.arrivals: dict[tuple[str, int, int], simpy.Event] = {}
        self.send_start: dict[tuple[str, int, int], float] = {}
        self.queues = [{s: simpy.Store(self.env) for s in STREAMS} for _ in range(self.pp)]
        self.pending: list[list[simpy.Event]] = [[] for _ in range(self.pp)]
        self.outstanding = [0] * self.pp  # stream items queued or running, per rank
        self.param_ready: dict[tuple[int, int], simpy.Event] = {}
        self.end_s = [0.0] * self.pp
        self.units = UnitCache(scenario)
        self._isolation: dict[int, bool] = {}
        self.shared_tiers = self._tiers_used_beside_compute()

    def _tiers_used_beside_compute(self) -> frozenset[str]:
        return tiers_used_beside_compute(self.sc, self.work, self.dp)

    # -- communication ---------------------------------------------------------------------
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
                yield self.links[rank][phase.tier].transfer(phase.wire_bytes / phase.bw_bytes_per_s)
        if cause is not None:
            lane.comm_ended(cause)

    def _arrival(self, key: tuple[str, int, int]) -> simpy.Event:
        if key not in self.arrivals:
            self.arrivals[key] = self.env.event()
        return self.arrivals[key]

    def _send(self, rank: int, key: tuple[str, int, int]) -> Proc:
        """Send an activation (F) or its gradient (B) to the stage that needs it."""
        start = self.env.now
        self.send_start[key] = start
        boundary = rank if key[0] == "F" else (rank - 1) % self.pp
        plan = pp_plan(self.sc, self.work.p2p_bytes, boundary)
        yield from self._run_plan(rank, plan)
        self.tl.add(rank, "pp", f"send {key[0]}{key[2]} to stage {key[1]}", "pp_comm", start, self.env.now)
        self._arrival(key).succeed()

    def _wait_arrival(self, rank: int, key: tuple[str, int, int]) -> Proc:
        event = self._arrival(key)
        if event.triggered:
            return
        start = self.env.now
        yield event
        sent = min(max(self.send_start.get(key, start), start), self.env.now)
        self.tl.add(rank, "compute", f"wait {key[0]}{key[2]}", "bubble", start, sent)
        self.tl.add(rank, "compute", f"recv {key[0]}{key[2]}", "pp_comm", sent, self.env.now)

    def _stream(self, rank: int, stream: str) -> Proc:
        """Runs this rank's collectives of one stream one after another, as one NCCL stream does."""
        while True:
            name, plan, done = yield self.queues[rank][stream].get()
            start = self.env.now
            yield from self._run_plan(rank, plan, "dp_comm")
            self.tl.add(rank, stream, name, "dp_comm", start, self.env.now)
            self.outstanding[rank] -= 1
            done.succeed()

    def _enqueue(self, rank: int, stream: str, name: str, plan: CollectivePlan) -> simpy.Event:
        done = self.env.event()
        self.outstanding[rank] += 1
        self.queues[rank][stream].put((name, plan, done))
        self.pending[rank].append(done)
        return done

    # -- compute ---------------------------------------------------------------------------
    def _isolated(self, unit: CompiledUnit) -> bool:
        """True if no other transfer can share a link with this unit's collectives, so that its
        contention-free duration is exact (then one timeout stands for the whole unit)."""
        known = self._isolation.get(id(unit))
        if known is None:
            known = self._isolation[id(unit)] = unit_isolated(unit, self.shared_tiers)
        return known

    def _quiet(self, rank: int, units: list[CompiledUnit]) -> bool:
        """The units run alone: no collective of this rank's streams runs or waits beside them
        (only this rank's own actions enqueue them) and none of their collectives can contend."""
        return self.outstanding[rank] == 0 and all(self._isolated(u) for u in units)

    def _run_fast(self, rank: int, units: list[CompiledUnit], label: str) -> Proc:
        """A run of quiet units as one timeout; segments and totals as if run one by one."""
        t = self.env.now
        for unit in units:
            for cause, sec in unit.by_cause:
                self.tl.add(rank, "compute", label if cause == "compute" else cause, cause, t, t + sec)
                t += sec
        yield self.env.timeout(sum(u.time_s for u in units))

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
        for step in unit.steps:
            if step.plan is None:
                yield from self._compute(rank, step.time_s, label)
            elif step.overlapped:
                pending.append((step.cause, env.process(self._run_plan(rank, step.plan, step.cause))))
            else:
                start = env.now
                yield from self._run_plan(rank, step.plan)
                tl.add(rank, "compute", step.name, step.cause, start, env.now)
        for cause, proc in pending:
            start = env.now
            yield proc
            tl.add(rank, "compute", f"wait {cause}", cause, start, env.now)

    def _wait_params(self, rank: int, g: int, event: simpy.Event | None) -> Proc:
        if event is None or event.triggered:
            return
        start = self.env.now
        yield event
        self.tl.add(rank, "compute", f"wait params s{g}", "dp_comm", start, self.env.now)

    # -- the schedule ----------------------------------------------------------------------
    def _forward(self, rank: int, g: int, label: str) -> Proc:
        stage = self.work.stages[g]
        units = [self.units(w) for w in stage.forward]
        ready = [self.param_ready.get((g, u)) for u in range(len(units))]
        if self.z3 is None and all(e is None or e.triggered for e in ready) and self._quiet(rank, units):
            yield from self._run_fast(rank, units, label)
            return
        gathers = self._gathers(rank, g, "F")
        for u, unit in enumerate(units):
            yield from self._wait_params(rank, g, gathers.before(u) if gathers else ready[u])
            yield from self._run_unit(rank, unit, label)

    def _backward(self, rank: int, g: int, label: str, final: bool) -> Proc:
        stage = self.work.stages[g]
        units = [self.units(w) for w in stage.backward]
        z3 = self.z3
        if z3 is None and not final and self._quiet(rank, units):
            yield from self._run_fast(rank, units, label)
            return
        gathers = self._gathers(rank, g, "B")
        for b, unit in enumerate(units):
            if gathers is not None and z3 is not None and z3.backward_gathers == 2:
                recompute, proper = stage.backward_split[b]
                yield from self._wait_params(rank, g, gathers.before(2 * b))
                yield from self._run_unit(rank, self.units(recompute), label)
                yield from self._wait_params(rank, g, gathers.before(2 * b + 1))
                yield from self._run_unit(rank, self.units(proper), label)
            else:
                if gathers is not None:
                    yield from self._wait_params(rank, g, gathers.before(b))
                yield from self._run_unit(rank, unit, label)
            if z3 is not None:  # ZeRO-3 reduces every micro-batch's gradients as each unit finishes
                for name, plan in z3.reduce.get((g, b), ()):
                    self._enqueue(rank, "rs", name, plan)
            elif final:
                for name, plan in self.dp.grad_buckets.get((g, b), ()):
                    self._enqueue(rank, "dp", name, plan)

    def _gathers(self, rank: int, g: int, kind: str) -> _Gathers | None:
        """ZeRO-3 gathers of this action's units in the order of use."""
        z3 = self.z3
        if z3 is None:
            return None
        n = len(self.work.stages[g].forward)
        if kind == "F":
            slots = [z3.gather.get((g, u), ()) for u in range(n)]
        else:
            slots = [z3.gather.get((g, n - 1 - b), ()) for b in range(n) for _ in range(z3.backward_gathers)]
        return _Gathers(self, rank, slots, z3.prefetch)

    def _rank(self, rank: int) -> Proc:
        env, tl, pp, G = self.env, self.tl, self.pp, self.num_global
        actions = self.schedule[rank]
        last_b = {a.chunk: i for i, a in enumerate(actions) if a.kind == "B"}
        for i, action in enumerate(actions):
            g = action.chunk * pp + rank
            mb = action.micro_batch
            if action.kind == "F":
                if g > 0:
                    yield from self._wait_arrival(rank, ("F", g, mb))
                yield from self._forward(rank, g, f"{action}")
                if g < G - 1:
                    env.process(self._send(rank, ("F", g + 1, mb)))
            else:
                if g < G - 1:
                    yield from self._wait_arrival(rank, ("B", g, mb))
                yield from self._backward(rank, g, f"{action}", last_b[action.chunk] == i)
                if g > 0:
                    env.process(self._send(rank, ("B", g - 1, mb)))
        # End of step: wait for the gradient reduction, step the optimizer, gather parameters.
        stages = [chunk * pp + rank for chunk in range(self.sc.parallel.virtual_stages)]
        for name, plan in self.dp.after_backward_of(stages):
            self._enqueue(rank, "dp", name, plan)
        start = env.now
        yield simpy.AllOf(env, self.pending[rank])
        tl.add(rank, "compute", "wait grad reduce", "dp_comm", start, env.now)
        start = env.now
        yield env.timeout(self.work.optimizer_time_s[rank])
        tl.add(rank, "compute", "optimizer step", "optimizer", start, env.now)
        for name, plan in self.dp.after_optimizer_of(stages):
            start = env.now
            yield from self._run_plan(rank, plan)
            tl.add(rank, "compute", name, "dp_comm", start, env.now)
        self.end_s[rank] = env.now

    def run(self) -> SimResult:
        env = self.env
        for rank in range(self.pp):
            for stream in STREAMS:
                env.process(self._stream(rank, stream))
            # Parameter all-gathers overlapped with the forward pass (ZeRO with overlap_param_gather):
            # issued in forward order at the start of the step, each unit waits for its own.
            for chunk in range(self.sc.parallel.virtual_stages):
                g = chunk * self.pp + rank
                for (gg, unit), items in sorted(self.dp.param_gathers.items()):
                    if gg != g:
                        continue
                    for name, plan in items:
                        self.param_ready[(gg, unit)] = self._enqueue(rank, "dp", name, plan)
        procs = [env.process(self._rank(r)) for r in range(self.pp)]
        env.run(until=simpy.AllOf(env, procs))
        fields = StepResult.fields_from(self.end_s, [self.tl.busy(r) for r in range(self.pp)])
        return SimResult(*fields, self.tl)


def simulate_step(scenario: Scenario, record: bool = True) -> SimResult:
    """Simulate one optimizer step of ``scenario`` event by event."""
    return _StepSim(scenario, record).run()
