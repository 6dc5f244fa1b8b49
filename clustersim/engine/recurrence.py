"""The closed form's machinery: the step plan run as a recurrence, the same schedule and costs, no contention.

Each rank's compute stream, communication streams and pipeline transfers are computed by a
direct recurrence (start = max(stream free, inputs arrived)) instead of simpy events, and every
link is assumed to be free whenever a transfer starts. Compute slows beside the rank's
collectives exactly as in the event engine (clustersim.plan.overlap.advance over the streams'
busy intervals, which are all known when a unit starts: only the rank's own earlier actions
enqueue them). Where nothing contends (no two transfers on one link at once) this gives exactly
the event engine's times; elsewhere the event engine is slower, and the gap between the two is
the congestion estimate (ASTRA-sim's congestion-unaware vs congestion-aware backends). It is
also much faster, which the layout sweep uses: identical steady-state micro-batches are computed
once and the rest extrapolated (clustersim.engine.collapse).

``Recurrence`` is the machinery of the closed form (clustersim.engine.closed_form); the event
engine borrows it for the stretches of a step where nothing can contend (clustersim.engine.hybrid),
handing it the event engine's duration of an action run alone (``alone``): this module runs no
simpy itself. With several rank classes (per-rank mode) each
class runs its own pipeline here; the data-parallel collectives that tie classes together in the
event engine are taken per class (see docs/engine.md, per-rank mode).
"""

from __future__ import annotations

from collections.abc import Callable

from clustersim.engine.pair import Segment, chain_of, pair_side, pair_timing
from clustersim.engine.timeline import CAUSES, ClosedResult, StepResult
from clustersim.plan.comm_plans import Item
from clustersim.plan.compiled_unit import CompiledUnit, unit_timing
from clustersim.plan.data_parallel import backward_reduces
from clustersim.plan.overlap import Interval
from clustersim.plan.step_plan import RankAction, SimRank, StepPlan, Total
from clustersim.plan.zero3 import Zero3Plan, gather_slots

Key = tuple[str, int, int, int]  # (kind, class, global stage, micro-batch) of an awaited input
Alone = Callable[[StepPlan, SimRank, int, str], Total]   # an action's duration run alone in the event engine


class Stream:
    """One NCCL stream of a rank: collectives run one after another."""

    __slots__ = ("busy", "free_s")

    def __init__(self) -> None:
        self.free_s = 0.0
        self.busy: list[Interval] = []

    def run(self, enqueue_s: float, time_s: float) -> float:
        start = max(enqueue_s, self.free_s)
        self.free_s = start + time_s
        if time_s > 0:
            self.busy.append((start, self.free_s, "dp_comm"))
        return self.free_s


class RankState:
    """Clock, causes and streams of one simulated rank."""

    __slots__ = ("causes", "clock", "pending", "slowdown", "streams")

    def __init__(self, slowdown: float) -> None:
        self.clock = 0.0
        self.causes = dict.fromkeys(CAUSES, 0.0)
        self.streams = {"dp": Stream(), "rs": Stream()}
        self.pending: list[float] = []
        self.slowdown = slowdown

    def quiet(self) -> bool:
        return all(s.free_s <= self.clock for s in self.streams.values())

    def enqueue(self, stream: str, items: tuple[Item, ...]) -> float | None:
        end = None
        for _, plan in items:
            end = self.streams[stream].run(self.clock, plan.time_s)
            self.pending.append(end)
        return end

    def wait(self, ready: float | None, cause: str) -> None:
        if ready is not None and ready > self.clock:
            self.causes[cause] += ready - self.clock
            self.clock = ready

    def run(self, unit: CompiledUnit) -> None:
        if self.quiet():
            self.clock += unit.time_s
            for cause, sec in unit.by_cause:
                self.causes[cause] += sec
            return
        clock = self.clock
        busy: list[Interval] = []
        for s in self.streams.values():  # the clock only moves forward: ended intervals never matter again
            if s.busy:                   # (keeps this linear in the step's units)
                s.busy = [iv for iv in s.busy if iv[1] > clock]
                busy += s.busy
        end, by_cause = unit_timing(unit.steps, clock, busy, self.slowdown)
        self.clock = end
        causes = self.causes
        for cause, sec in by_cause.items():
            causes[cause] += sec

    def run_total(self, total: tuple[float, tuple[tuple[str, float], ...]]) -> None:
        time_s, by_cause = total
        self.clock += time_s
        for cause, sec in by_cause:
            self.causes[cause] += sec


class _Gathers:
    """ZeRO-3 gathers of one action, issued ``prefetch`` slots ahead (as the event engine's _Gathers)."""

    def __init__(self, rank: RankState, slots: list[tuple[Item, ...]], prefetch: int) -> None:
        self.rank, self.slots, self.prefetch = rank, slots, prefetch
        self.ends: list[float | None] = []

    def before(self, k: int) -> float | None:
        while len(self.ends) < min(len(self.slots), k + self.prefetch + 1):
            self.ends.append(self.rank.enqueue("dp", self.slots[len(self.ends)]))
        return self.ends[k] if k < len(self.ends) else None


class Recurrence:
    """The closed form over a step plan: ``advance`` runs actions up to per-rank limits (as far as
    their inputs allow), ``finish`` runs the end of the step.

    With ``check_links`` the recurrence also keeps, per rank and link tier, until when a transfer
    occupies it, and sets ``contended`` as soon as two transfers would share a link or a
    collective is enqueued (the event engine then knows the stretch cannot be computed in closed
    form); ``alone`` then gives the event engine's duration of an action whose overlapped
    collectives share links among themselves (None: such an action counts as contended)."""

    share_final_backwards = True   # _final_backward (tests turn it off to compare with walking every rank's)

    def __init__(self, plan: StepPlan, check_links: bool = False, alone: Alone | None = None) -> None:
        self.plan = plan
        self.ranks = [RankState(rk.slowdown) for rk in plan.ranks]
        self.nxt = [0] * len(plan.ranks)
        self.arrival: dict[Key, tuple[float, float]] = {}  # produced, not yet consumed: (send start, arrival)
        self.param_ready: dict[tuple[int, int, int], float | None] = {}
        self.check_links = check_links
        self.alone = alone
        self.link_free: dict[tuple[int, str], float] = {}
        self.sends: list[tuple[int, Key, float, float]] = []  # with check_links: (rank, input key, start, end)
        self.contended = False
        z3 = plan.dp.zero3
        self._gathered_stages = {g for (g, _), _ in plan.param_gathers}
        self._z3 = z3
        # stages' last backwards from a quiet rank, run once per distinct (units, buckets, slowdown);
        # keyed by id() of the plan's unit tuples, which self.plan keeps alive as long as the memo
        self._final_runs: dict[tuple[object, ...], tuple] = {}

    # -- start and end of the step --------------------------------------------------------
    def issue_param_gathers(self) -> None:
        """ZeRO-1/2 parameter gathers overlapped with the forward pass, issued at step start in
        forward order; each unit waits for its own."""
        for rk in self.plan.ranks:
            state = self.ranks[rk.index]
            for g in rk.stages:
                for (gg, unit), items in self.plan.param_gathers:
                    if gg == g:
                        self.param_ready[(rk.index, gg, unit)] = state.enqueue("dp", items)

    def finish(self) -> ClosedResult:
        """The data-parallel tail of every rank (clustersim.plan.data_parallel.DpTail); the result."""
        self.last_action_s = tuple(s.clock for s in self.ranks)
        for rk, state in zip(self.plan.ranks, self.ranks, strict=True):
            tail = rk.tail
            state.enqueue("dp", tail.reduce)
            state.wait(max(state.pending, default=0.0), "dp_comm")
            for cause, sec in (("jitter", rk.jitter_s), ("host", rk.host_s)):   # clustersim.plan.step_terms
                state.clock += sec
                state.causes[cause] += sec
            state.clock += tail.optimizer_time_s
            state.causes["optimizer"] += tail.optimizer_time_s
            for _, plan in tail.gather:
                state.clock += plan.time_s
                state.causes["dp_comm"] += plan.time_s
        causes = [s.causes for s in self.ranks]
        return ClosedResult(*StepResult.fields_from([s.clock for s in self.ranks], causes), self.last_action_s,
                            tuple(causes))

    # -- the schedule ----------------------------------------------------------------------
    def done(self) -> bool:
        return all(n == len(rk.actions) for n, rk in zip(self.nxt, self.plan.ranks, strict=True))

    def advance(self, limits: list[int] | None = None) -> bool:
        """Run every rank's actions up to ``limits[k]`` (exclusive; None: all), each as far as its
        inputs have arrived. Returns whether anything ran.

        Every action's times follow from its own rank's earlier actions and its input, so the
        ranks may run in any order: a rank runs until it waits for an input and runs again when
        that input is sent (with ``check_links``, in the order of the event engine's hand-over:
        every rank in turn until none moves, as the hybrid engine's replay of sends expects)."""
        ranks = self.plan.ranks
        stops = [len(rk.actions) if limits is None else min(limits[k], len(rk.actions)) for k, rk in enumerate(ranks)]
        if self.check_links:
            return self._advance_in_turn(stops)
        return self._advance_waking(stops)

    def _advance_in_turn(self, stops: list[int]) -> bool:
        ranks, nxt = self.plan.ranks, self.nxt
        any_progress = False
        progressed = True
        while progressed:
            progressed = False
            for rk in ranks:
                k = rk.index
                stop = stops[k]
                while nxt[k] < stop:
                    ran = self._step(rk, nxt[k])
                    if not ran:
                        break
                    nxt[k] += ran
                    progressed = True
            any_progress |= progressed
        return any_progress

    def _advance_waking(self, stops: list[int]) -> bool:
        """``advance`` rank by rank: a rank runs until it waits for an input (noted in ``waiting``)
        and runs again when that input is sent.

        The quiet forward and backward (no collective of the rank in flight, no parameter gather
        to wait for, no gradient to reduce, no ZeRO-3) run here as ``_step`` runs them - the same
        operations in the same order - without its calls; every other action through ``_step``.
        The rank's clock is kept in a local between actions and written back before any other
        path reads it (the same values: only where they are held changes)."""
        ranks, nxt, arrival = self.plan.ranks, self.nxt, self.arrival
        fast = self._z3 is None
        moved = False
        waiting: dict[Key, int] = {}   # an awaited input -> the rank that waits for it
        todo = [rk.index for rk in reversed(ranks)]
        reads: list[tuple | None] = [None] * len(ranks)   # what the loop reads of a rank, gathered at its first turn
        while todo:
            k = todo.pop()
            i = start = nxt[k]
            stop = stops[k]
            if i >= stop:
                continue
            got = reads[k]
            if got is None:
                got = reads[k] = self._reads(ranks[k])
            rk, acts, quick, send_at_s, state, causes, dp, rs = got
            blocks_from = rk.blocks_from
            clock = state.clock
            while i < stop:
                a = acts[i]
                _, _, _, g, part, needs, sends, final, paired, _ = a
                if paired or not fast:
                    nxt[k] = i   # (the general path reads it)
                    state.clock = clock
                    ran = self._step(rk, i)
                    clock = state.clock
                    if not ran:
                        for x in (a, acts[i + 1]) if paired else (a,):
                            if x.needs is not None and x.needs not in arrival:
                                waiting[x.needs] = k
                        break
                    for x in acts[i:i + ran]:
                        for key, _ in x.sends:
                            w = waiting.pop(key, None)
                            if w is not None:
                                todo.append(w)
                    i += ran
                    continue
                if needs is not None:
                    got = arrival.pop(needs, None)
                    if got is None:
                        waiting[needs] = k
                        break
                    sent, arrived = got
                    if arrived > clock:   # as _take_input: sent = min(max(sent, clock), arrived)
                        if sent < clock:
                            sent = clock
                        elif arrived < sent:
                            sent = arrived
                        causes["bubble"] += sent - clock
                        causes["pp_comm"] += arrived - sent
                        clock = arrived
                total = quick[g][part]   # None: the action gathers or reduces (``_run_action``)
                if (total is not None and dp.free_s <= clock and rs.free_s <= clock
                        and (part == "F" or not final)):
                    time_s, by_cause = total
                    clock += time_s
                    for cause, sec in by_cause:
                        causes[cause] += sec
                else:
                    state.clock = clock
                    self._run_action(rk, state, a)
                    clock = state.clock
                if sends:
                    for key, boundary in sends:
                        done = clock + send_at_s[boundary]
                        arrival[key] = (clock, done)
                        if waiting:
                            w = waiting.pop(key, None)
                            if w is not None:
                                todo.append(w)
                    if i >= blocks_from:   # the sender waits for its transfers (docs/engine.md)
                        if len(sends) > 1:
                            done = max(arrival[key][1] for key, _ in sends)
                        causes["pp_comm"] += done - clock
                        clock = done
                i += 1
            state.clock = clock
            if i > start:
                nxt[k] = i
                moved = True
        return moved

    def _reads(self, rk: SimRank) -> tuple:
        """What ``_advance_waking`` reads of rank ``rk``; ``quick[stage][part]``: the action's
        total when it may run quiet (a forward whose parameters are not gathered, a backward
        that launches no gradient buckets unless it is the stage's last), else None."""
        state = self.ranks[rk.index]
        every, gathered = self.plan.dp.every_backward, self._gathered_stages
        quick: dict[int, dict[str, Total | None]] = {}
        for (g, part), total in rk.totals.items():
            ok = g not in gathered if part == "F" else not backward_reduces(every, part, False)
            quick.setdefault(g, {})[part] = total if ok else None
        return (rk, rk.actions, quick, rk.send_at_s, state, state.causes, state.streams["dp"], state.streams["rs"])

    def run_to_end(self) -> None:
        self.advance()
        if not self.done():
            raise RuntimeError("pipeline schedule deadlocks (validate_schedule should have caught it)")

    def _take_input(self, state: RankState, a: RankAction) -> None:
        """Wait for the action's input (it has arrived: ``_ready``) and consume it."""
        if a.needs is None:
            return
        sent, arrived = self.arrival.pop(a.needs)
        if arrived > state.clock:
            sent = min(max(sent, state.clock), arrived)
            state.causes["bubble"] += sent - state.clock
            state.causes["pp_comm"] += arrived - sent
            state.clock = arrived

    def _ready(self, a: RankAction) -> bool:
        return a.needs is None or a.needs in self.arrival

    def _step(self, rk: SimRank, i: int) -> int:
        """Run action ``i`` of rank ``rk`` (and the next one, if the two run as an overlapped pair)
        if its inputs have arrived; returns how many actions ran (0: its input has not arrived)."""
        a = rk.actions[i]
        state = self.ranks[rk.index]
        if a.paired:
            b = rk.actions[i + 1]
            if not (self._ready(a) and self._ready(b)):
                return 0
            if self.check_links:
                self.contended = True   # the hybrid engine does not take pairs (plan.general)
            self._take_input(state, a)
            self._take_input(state, b)
            self._pair(rk, state, a, b)
            self._sends(rk, state, a, i)
            self._sends(rk, state, b, i + 1)
            return 2
        if not self._ready(a):
            return 0
        self._take_input(state, a)
        self._run_action(rk, state, a)
        self._sends(rk, state, a, i)
        return 1

    def _run_action(self, rk: SimRank, state: RankState, a: RankAction) -> None:
        """The units of action ``a`` (not paired; its input taken)."""
        g, part = a.stage, a.part
        z3 = self._z3
        if self.check_links and not rk.isolated[(g, part)]:
            self._run_alone(rk, state, g, part)
        elif part == "F":
            if g in self._gathered_stages:
                units = rk.units[(g, "F")]
                ready = [self.param_ready.get((rk.index, g, u)) for u in range(len(units))]
            else:
                ready = None
            if z3 is None and state.quiet() and (ready is None or all(x is None or x <= state.clock for x in ready)):
                state.run_total(rk.totals[(g, "F")])
            else:
                units = rk.units[(g, "F")]
                gathers = self._gathers(state, z3, len(units), g, "F")
                for u, unit in enumerate(units):
                    state.wait(gathers.before(u) if gathers else (ready[u] if ready else None), "dp_comm")
                    state.run(unit)
        else:
            final = self.plan.dp.reduces(part, a.final)   # launches its gradient buckets
            if z3 is None and not final and state.quiet():
                state.run_total(rk.totals[(g, part)])
            else:
                self._backward(rk, state, z3, g, final, part)

    def _sends(self, rk: SimRank, state: RankState, a: RankAction, i: int) -> None:
        for key, boundary in a.sends:
            self._send(rk, state, boundary, key)
        # from action ``blocks_from`` on the sender waits for its transfers (docs/engine.md,
        # "Pipeline transfers": clustersim.frameworks.blocking_from)
        if a.sends and i >= rk.blocks_from:
            state.wait(max(self.arrival[key][1] for key, _ in a.sends), "pp_comm")

    def _pair(self, rk: SimRank, state: RankState, a: RankAction, b: RankAction) -> None:
        """An overlapped forward & backward pair (clustersim.engine.pair) in closed form, with the
        data-parallel collectives its units wait for and launch as they do alone."""
        z3, dp = self._z3, self.plan.dp
        sides = tuple(pair_side(rk, x, dp, x.stage in self._gathered_stages) for x in (a, b))
        gathers = tuple(self._gathers(state, z3, len(rk.units[(x.stage, x.part)]), x.stage, x.kind)
                        if z3 is not None and (x.part == "F" or x.part == "B" and z3.backward_gathers) else None
                        for x in (a, b))
        chains = (chain_of(sides[0]), chain_of(sides[1]))
        busy = [iv for st in state.streams.values() for iv in st.busy if iv[1] > state.clock]

        def resolve(c: int, seg: Segment, now: float) -> float | None:
            """Launch what the unit launches at ``now``; when the chain may go on (None: now)."""
            x = (a, b)[c]
            state.clock = now
            held = {name: len(st.busy) for name, st in state.streams.items()}
            if seg.before:
                gathered = self.param_ready.get((rk.index, x.stage, seg.unit))
                until = gathers[c].before(seg.unit) if gathers[c] is not None else gathered
            else:
                unit = sides[c].launches[seg.unit]
                stream, items = ("rs", z3.reduce.get((x.stage, unit), ())) if z3 is not None else \
                    ("dp", dp.grad_buckets.get((x.stage, unit), ()))
                done = self._enqueue(state, stream, items)
                until = done if dp.blocking_reduce else None
            for name, st in state.streams.items():
                busy.extend(st.busy[held[name]:])
            return until

        end, by_cause = pair_timing(chains, state.clock, busy, state.slowdown, resolve)
        state.clock = end
        for cause, sec in by_cause.items():
            state.causes[cause] += sec

    def _run_alone(self, rk: SimRank, state: RankState, g: int, kind: str) -> None:
        """An action whose overlapped collectives share its links among themselves: its event-engine
        duration run alone, valid while nothing else runs beside it (else: contended)."""
        a = (g, kind)
        ready = [self.param_ready.get((rk.index, g, u)) for u in range(len(rk.units[a]))]
        if (self.alone is None or not rk.private[a] or self._z3 is not None or not state.quiet()
                or any(x is not None and x > state.clock for x in ready)
                or kind != "F" and (self.nxt[rk.index] in rk.final_b or self.plan.dp.every_backward)):
            self.contended = True
            return
        state.run_total(self.alone(self.plan, rk, g, kind))

    def _backward(self, rk: SimRank, state: RankState, z3: Zero3Plan | None, g: int, final: bool,
                  part: str = "B") -> None:
        units = rk.units[(g, part)]
        if z3 is None:
            buckets = tuple(self.plan.dp.grad_buckets.get((g, b), ()) for b in range(len(units))) if final else None
            if buckets is not None and self.share_final_backwards and not self.check_links and state.quiet():
                self._final_backward(state, units, buckets)
            else:
                self._walk_backward(state, units, buckets)
            return
        gathers = self._gathers(state, z3, len(units), g, "B") if part == "B" else None
        for b, unit in enumerate(units):
            if gathers is not None and z3.backward_gathers == 2:
                recompute, proper = rk.split[(g, b)]
                state.wait(gathers.before(2 * b), "dp_comm")
                state.run(recompute)
                state.wait(gathers.before(2 * b + 1), "dp_comm")
                state.run(proper)
            else:
                if gathers is not None:
                    state.wait(gathers.before(b), "dp_comm")
                state.run(unit)
            done = self._enqueue(state, "rs", z3.reduce.get((g, b), ()))
            if self.plan.dp.blocking_reduce:   # reduce-scattered on the compute stream
                state.wait(done, "dp_comm")

    def _walk_backward(self, state: RankState, units: tuple[CompiledUnit, ...],
                       buckets: tuple[tuple[Item, ...], ...] | None) -> None:
        """A backward without ZeRO-3, unit by unit; in a stage's last backward (``buckets``) each
        unit's gradient buckets are enqueued after it."""
        blocking = self.plan.dp.blocking_reduce
        for b, unit in enumerate(units):
            state.run(unit)
            if buckets is not None:
                done = self._enqueue(state, "dp", buckets[b])
                if blocking:   # reduced on the compute stream: the next unit waits for it
                    state.wait(done, "dp_comm")

    def _final_backward(self, state: RankState, units: tuple[CompiledUnit, ...],
                        buckets: tuple[tuple[Item, ...], ...]) -> None:
        """A stage's last backward from a quiet rank (no collective in flight): it depends on its
        units, their buckets and the rank's slowdown, not on when it starts, so it is walked once
        from time 0 for all the ranks that share them (a pipeline's middle stages) and shifted to
        each rank's clock: the same answer to rounding."""
        key = (id(units), tuple(tuple(plan.time_s for _, plan in items) for items in buckets), state.slowdown)
        run = self._final_runs.get(key)
        if run is None:
            scratch = RankState(state.slowdown)
            self._walk_backward(scratch, units, buckets)
            run = self._final_runs[key] = (
                scratch.clock, tuple((c, sec) for c, sec in scratch.causes.items() if sec),
                tuple((name, s.free_s, tuple(s.busy)) for name, s in scratch.streams.items() if s.busy),
                tuple(scratch.pending))
        clock_s, causes, streams, pending = run
        start = state.clock
        state.clock = start + clock_s
        for cause, sec in causes:
            state.causes[cause] += sec
        for name, free_s, busy in streams:
            s = state.streams[name]
            s.free_s = start + free_s
            s.busy += [(start + b, start + e, c) for b, e, c in busy]
        state.pending += [start + end for end in pending]

    def _gathers(self, state: RankState, z3: Zero3Plan | None, n: int, g: int, kind: str) -> _Gathers | None:
        if z3 is None:
            return None
        if self.check_links:
            self.contended = True
        return _Gathers(state, gather_slots(z3, n, g, kind), z3.prefetch)

    def _enqueue(self, state: RankState, stream: str, items: tuple[Item, ...]) -> float | None:
        if items and self.check_links:
            self.contended = True
        return state.enqueue(stream, items)

    def _send(self, rk: SimRank, state: RankState, boundary: int, key: Key) -> None:
        start = state.clock
        end = start + rk.send_at_s[boundary]
        if self.check_links:
            plan = rk.send_at[boundary]
            assert plan is not None
            for ph in plan.phases:
                slot = (rk.index, ph.tier)
                if self.link_free.get(slot, 0.0) > start:
                    self.contended = True
                self.link_free[slot] = end
            self.sends.append((rk.index, key, start, end))
        self.arrival[key] = (start, end)
