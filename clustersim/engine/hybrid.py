"""The event engine, fast: closed form wherever nothing can contend, simpy where something might.

The event engine and its closed-form twin differ only where two transfers share a link (or a
collective slows compute beside it in a way that depends on such sharing). In a pipeline step
that happens at the edges: parameter gathers at the start contend with the first pipeline sends,
gradient reductions at the end with the last ones. The middle - the steady state, most of a step
with many micro-batches - is a chain of compute and pipeline sends that never meet on a link.
So a step runs in three parts:

1. simpy, from the start until each rank's parameter gathers are done (it stops at its first action
   that starts with no collective in flight); skipped when there are none;
2. the closed form (clustersim.engine.recurrence.Recurrence with link checks), from there up to
   each rank's first last-backward (the one that launches gradient reductions), extrapolating
   identical steady-state periods (clustersim.engine.collapse);
3. simpy again to the end of the step, starting from the state part 2 left: ranks resume at their
   own clocks, inputs in flight arrive when the closed form said, and sends still on a link are
   replayed on it.

Each hand-over is exact when the closed-form part had no contention: part 2 checks that no two
transfers would occupy one link at once (counting the ones part 1 left running) and that no
collective was enqueued; part 3 checks that transfers replayed only for their link occupancy
finish when part 2 said. When a check fails the whole step runs in simpy. The result equals the
all-simpy run to rounding (tests/engine/test_fast_paths.py); only the timeline is not recorded. A
recorded step (``Recorded``: traces, pages) reports the hybrid's numbers with the all-simpy run's
segments, so that ``run --json`` is byte-identical with and without ``--trace`` or ``--html``.
"""

from __future__ import annotations

from dataclasses import replace

from clustersim.engine.collapse import run_collapsed
from clustersim.engine.event import EventEngine, Key, Resume, _StepSim
from clustersim.engine.recurrence import Recurrence
from clustersim.engine.timeline import SimResult, Timeline
from clustersim.engine.unit_runner import alone_total
from clustersim.plan.step_plan import StepPlan


def _sender(plan: StepPlan, key: Key) -> int:
    kind, klass, g, _ = key
    return plan.rank_of(klass, g - 1 if kind == "F" else g + 1)


def _load(rec: Recurrence, sim: _StepSim) -> list[tuple[int, Key, float, float]]:
    """Put the state a partial simpy run left into ``rec``; returns its sends (rank, key, start, end)."""
    plan = rec.plan
    for k, state in enumerate(rec.ranks):
        rec.nxt[k] = sim.nxt[k]
        state.clock = sim.clock[k]
        for cause, sec in sim.tl.busy(k).items():
            state.causes[cause] = sec
        busy = sim.stream_busy[k]
        if busy:
            state.streams["dp"].busy = list(busy)
            state.streams["dp"].free_s = max(b for _, b, _ in busy)
            state.pending = [state.streams["dp"].free_s]
    sends = []
    for key, arrived in sim.arrived_at.items():
        start = sim.send_start[key]
        sends.append((_sender(plan, key), key, start, arrived))
        if key not in sim.consumed:
            rec.arrival[key] = (start, arrived)
    rec.param_ready.update(sim.param_done)
    rec.link_free.update(sim.link_last)
    return sends


def simulate_hybrid(plan: StepPlan) -> SimResult | None:
    """The step as described in the module docstring; None where it cannot apply (ZeRO-3, whose
    collectives run beside every action, and ZeRO-2 over several micro-batches, which reduces after each; the schedules with W actions, F&B pairs or a V/DualPipe
    stage graph and offload's host link, which the general event engine runs) or where a check failed."""
    if plan.dp.zero3 is not None or plan.general or plan.dp.every_backward:
        # general: W actions, F&B pairs, V/DualPipe graphs, the host link run fully in simpy;
        # ZeRO-2's every backward reduces, so no action before the last backwards is quiet
        return None
    n = len(plan.ranks)
    rec = Recurrence(plan, check_links=True, alone=alone_total)
    sends: list[tuple[int, Key, float, float]] = []
    if plan.param_gathers:
        first = _StepSim(plan, record=False, stop_quiet=True)
        first.run()
        sends = _load(rec, first)
        if any(first.outstanding):
            return None
    rec.sends = sends
    ends = [min(rk.final_b) if rk.final_b else len(rk.actions) for rk in plan.ranks]
    run_collapsed(rec, ends)
    rec.advance(ends)
    if rec.contended:
        return None
    clocks = [s.clock for s in rec.ranks]
    for k, state in enumerate(rec.ranks):
        if state.streams["dp"].free_s > clocks[k] or state.streams["rs"].free_s > clocks[k]:
            return None
    replay = []
    for rank, key, start, end in rec.sends:
        if end > clocks[rank]:
            replay.append((rank, key, start, end, key not in rec.arrival))
    explained = {(rank, tier) for rank, key, *_ in replay
                 for tier in {ph.tier for ph in plan.ranks[rank].send[key[0]].phases}}
    for (k, tier), t in rec.link_free.items():
        if t > clocks[k] and (k, tier) not in explained:
            return None
    resume = Resume(list(rec.nxt), clocks, [dict(s.causes) for s in rec.ranks], dict(rec.arrival), replay)
    last = _StepSim(plan, record=False, start=resume)
    result = last.run()
    if not last.ghosts_ok or len(result.rank_end_s) != n:
        return None
    return result


class Recorded:
    """The event engine with its timeline recorded, as a timing model: the step's numbers are the
    ones the model without a timeline gives (``Hybrid``), bit for bit, so that asking for a trace
    or a page does not change the report; the segments come from the all-simpy run, which equals
    it to rounding. Where the hybrid does not apply, the recorded run is that model's own answer
    (recording changes no sum: ``Timeline.add_segment``)."""

    def time(self, plan: StepPlan) -> SimResult:
        recorded = EventEngine(record=True).time(plan)
        fast = simulate_hybrid(plan)
        if fast is None:
            return recorded
        timeline = Timeline(record=True, segments=recorded.timeline.segments, totals=fast.timeline.totals)
        return replace(fast, timeline=timeline)


class Hybrid:
    """The event engine, fast, as a timing model: ``simulate_hybrid`` where it applies, else every
    action in simpy (no timeline segments either way)."""

    def time(self, plan: StepPlan) -> SimResult:
        result = simulate_hybrid(plan)
        return result if result is not None else EventEngine(record=False).time(plan)
