"""The event-driven step simulation (simpy). A thin loop: all arithmetic is in the cost modules.

The engine walks the simulated ranks of a step plan (clustersim.plan.step_plan): one
representative GPU per pipeline rank on a healthy, homogeneous cluster (its DP replicas and TP
peers do the same work at the same time), or pipeline rank ``p`` of every rank class in per-rank
mode. Each simulated rank has a compute lane that walks its schedule's actions (``ComputeLane``:
slowed while collectives run beside it, clustersim.plan.overlap), two communication streams
that run their collectives in order, as NCCL streams do ("dp": gradient buckets and parameter
gathers; "rs": ZeRO-3's per-unit gradient reduce-scatters, which FSDP and DeepSpeed issue on a
stream of their own), and two processor-sharing links (its NVLink port and its NIC share) on which
every communication phase runs, so that DP, ZeRO-3 and PP traffic contend where they meet. With
several classes, a data-parallel collective starts when every class has launched it and ends
when the last class has finished it (its members wait for the slowest; the waiting kernel holds
its SMs, as a launched NCCL kernel spins on its peers).

A unit runs on the lane and links as clustersim.engine.unit_runner runs it. ``start`` and
``stops`` let clustersim.engine.hybrid run only part of a step here (the rest in closed form where
nothing can contend). ``EventEngine`` is this model behind the timing-model interface
(clustersim.engine.selector).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import simpy

from clustersim.collectives import CollectivePlan
from clustersim.engine.lane import ComputeLane
from clustersim.engine.pair import PairCore, Segment, chain_of, pair_side
from clustersim.engine.timeline import SimResult, StepResult, Timeline
from clustersim.engine.unit_runner import TIERS, Proc, UnitRunner, alone_segments, alone_total
from clustersim.network import FairShareLink
from clustersim.plan.comm_plans import Item
from clustersim.plan.step_plan import RankAction, SimRank, StepPlan, Total
from clustersim.plan.zero3 import gather_slots

STREAMS = ("dp", "rs")
Key = tuple[str, int, int, int]  # (kind, class, global stage, micro-batch)


@dataclass(slots=True)
class Resume:
    """Where a partial run leaves off (or a later one starts): per simulated rank the next action
    and the time its compute stream is free, the causes so far, the inputs in flight."""

    nxt: list[int]
    clock: list[float]
    causes: list[dict[str, float]]
    arrivals: dict[Key, tuple[float, float]] = field(default_factory=dict)   # (send start, arrival)
    replay: list[tuple[int, Key, float, float, bool]] = field(default_factory=list)  # (rank, key, start, end, consumed)
    # filled by a partial run: collectives that ran, parameter gathers done, links busy until
    stream_busy: list[list[tuple[float, float, str]]] = field(default_factory=list)
    param_ready: dict[tuple[int, int, int], float] = field(default_factory=dict)
    link_free: dict[tuple[int, str], float] = field(default_factory=dict)
    ghosts_ok: bool = True


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


class _Send:
    """A pipeline transfer run by callbacks: each phase's latency, then its bytes on the link."""

    __slots__ = ("i", "key", "kind", "phases", "rank", "sim", "start", "waited")

    def __init__(self, sim: _StepSim, rank: int, kind: str, key: Key, boundary: int | None = None) -> None:
        self.sim, self.rank, self.kind, self.key = sim, rank, kind, key
        rk = sim.plan.ranks[rank]
        plan = rk.send[kind] if boundary is None else rk.send_at[boundary]
        assert plan is not None
        self.phases = plan.phases
        self.i = 0
        self.waited = False
        self.start = sim.env.now
        sim.send_start[key] = self.start

    def next(self, _event: simpy.Event | None = None) -> None:
        sim, env = self.sim, self.sim.env
        while self.i < len(self.phases):
            phase = self.phases[self.i]
            if not self.waited:
                self.waited = True
                if phase.latency_s > 0:
                    env.timeout(phase.latency_s).callbacks.append(self.next)
                    return
            self.i += 1
            self.waited = False
            if phase.wire_bytes > 0:
                sim._transfer(self.rank, phase).callbacks.append(self._moved)
                return
        sim._sent(self.rank, self.kind, self.key, self.start)

    def _moved(self, _event: simpy.Event) -> None:
        self.sim.link_last[(self.rank, self.phases[self.i - 1].tier)] = self.sim.env.now
        self.next()


class _Barrier:
    """One data-parallel collective across rank classes: all launch, then all finish."""

    __slots__ = ("done", "finished", "launched", "ready")

    def __init__(self, env: simpy.Environment) -> None:
        self.launched = 0
        self.finished = 0
        self.ready = env.event()
        self.done = env.event()


class _StepSim(UnitRunner):
    """One step of a plan in simpy (module docstring)."""

    def __init__(self, plan: StepPlan, record: bool, stops: list[int] | None = None,
                 start: Resume | None = None, stop_quiet: bool = False, env: simpy.Environment | None = None,
                 name: str = "") -> None:
        self.plan = plan
        self.sc = plan.scenario
        self.pp = plan.pp
        self.num_global = plan.num_global
        self.z3 = plan.dp.zero3
        n = len(plan.ranks)
        self.stops = stops
        self.stop_quiet = stop_quiet  # a partial run: each rank stops at its first action with no collective in flight
        self.partial = stops is not None or stop_quiet
        self.start = start
        t0 = 0.0
        if start is not None:
            t0 = min([*start.clock, *(r[2] for r in start.replay)])
        env = env if env is not None else simpy.Environment(initial_time=t0)
        self.env = env   # for self._link
        super().__init__(env, Timeline(record=record),
                         [ComputeLane(env, rk.slowdown) for rk in plan.ranks],
                         [{tier: self._link(f"{name}rank{k}.{tier}") for tier in TIERS} for k in range(n)])
        self.arrivals: dict[Key, simpy.Event] = {}
        self.send_start: dict[Key, float] = {}
        self.queues = [{s: simpy.Store(self.env) for s in STREAMS} for _ in range(n)]
        self.pending: list[list[simpy.Event]] = [[] for _ in range(n)]
        self.outstanding = [0] * n  # stream items queued or running, per rank
        self.seq = [dict.fromkeys(STREAMS, 0) for _ in range(n)]
        self.barriers: dict[tuple[str, int, int], _Barrier] = {}
        self.param_ready: dict[tuple[int, int, int], simpy.Event] = {}
        self.end_s = [0.0] * n
        # bookkeeping for partial runs (clustersim.engine.hybrid)
        self.nxt = [0] * n
        self.clock = [0.0] * n
        self.arrived_at: dict[Key, float] = {}
        self.consumed: set[Key] = set()
        self.stream_busy: list[list[tuple[float, float, str]]] = [[] for _ in range(n)]
        self.param_done: dict[tuple[int, int, int], float] = {}
        self.ghosts_ok = True

    # -- communication ---------------------------------------------------------------------
    def _arrival(self, key: Key) -> simpy.Event:
        event = self.arrivals.get(key)
        if event is None:
            event = self.arrivals[key] = self.env.event()
        return event

    def _send(self, rank: int, kind: str, key: Key, boundary: int | None = None) -> None:
        """Send an activation (F) or its gradient (B) to the stage that needs it over the link of
        pipeline ``boundary`` (None: the classic neighbour of ``kind``) - callbacks, not a process:
        one of these runs after every action."""
        _Send(self, rank, kind, key, boundary).next()

    def _sent(self, rank: int, kind: str, key: Key, start: float) -> None:
        self.tl.add(rank, "pp", f"send {kind}{key[3]} to stage {key[2]}", "pp_comm", start, self.env.now)
        self.arrived_at[key] = self.env.now
        self._arrival(key).succeed()

    def _ghost(self, rank: int, kind: str, start: float, end: float) -> Proc:
        """A transfer already accounted for (its input was consumed in closed form): it only
        occupies the link; if it finishes later than the closed form said, the run is invalid."""
        yield self.env.timeout(start - self.env.now)
        plan = self.plan.ranks[rank].send[kind]
        assert plan is not None
        yield from self._run_plan(rank, plan)
        if self.env.now > end * (1 + 1e-12) + 1e-15:
            self.ghosts_ok = False

    def _replayed_send(self, rank: int, kind: str, key: Key, start: float) -> Proc:
        yield self.env.timeout(start - self.env.now)
        self._send(rank, kind, key)

    def _wait_arrival(self, rank: int, key: Key) -> Proc:
        self.consumed.add(key)
        event = self._arrival(key)
        if event.triggered:
            return
        start = self.env.now
        yield event
        sent = min(max(self.send_start.get(key, start), start), self.env.now)
        self.tl.add(rank, "compute", f"wait {key[0]}{key[3]}", "bubble", start, sent)
        self.tl.add(rank, "compute", f"recv {key[0]}{key[3]}", "pp_comm", sent, self.env.now)

    def _stream(self, rank: int, stream: str) -> Proc:
        """Runs this rank's collectives of one stream one after another, as one NCCL stream does."""
        multi = self.plan.num_classes > 1
        while True:
            name, plan, done, seq = yield self.queues[rank][stream].get()
            start = self.env.now
            if multi:
                yield from self._collective_across_classes(rank, stream, seq, plan)
            else:
                yield from self._run_plan(rank, plan, "dp_comm")
            self.tl.add(rank, stream, name, "dp_comm", start, self.env.now)
            self.stream_busy[rank].append((start, self.env.now, "dp_comm"))
            self.outstanding[rank] -= 1
            done.succeed()

    def _collective_across_classes(self, rank: int, stream: str, seq: int, plan: CollectivePlan) -> Proc:
        """A data-parallel collective whose members sit in every class: it moves data once all have
        launched it and completes for all when the last one is through."""
        key = (stream, self.plan.ranks[rank].pp_rank, seq)
        barrier = self.barriers.get(key)
        if barrier is None:
            barrier = self.barriers[key] = _Barrier(self.env)
        lane = self.lanes[rank]
        lane.comm_started("dp_comm")  # the launched kernel holds its SMs while it waits for peers
        barrier.launched += 1
        if barrier.launched == self.plan.num_classes:
            barrier.ready.succeed()
        yield barrier.ready
        yield from self._run_plan(rank, plan)   # the lane already counts it (comm_started above)
        barrier.finished += 1
        if barrier.finished == self.plan.num_classes:
            barrier.done.succeed()
        yield barrier.done
        lane.comm_ended("dp_comm")

    def _enqueue(self, rank: int, stream: str, name: str, plan: CollectivePlan) -> simpy.Event:
        done = self.env.event()
        self.outstanding[rank] += 1
        seq = self.seq[rank][stream]
        self.seq[rank][stream] = seq + 1
        self.queues[rank][stream].put((name, plan, done, seq))
        self.pending[rank].append(done)
        return done

    # -- compute ---------------------------------------------------------------------------
    def _quiet(self, rk: SimRank, g: int, kind: str) -> Total | None:
        """The contention-free duration of the action if its units run alone - no collective of this
        rank's streams runs or waits beside them (only this rank's own actions enqueue them) and
        none of their collectives can meet other traffic - else None. Units whose overlapped
        collectives share links among themselves take their duration run alone once (without a
        timeline to record)."""
        if self.outstanding[rk.index]:
            return None
        key = (g, kind)
        if rk.isolated[key]:
            return rk.totals[key]
        if not rk.private[key]:
            return None
        return alone_total(self.plan, rk, g, kind)

    def _run_fast(self, rk: SimRank, g: int, kind: str, total: Total, label: str) -> Proc:
        """A run of quiet units as one timeout. The step's numbers are the same whether the timeline
        is recorded or not: the totals take ``total``'s seconds by cause either way, and a recorded
        timeline only gains the segments, as if the units ran one by one (isolated units) or as
        the run alone that gave ``total`` had them (``alone_total``), shifted to now."""
        rank, tl = rk.index, self.tl
        time_s, by_cause = total
        tl.add_totals(rank, by_cause)
        if tl.record:
            t = self.env.now
            if rk.isolated[(g, kind)]:
                for unit in rk.units[(g, kind)]:
                    for cause, sec in unit.by_cause:
                        tl.add_segment(rank, "compute", label if cause == "compute" else cause, cause, t, t + sec)
                        t += sec
            else:
                for seg in alone_segments(self.plan, rank, g, kind):
                    tl.add_segment(rank, "compute", seg.name.replace("alone", label), seg.cause,
                                   t + seg.start_s, t + seg.end_s)
        yield self.env.timeout(time_s)

    def _wait_params(self, rank: int, g: int, event: simpy.Event | None) -> Proc:
        if event is None or event.triggered:
            return
        start = self.env.now
        yield event
        self.tl.add(rank, "compute", f"wait params s{g}", "dp_comm", start, self.env.now)

    # -- the schedule ----------------------------------------------------------------------
    def _forward(self, rk: SimRank, g: int, label: str) -> Proc:
        rank = rk.index
        units = rk.units[(g, "F")]
        ready = [self.param_ready.get((rank, g, u)) for u in range(len(units))] if self.param_ready else None
        total = self._quiet(rk, g, "F") if self.z3 is None else None
        if total is not None and (ready is None or all(e is None or e.triggered for e in ready)):
            yield from self._run_fast(rk, g, "F", total, label)
            return
        gathers = self._gathers(rank, len(units), g, "F")
        for u, unit in enumerate(units):
            yield from self._wait_params(rank, g, gathers.before(u) if gathers else (ready[u] if ready else None))
            yield from self._run_unit(rank, unit, label)

    def _backward(self, rk: SimRank, g: int, label: str, final: bool, part: str = "B") -> Proc:
        """A backward action: the whole backward ("B"), its input-gradient part ("Bi") or its
        weight-gradient part ("W") of zero-bubble and DualPipe schedules."""
        rank = rk.index
        units = rk.units[(g, part)]
        z3 = self.z3
        total = self._quiet(rk, g, part) if z3 is None and not final else None
        if total is not None:
            yield from self._run_fast(rk, g, part, total, label)
            return
        gathers = self._gathers(rank, len(units), g, "B") if part == "B" else None
        for b, unit in enumerate(units):
            if gathers is not None and z3 is not None and z3.backward_gathers == 2:
                recompute, proper = rk.split[(g, b)]
                yield from self._wait_params(rank, g, gathers.before(2 * b))
                yield from self._run_unit(rank, recompute, label)
                yield from self._wait_params(rank, g, gathers.before(2 * b + 1))
                yield from self._run_unit(rank, proper, label)
            else:
                if gathers is not None:
                    yield from self._wait_params(rank, g, gathers.before(b))
                yield from self._run_unit(rank, unit, label)
            done = None
            if z3 is not None:  # ZeRO-3 reduces every micro-batch's gradients as each unit finishes
                for name, plan in z3.reduce.get((g, b), ()):
                    done = self._enqueue(rank, "rs", name, plan)
            elif final:
                for name, plan in self.plan.dp.grad_buckets.get((g, b), ()):
                    done = self._enqueue(rank, "dp", name, plan)
            if done is not None and self.plan.dp.blocking_reduce:   # on the compute stream
                start = self.env.now
                yield done
                self.tl.add(rank, "compute", f"wait grads s{g}", "dp_comm", start, self.env.now)

    def _gathers(self, rank: int, n: int, g: int, kind: str) -> _Gathers | None:
        """ZeRO-3 gathers of this action's units in the order of use."""
        z3 = self.z3
        if z3 is None:
            return None
        return _Gathers(self, rank, gather_slots(z3, n, g, kind), z3.prefetch)

    def _pair(self, rk: SimRank, a: RankAction, b: RankAction) -> Proc:
        """An overlapped forward & backward pair (clustersim.engine.pair), driven on the lane and
        links, with the data-parallel collectives its units wait for and launch as they do alone."""
        env, tl, rank, z3, dp = self.env, self.tl, rk.index, self.z3, self.plan.dp
        pair = (a, b)
        gathered = {g for (g, _), _ in self.plan.param_gathers}
        sides = tuple(pair_side(rk, x, dp, x.stage in gathered) for x in pair)
        gathers = tuple(self._gathers(rank, len(rk.units[(x.stage, x.part)]), x.stage, x.kind)
                        if z3 is not None and (x.part == "F" or x.part == "B" and z3.backward_gathers) else None
                        for x in pair)
        chains = (chain_of(sides[0]), chain_of(sides[1]))
        core = PairCore(chains, env.now)
        running: dict[simpy.Event, tuple[str, int, float, float, str]] = {}
        waits: dict[int, simpy.Event] = {}

        def resolve(c: int, seg: Segment) -> bool:
            """Launch what the unit launches now; whether the chain waits (for ``waits[c]``)."""
            x = pair[c]
            if seg.before:
                until = gathers[c].before(seg.unit) if gathers[c] is not None else \
                    self.param_ready.get((rank, x.stage, seg.unit))
            else:
                unit = sides[c].launches[seg.unit]
                stream, items = ("rs", z3.reduce.get((x.stage, unit), ())) if z3 is not None else \
                    ("dp", dp.grad_buckets.get((x.stage, unit), ()))
                done = None
                for name, plan in items:
                    done = self._enqueue(rank, stream, name, plan)
                until = done if dp.blocking_reduce else None
            if until is None or until.triggered:
                return False
            waits[c] = until
            return True

        label = f"{a}&{b}"
        while True:
            for res, c, seg in core.startable(resolve):
                if res == "compute":
                    ev = self.lanes[rank].run(seg.time_s)
                elif res == "comm":
                    ev = env.process(self._run_plan(rank, seg.plan, seg.cause))
                else:
                    ev = waits.pop(c)
                running[ev] = (res, c, env.now, seg.time_s, seg.cause)
            if not running:
                break
            computing = core.busy["compute"]
            waiting = core.waiting_cause()
            t0 = env.now
            fired = yield simpy.AnyOf(env, list(running))
            if not computing:
                tl.add(rank, "compute", f"{label} wait", waiting, t0, env.now)
            for ev in [e for e in running if e in fired.events]:
                res, c, start, work_s, cause = running.pop(ev)
                if res == "compute":
                    t = start + work_s
                    tl.add(rank, "compute", label, "compute", start, t)
                    for why in sorted(ev.value):
                        tl.add(rank, "compute", f"{label} (slowed by {why})", why, t, t + ev.value[why])
                        t += ev.value[why]
                elif res == "comm":
                    tl.add(rank, "pair", label, cause, start, env.now)
                core.finish(res, c, env.now)

    def _sends(self, rank: int, a: RankAction, i: int) -> Proc:
        """Start the sends of the rank's action ``i``; where they block (its ``blocks_from``:
        clustersim.frameworks.blocking_from, docs/engine.md), wait for them."""
        for key, boundary in a.sends:
            self._send(rank, key[0], key, boundary)
        if a.sends and i >= self.plan.ranks[rank].blocks_from:
            start = self.env.now
            for key, _ in a.sends:
                event = self._arrival(key)
                if not event.triggered:
                    yield event
            if self.env.now > start:
                self.tl.add(rank, "compute", f"send {a}", "pp_comm", start, self.env.now)

    def _rank(self, rk: SimRank, first: int) -> Proc:
        env = self.env
        rank = rk.index
        actions = rk.actions
        stop = len(actions) if self.stops is None else min(self.stops[rank], len(actions))
        if self.start is not None and self.start.clock[rank] > env.now:
            yield env.timeout(self.start.clock[rank] - env.now)
        i = first
        while i < stop:
            if self.stop_quiet and not self.outstanding[rank]:
                return
            action = actions[i]
            if action.paired and i + 1 < len(actions):
                other = actions[i + 1]
                for x in (action, other):
                    if x.needs is not None:
                        yield from self._wait_arrival(rank, x.needs)
                yield from self._pair(rk, action, other)
                yield from self._sends(rank, action, i)
                yield from self._sends(rank, other, i + 1)
                i += 2
            else:
                if action.needs is not None:
                    yield from self._wait_arrival(rank, action.needs)
                if action.part == "F":
                    yield from self._forward(rk, action.stage, str(action))
                else:
                    yield from self._backward(rk, action.stage, str(action),
                                              self.plan.dp.reduces(action.part, action.final), action.part)
                yield from self._sends(rank, action, i)
                i += 1
            self.nxt[rank] = i
            self.clock[rank] = env.now
        if self.partial:
            return
        tl = self.tl
        # End of step: wait for the gradient reduction, step the optimizer, gather parameters.
        tail = rk.tail
        for name, plan in tail.reduce:
            self._enqueue(rank, "dp", name, plan)
        start = env.now
        yield simpy.AllOf(env, self.pending[rank])
        tl.add(rank, "compute", "wait grad reduce", "dp_comm", start, env.now)
        for cause, sec in (("jitter", rk.jitter_s), ("host", rk.host_s)):   # clustersim.plan.step_terms
            if sec > 0:
                start = env.now
                yield env.timeout(sec)
                tl.add(rank, "compute", f"{cause} wait", cause, start, env.now)
        start = env.now
        yield env.timeout(tail.optimizer_time_s)
        tl.add(rank, "compute", "optimizer step", "optimizer", start, env.now)
        for name, plan in tail.gather:
            start = env.now
            yield from self._run_plan(rank, plan)
            tl.add(rank, "compute", name, "dp_comm", start, env.now)
        self.end_s[rank] = env.now

    def _issue_param_gathers(self) -> None:
        # Parameter all-gathers overlapped with the forward pass (ZeRO with overlap_param_gather):
        # issued in forward order at the start of the step, each unit waits for its own.
        for rk in self.plan.ranks:
            for g in rk.stages:
                for (gg, unit), items in self.plan.param_gathers:
                    if gg != g:
                        continue
                    for name, plan in items:
                        event = self._enqueue(rk.index, "dp", name, plan)
                        self.param_ready[(rk.index, gg, unit)] = event
                        event.callbacks.append(
                            lambda _e, key=(rk.index, gg, unit): self.param_done.__setitem__(key, self.env.now))

    def _resume_from(self, start: Resume) -> None:
        """Inputs in flight when this run starts: sends to replay, arrivals already known."""
        env = self.env
        for k, causes in enumerate(start.causes):
            self.tl.add_totals(k, tuple(causes.items()))
        replayed = set()
        for rank, key, t_start, t_end, consumed in start.replay:
            kind = key[0]
            if consumed:
                env.process(self._ghost(rank, kind, t_start, t_end))
            else:
                replayed.add(key)
                env.process(self._replayed_send(rank, kind, key, t_start))
        for key, (sent, arrived) in start.arrivals.items():
            if key in replayed:
                continue
            self.send_start[key] = sent
            event = self._arrival(key)
            if arrived <= env.now:
                event.succeed()
            else:
                env.timeout(arrived - env.now).callbacks.append(lambda _e, ev=event: ev.succeed())

    def _link(self, name: str) -> FairShareLink:
        return FairShareLink(self.env, name)

    def run(self) -> SimResult:
        done = self.start_processes()
        if self.partial:
            self.env.run()
            return SimResult(0.0, 0, {}, (), self.tl)
        self.env.run(until=done)
        return self.result()

    def result(self, offset_s: float = 0.0) -> SimResult:
        """The step, with times measured from ``offset_s`` (when it started on a shared clock)."""
        n = len(self.plan.ranks)
        fields = StepResult.fields_from([e - offset_s for e in self.end_s], [self.tl.busy(r) for r in range(n)])
        return SimResult(*fields, self.tl, tuple(c - offset_s for c in self.clock))

    def start_processes(self) -> simpy.Event:
        """Start the step's processes; the event fires when every rank has finished it."""
        env = self.env
        for rk in self.plan.ranks:
            for stream in STREAMS:
                env.process(self._stream(rk.index, stream))
        if self.start is None:
            self._issue_param_gathers()
            firsts = [0] * len(self.plan.ranks)
        else:
            self._resume_from(self.start)
            firsts = list(self.start.nxt)
            self.nxt = list(self.start.nxt)
            self.clock = list(self.start.clock)
        procs = [env.process(self._rank(rk, firsts[rk.index])) for rk in self.plan.ranks]
        return simpy.AllOf(env, procs)


class EventEngine:
    """The event engine as a timing model: every action of the step in simpy (``record``: keep
    every segment of the timeline, for traces)."""

    def __init__(self, record: bool = False) -> None:
        self.record = record

    def time(self, plan: StepPlan) -> SimResult:
        return _StepSim(plan, self.record).run()
