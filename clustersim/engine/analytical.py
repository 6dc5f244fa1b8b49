"""The closed-form twin of the event engine: the same schedule and cost functions, no contention.

Each rank's compute stream, communication streams and pipeline transfers are computed by a
direct recurrence (start = max(stream free, inputs arrived)) instead of simpy events, and every
link is assumed to be free whenever a transfer starts. Compute slows beside the rank's
collectives exactly as in the event engine (clustersim.engine.overlap.advance over the streams'
busy intervals, which are all known when a unit starts: only the rank's own earlier actions
enqueue them). Where nothing contends (no two transfers on one link at once) this gives exactly
the event engine's times; elsewhere the event engine is slower, and the gap between the two is
the congestion estimate (ASTRA-sim's congestion-unaware vs congestion-aware backends). It is
also several times faster, which the layout sweep uses.
"""

from __future__ import annotations

from clustersim.engine.groups import pp_plan
from clustersim.engine.overlap import Interval, overlap_slowdown
from clustersim.engine.stages import StepWork, build_step_work
from clustersim.engine.timeline import CAUSES, StepResult
from clustersim.engine.units import CompiledUnit, UnitCache, unit_timing
from clustersim.engine.zero import DpPlan, Item, dp_plan
from clustersim.parallel.pipeline import build_schedule
from clustersim.scenario import Scenario


class _Stream:
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


class _Rank:
    """Clock, causes and streams of one pipeline rank."""

    def __init__(self, slowdown: float) -> None:
        self.clock = 0.0
        self.causes = dict.fromkeys(CAUSES, 0.0)
        self.streams = {"dp": _Stream(), "rs": _Stream()}
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
        for s in self.streams.values():  # the clock only moves forward: ended intervals never matter again
            s.busy = [iv for iv in s.busy if iv[1] > self.clock]  # (keeps this linear in the step's units)
        busy = tuple(iv for s in self.streams.values() for iv in s.busy)
        end, by_cause = unit_timing(unit.steps, self.clock, busy, self.slowdown)
        self.clock = end
        for cause, sec in by_cause.items():
            self.causes[cause] += sec


class _Gathers:
    """ZeRO-3 gathers of one action, issued ``prefetch`` slots ahead (as sim._Gathers)."""

    def __init__(self, rank: _Rank, slots: list[tuple[Item, ...]], prefetch: int) -> None:
        self.rank, self.slots, self.prefetch = rank, slots, prefetch
        self.ends: list[float | None] = []

    def before(self, k: int) -> float | None:
        while len(self.ends) < min(len(self.slots), k + self.prefetch + 1):
            self.ends.append(self.rank.enqueue("dp", self.slots[len(self.ends)]))
        return self.ends[k] if k < len(self.ends) else None


def estimate_step(scenario: Scenario) -> StepResult:
    """Closed-form step time (see module docstring)."""
    par = scenario.parallel
    pp, v = par.pp, par.virtual_stages
    num_global = pp * v
    work: StepWork = build_step_work(scenario)
    dp: DpPlan = dp_plan(scenario, work)
    z3 = dp.zero3
    schedule = build_schedule(par.schedule, pp, par.num_micro_batches, v)
    p2p_s = [pp_plan(scenario, work.p2p_bytes, r).time_s if num_global > 1 else 0.0 for r in range(pp)]
    cache = UnitCache(scenario)
    compiled = {(st.index, kind): [cache(w) for w in (st.forward if kind == "F" else st.backward)]
                for st in work.stages for kind in "FB"}
    totals = {key: _total(units) for key, units in compiled.items()}

    slowdown = overlap_slowdown(scenario.cluster.gpu)
    ranks = [_Rank(slowdown) for _ in range(pp)]
    param_ready: dict[tuple[int, int, int], float] = {}
    for r in range(pp):
        for chunk in range(v):
            g = chunk * pp + r
            for (gg, unit), items in sorted(dp.param_gathers.items()):
                if gg == g:
                    param_ready[(r, gg, unit)] = ranks[r].enqueue("dp", items)  # type: ignore[assignment]
    arrival: dict[tuple[str, int, int], tuple[float, float]] = {}  # key -> (send start, arrive)
    nxt = [0] * pp
    last_b = [{a.chunk: i for i, a in enumerate(schedule[r]) if a.kind == "B"} for r in range(pp)]
    remaining = sum(len(s) for s in schedule)
    while remaining:
        progressed = False
        for r in range(pp):
            rk = ranks[r]
            while nxt[r] < len(schedule[r]):
                i = nxt[r]
                a = schedule[r][i]
                g = a.chunk * pp + r
                need = ("F", g, a.micro_batch) if a.kind == "F" else ("B", g, a.micro_batch)
                has_input = g > 0 if a.kind == "F" else g < num_global - 1
                if has_input and need not in arrival:
                    break
                if has_input:
                    sent, arrived = arrival[need]
                    if arrived > rk.clock:
                        sent = min(max(sent, rk.clock), arrived)
                        rk.causes["bubble"] += sent - rk.clock
                        rk.causes["pp_comm"] += arrived - sent
                        rk.clock = arrived
                units = compiled[(g, a.kind)]
                n = len(units)
                final = a.kind == "B" and last_b[r][a.chunk] == i
                if a.kind == "F":
                    ready = [param_ready.get((r, g, u)) for u in range(n)]
                    if z3 is None and all(x is None or x <= rk.clock for x in ready) and rk.quiet():
                        _run_total(rk, totals[(g, "F")])
                    else:
                        gathers = _gathers(rk, z3, work, g, "F")
                        for u, unit in enumerate(units):
                            rk.wait(gathers.before(u) if gathers else ready[u], "dp_comm")
                            rk.run(unit)
                elif z3 is None and not final and rk.quiet():
                    _run_total(rk, totals[(g, "B")])
                else:
                    gathers = _gathers(rk, z3, work, g, "B")
                    for b, unit in enumerate(units):
                        if gathers is not None and z3 is not None and z3.backward_gathers == 2:
                            recompute, proper = work.stages[g].backward_split[b]
                            rk.wait(gathers.before(2 * b), "dp_comm")
                            rk.run(cache(recompute))
                            rk.wait(gathers.before(2 * b + 1), "dp_comm")
                            rk.run(cache(proper))
                        else:
                            if gathers is not None:
                                rk.wait(gathers.before(b), "dp_comm")
                            rk.run(unit)
                        if z3 is not None:
                            rk.enqueue("rs", z3.reduce.get((g, b), ()))
                        elif final:
                            rk.enqueue("dp", dp.grad_buckets.get((g, b), ()))
                if a.kind == "F" and g < num_global - 1:
                    arrival[("F", g + 1, a.micro_batch)] = (rk.clock, rk.clock + p2p_s[r])
                if a.kind == "B" and g > 0:
                    arrival[("B", g - 1, a.micro_batch)] = (rk.clock, rk.clock + p2p_s[(r - 1) % pp])
                nxt[r] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise RuntimeError("pipeline schedule deadlocks (validate_schedule should have caught it)")
    for r, rk in enumerate(ranks):
        stages = [chunk * pp + r for chunk in range(v)]
        rk.enqueue("dp", dp.after_backward_of(stages))
        rk.wait(max(rk.pending, default=0.0), "dp_comm")
        rk.clock += work.optimizer_time_s[r]
        rk.causes["optimizer"] += work.optimizer_time_s[r]
        for _, plan in dp.after_optimizer_of(stages):
            rk.clock += plan.time_s
            rk.causes["dp_comm"] += plan.time_s
    return StepResult(*StepResult.fields_from([rk.clock for rk in ranks], [rk.causes for rk in ranks]))


def _gathers(rank: _Rank, z3, work: StepWork, g: int, kind: str) -> _Gathers | None:
    if z3 is None:
        return None
    n = len(work.stages[g].forward)
    if kind == "F":
        slots = [z3.gather.get((g, u), ()) for u in range(n)]
    else:
        slots = [z3.gather.get((g, n - 1 - b), ()) for b in range(n) for _ in range(z3.backward_gathers)]
    return _Gathers(rank, slots, z3.prefetch)


def _run_total(rank: _Rank, total: tuple[float, tuple[tuple[str, float], ...]]) -> None:
    time_s, by_cause = total
    rank.clock += time_s
    for cause, sec in by_cause:
        rank.causes[cause] += sec


def _total(units: list[CompiledUnit]) -> tuple[float, tuple[tuple[str, float], ...]]:
    """Duration and split by cause of a whole action made of ``units``."""
    by_cause: dict[str, float] = {}
    for unit in units:
        for cause, sec in unit.by_cause:
            by_cause[cause] = by_cause.get(cause, 0.0) + sec
    return sum(u.time_s for u in units), tuple(sorted(by_cause.items()))
