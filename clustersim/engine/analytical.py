"""The closed-form twin of the event engine: the same schedule and cost functions, no contention.

Each rank's compute stream, DP stream and pipeline transfers are computed by a direct
recurrence (start = max(stream free, inputs arrived)) instead of simpy events, and every link
is assumed to be free whenever a transfer starts. Where nothing contends (no two transfers on
one link at once) this gives exactly the event engine's times; elsewhere the event engine is
slower, and the gap between the two is the congestion estimate (ASTRA-sim's congestion-unaware
vs congestion-aware backends). It is also several times faster, which the layout sweep uses.
"""

from __future__ import annotations

from clustersim.engine.groups import pp_plan
from clustersim.engine.stages import StepWork, build_step_work
from clustersim.engine.timeline import CAUSES, StepResult
from clustersim.engine.units import CompiledUnit, UnitCache
from clustersim.engine.zero import DpPlan, dp_plan
from clustersim.parallel.pipeline import build_schedule
from clustersim.scenario import Scenario


class _DpStream:
    __slots__ = ("free_s",)

    def __init__(self) -> None:
        self.free_s = 0.0

    def run(self, enqueue_s: float, time_s: float) -> float:
        start = max(enqueue_s, self.free_s)
        self.free_s = start + time_s
        return self.free_s


def estimate_step(scenario: Scenario) -> StepResult:
    """Closed-form step time (see module docstring)."""
    par = scenario.parallel
    pp, v = par.pp, par.virtual_stages
    num_global = pp * v
    work: StepWork = build_step_work(scenario)
    dp: DpPlan = dp_plan(scenario, work)
    schedule = build_schedule(par.schedule, pp, par.num_micro_batches, v)
    p2p_s = [pp_plan(scenario, work.p2p_bytes, r).time_s if num_global > 1 else 0.0 for r in range(pp)]
    cache = UnitCache(scenario)
    compiled = {(st.index, kind): [cache(w) for w in (st.forward if kind == "F" else st.backward)]
                for st in work.stages for kind in "FB"}
    totals = {key: _total(units) for key, units in compiled.items()}

    clock = [0.0] * pp
    causes = [dict.fromkeys(CAUSES, 0.0) for _ in range(pp)]
    streams = [_DpStream() for _ in range(pp)]
    pending_dp: list[list[float]] = [[] for _ in range(pp)]
    param_ready: dict[tuple[int, int, int], float] = {}
    for r in range(pp):
        for chunk in range(v):
            g = chunk * pp + r
            for (gg, unit), items in sorted(dp.param_gathers.items()):
                if gg == g:
                    for _, plan in items:
                        end = streams[r].run(0.0, plan.time_s)
                        pending_dp[r].append(end)
                        param_ready[(r, gg, unit)] = end
    arrival: dict[tuple[str, int, int], tuple[float, float]] = {}  # key -> (send start, arrive)
    nxt = [0] * pp
    last_b = [{a.chunk: i for i, a in enumerate(schedule[r]) if a.kind == "B"} for r in range(pp)]
    remaining = sum(len(s) for s in schedule)
    while remaining:
        progressed = False
        for r in range(pp):
            while nxt[r] < len(schedule[r]):
                i = nxt[r]
                a = schedule[r][i]
                g = a.chunk * pp + r
                need = ("F", g, a.micro_batch) if a.kind == "F" else ("B", g, a.micro_batch)
                has_input = g > 0 if a.kind == "F" else g < num_global - 1
                if has_input and need not in arrival:
                    break
                c = causes[r]
                if has_input:
                    sent, arrived = arrival[need]
                    if arrived > clock[r]:
                        sent = min(max(sent, clock[r]), arrived)
                        c["bubble"] += sent - clock[r]
                        c["pp_comm"] += arrived - sent
                        clock[r] = arrived
                n = len(compiled[(g, a.kind)])
                zero3: dict[int, float] = {}
                if dp.zero3_unit_gather:
                    order = range(n) if a.kind == "F" else range(n - 1, -1, -1)
                    for u in order:
                        for _, plan in dp.zero3_unit_gather.get((g, u), ()):
                            zero3[u] = streams[r].run(clock[r], plan.time_s)
                            pending_dp[r].append(zero3[u])
                final = a.kind == "B" and last_b[r][a.chunk] == i
                params_pending = a.kind == "F" and any(param_ready.get((r, g, u), 0.0) > clock[r] for u in range(n))
                if not final and not zero3 and not params_pending:
                    time_s, by_cause = totals[(g, a.kind)]
                    clock[r] += time_s
                    for cause, sec in by_cause:
                        c[cause] += sec
                else:
                    for u, ut in enumerate(compiled[(g, a.kind)]):
                        fwd_u = u if a.kind == "F" else n - 1 - u
                        ready = zero3.get(fwd_u, param_ready.get((r, g, u)) if a.kind == "F" else None)
                        if ready is not None and ready > clock[r]:
                            c["dp_comm"] += ready - clock[r]
                            clock[r] = ready
                        clock[r] += ut.time_s
                        for cause, sec in ut.by_cause:
                            c[cause] += sec
                        if final:
                            for _, plan in dp.grad_buckets.get((g, u), ()):
                                pending_dp[r].append(streams[r].run(clock[r], plan.time_s))
                if a.kind == "F" and g < num_global - 1:
                    arrival[("F", g + 1, a.micro_batch)] = (clock[r], clock[r] + p2p_s[r])
                if a.kind == "B" and g > 0:
                    arrival[("B", g - 1, a.micro_batch)] = (clock[r], clock[r] + p2p_s[(r - 1) % pp])
                nxt[r] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise RuntimeError("pipeline schedule deadlocks (validate_schedule should have caught it)")
    for r in range(pp):
        c = causes[r]
        for _, plan in dp.after_backward:
            pending_dp[r].append(streams[r].run(clock[r], plan.time_s))
        done = max(pending_dp[r], default=0.0)
        if done > clock[r]:
            c["dp_comm"] += done - clock[r]
            clock[r] = done
        clock[r] += work.optimizer_time_s[r]
        c["optimizer"] += work.optimizer_time_s[r]
        for _, plan in dp.after_optimizer:
            clock[r] += plan.time_s
            c["dp_comm"] += plan.time_s
    return StepResult(*StepResult.fields_from(clock, causes))


def _total(units: list[CompiledUnit]) -> tuple[float, tuple[tuple[str, float], ...]]:
    """Duration and split by cause of a whole action made of ``units``."""
    by_cause: dict[str, float] = {}
    for unit in units:
        for cause, sec in unit.by_cause:
            by_cause[cause] = by_cause.get(cause, 0.0) + sec
    return sum(u.time_s for u in units), tuple(sorted(by_cause.items()))
