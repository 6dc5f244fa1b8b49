"""The event-driven step simulation (simpy). A thin loop: all arithmetic is in the cost modules.

One representative GPU per pipeline rank is simulated (its DP replicas and TP peers do the same
work at the same time, so they are not simulated one by one). Each representative has a compute
stream that walks its schedule's actions, a DP stream that runs gradient and parameter
collectives in order, and two processor-sharing links (its NVLink port and its NIC share) on
which every communication phase runs, so that DP and PP traffic contend where they meet.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import simpy

from clustersim.collectives import CollectivePlan
from clustersim.engine.groups import pp_plan
from clustersim.engine.stages import StepWork, build_step_work
from clustersim.engine.timeline import StepResult, Timeline
from clustersim.engine.units import CompiledUnit, UnitCache
from clustersim.engine.zero import DpPlan, dp_plan
from clustersim.network import FairShareLink
from clustersim.parallel.pipeline import build_schedule
from clustersim.scenario import Scenario

Proc = Generator[simpy.Event, Any, None]


@dataclass(frozen=True, slots=True)
class SimResult(StepResult):
    timeline: Timeline


class _StepSim:
    def __init__(self, scenario: Scenario, record: bool) -> None:
        par = scenario.parallel
        self.sc = scenario
        self.pp = par.pp
        self.num_global = par.pp * par.virtual_stages
        self.work: StepWork = build_step_work(scenario)
        self.dp: DpPlan = dp_plan(scenario, self.work)
        self.schedule = build_schedule(par.schedule, par.pp, par.num_micro_batches, par.virtual_stages)
        self.env = simpy.Environment()
        self.tl = Timeline(record=record)
        self.links = [{tier: FairShareLink(self.env, f"rank{r}.{tier}") for tier in ("scale_up", "scale_out")}
                      for r in range(self.pp)]
        self.arrivals: dict[tuple[str, int, int], simpy.Event] = {}
        self.send_start: dict[tuple[str, int, int], float] = {}
        self.dp_queue = [simpy.Store(self.env) for _ in range(self.pp)]
        self.dp_pending: list[list[simpy.Event]] = [[] for _ in range(self.pp)]
        self.param_ready: dict[tuple[int, int], simpy.Event] = {}
        self.end_s = [0.0] * self.pp
        self.units = UnitCache(scenario)
        self._isolation: dict[int, bool] = {}
        self.shared_tiers = self._tiers_used_beside_compute()

    def _tiers_used_beside_compute(self) -> frozenset[str]:
        """Link tiers that DP collectives or pipeline transfers use while compute runs."""
        plans = [plan for items in self.dp.grad_buckets.values() for _, plan in items]
        plans += [plan for items in self.dp.param_gathers.values() for _, plan in items]
        plans += [plan for items in self.dp.zero3_unit_gather.values() for _, plan in items]
        plans += [plan for _, plan in self.dp.after_backward]
        if self.num_global > 1:
            plans += [pp_plan(self.sc, self.work.p2p_bytes, r) for r in range(self.pp)]
        return frozenset(ph.tier for plan in plans for ph in plan.phases)

    # -- communication ---------------------------------------------------------------------
    def _run_plan(self, rank: int, plan: CollectivePlan) -> Proc:
        for phase in plan.phases:
            if phase.latency_s > 0:
                yield self.env.timeout(phase.latency_s)
            if phase.wire_bytes > 0:
                yield self.links[rank][phase.tier].transfer(phase.wire_bytes / phase.bw_bytes_per_s)

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

    def _dp_stream(self, rank: int) -> Proc:
        """Runs this rank's DP collectives one after another, as one NCCL stream does."""
        while True:
            name, plan, done = yield self.dp_queue[rank].get()
            start = self.env.now
            yield from self._run_plan(rank, plan)
            self.tl.add(rank, "dp", name, "dp_comm", start, self.env.now)
            done.succeed()

    def _enqueue_dp(self, rank: int, name: str, plan: CollectivePlan) -> simpy.Event:
        done = self.env.event()
        self.dp_queue[rank].put((name, plan, done))
        self.dp_pending[rank].append(done)
        return done

    # -- compute ---------------------------------------------------------------------------
    def _isolated(self, unit: CompiledUnit) -> bool:
        """True if no other transfer can share a link with this unit's collectives, so that its
        contention-free duration is exact (then one timeout stands for the whole unit)."""
        known = self._isolation.get(id(unit))
        if known is None:
            overlapped = any(s.plan is not None and s.overlapped for s in unit.steps)
            collectives = sum(1 for s in unit.steps if s.plan is not None)
            known = not (unit.tiers & self.shared_tiers) and (not overlapped or collectives == 1)
            self._isolation[id(unit)] = known
        return known

    def _run_fast(self, rank: int, units: list[CompiledUnit], label: str) -> Proc:
        """A run of isolated units as one timeout; segments and totals as if run one by one."""
        t = self.env.now
        for unit in units:
            for cause, sec in unit.by_cause:
                self.tl.add(rank, "compute", label if cause == "compute" else cause, cause, t, t + sec)
                t += sec
        yield self.env.timeout(sum(u.time_s for u in units))

    def _run_unit(self, rank: int, unit: CompiledUnit, label: str) -> Proc:
        env, tl = self.env, self.tl
        pending: list[tuple[str, simpy.Process]] = []
        for step in unit.steps:
            if step.plan is None:
                start = env.now
                yield env.timeout(step.time_s)
                tl.add(rank, "compute", label, "compute", start, env.now)
            elif step.overlapped:
                pending.append((step.cause, env.process(self._run_plan(rank, step.plan))))
            else:
                start = env.now
                yield from self._run_plan(rank, step.plan)
                tl.add(rank, "compute", step.name, step.cause, start, env.now)
        for cause, proc in pending:
            start = env.now
            yield proc
            tl.add(rank, "compute", f"wait {cause}", cause, start, env.now)

    # -- the schedule ----------------------------------------------------------------------
    def _rank(self, rank: int) -> Proc:
        env, tl, pp, G = self.env, self.tl, self.pp, self.num_global
        actions = self.schedule[rank]
        last_b = {a.chunk: i for i, a in enumerate(actions) if a.kind == "B"}
        for i, action in enumerate(actions):
            g = action.chunk * pp + rank
            stage = self.work.stages[g]
            mb = action.micro_batch
            if action.kind == "F":
                if g > 0:
                    yield from self._wait_arrival(rank, ("F", g, mb))
                # ZeRO-3 gathers start when the action starts (its input has arrived), as FSDP's
                # pre-forward hook issues them; the closed form does the same
                gathers = self._zero3_gathers(rank, g, action.kind)
                units = [self.units(w) for w in stage.forward]
                waits = [gathers.get(u) or self.param_ready.get((g, u)) for u in range(len(units))]
                if all(self._isolated(x) for x in units) and all(w is None or w.triggered for w in waits):
                    yield from self._run_fast(rank, units, f"{action}")
                else:
                    for unit, wait in zip(units, waits, strict=True):
                        yield from self._wait_params(rank, g, wait)
                        yield from self._run_unit(rank, unit, f"{action}")
                if g < G - 1:
                    env.process(self._send(rank, ("F", g + 1, mb)))
            else:
                if g < G - 1:
                    yield from self._wait_arrival(rank, ("B", g, mb))
                gathers = self._zero3_gathers(rank, g, action.kind)
                final = last_b[action.chunk] == i
                units = [self.units(w) for w in stage.backward]
                n = len(units)
                if not final and not gathers and all(self._isolated(x) for x in units):
                    yield from self._run_fast(rank, units, f"{action}")
                else:
                    for u, unit in enumerate(units):
                        yield from self._wait_params(rank, g, gathers.get(n - 1 - u))
                        yield from self._run_unit(rank, unit, f"{action}")
                        if final:
                            self._grad_ready(rank, g, u)
                if g > 0:
                    env.process(self._send(rank, ("B", g - 1, mb)))
        # End of step: wait for the gradient reduction, step the optimizer, gather parameters.
        for name, plan in self.dp.after_backward:
            self._enqueue_dp(rank, name, plan)
        start = env.now
        yield simpy.AllOf(env, self.dp_pending[rank])
        tl.add(rank, "compute", "wait grad reduce", "dp_comm", start, env.now)
        start = env.now
        yield env.timeout(self.work.optimizer_time_s[rank])
        tl.add(rank, "compute", "optimizer step", "optimizer", start, env.now)
        for name, plan in self.dp.after_optimizer:
            start = env.now
            yield from self._run_plan(rank, plan)
            tl.add(rank, "compute", name, "dp_comm", start, env.now)
        self.end_s[rank] = env.now

    def _grad_ready(self, rank: int, g: int, unit: int) -> None:
        for name, plan in self.dp.grad_buckets.get((g, unit), ()):
            self._enqueue_dp(rank, name, plan)

    def _zero3_gathers(self, rank: int, g: int, kind: str) -> dict[int, simpy.Event]:
        """ZeRO-3: gather every unit's parameters for this action, in use order, on the DP stream
        (which serialises them, so each gather prefetches while the previous unit computes)."""
        units = sorted(u for (gg, u) in self.dp.zero3_unit_gather if gg == g)
        if kind == "B":
            units.reverse()
        return {u: [self._enqueue_dp(rank, *item) for item in self.dp.zero3_unit_gather[(g, u)]][-1] for u in units}

    def _wait_params(self, rank: int, g: int, event: simpy.Event | None) -> Proc:
        if event is None or event.triggered:
            return
        start = self.env.now
        yield event
        self.tl.add(rank, "compute", f"wait params s{g}", "dp_comm", start, self.env.now)

    def run(self) -> SimResult:
        env = self.env
        for rank in range(self.pp):
            env.process(self._dp_stream(rank))
            # Parameter all-gathers overlapped with the forward pass (ZeRO with overlap_param_gather):
            # issued in forward order at the start of the step, each unit waits for its own.
            for chunk in range(self.sc.parallel.virtual_stages):
                g = chunk * self.pp + rank
                for (gg, unit), items in sorted(self.dp.param_gathers.items()):
                    if gg != g:
                        continue
                    for name, plan in items:
                        self.param_ready[(gg, unit)] = self._enqueue_dp(rank, name, plan)
        procs = [env.process(self._rank(r)) for r in range(self.pp)]
        env.run(until=simpy.AllOf(env, procs))
        fields = StepResult.fields_from(self.end_s, [self.tl.busy(r) for r in range(self.pp)])
        return SimResult(*fields, self.tl)


def simulate_step(scenario: Scenario, record: bool = True) -> SimResult:
    """Simulate one optimizer step of ``scenario`` event by event."""
    return _StepSim(scenario, record).run()
