"""How much work one simulated step is, counted before it runs (budgets in clustersim.limits).

Both engines walk every action of the pipeline schedule (a forward or a backward of one
micro-batch on one model chunk) and, inside it, the action's units (layers, embedding, output).
An action whose units can run undisturbed takes a fast path: one timeout per action in the event
engine (it still records every unit), one addition in the closed form. Any other action steps
through every kernel run and every collective phase of its units, and under ZeRO-3 through the
parameter gathers and gradient reduce-scatters of every unit. The count below mirrors those
fast-path conditions (engine/event.py ``_forward``/``_backward``/``_quiet``; engine/recurrence.py
``RankState.quiet``) without running anything: ZeRO-3 never takes the fast path; the first forward
of each chunk (parameter gathers in flight) and its last backward (gradient buckets) are counted
slow; the event engine needs every unit *isolated* (no link shared with DP or pipeline traffic).

The count is deterministic, so whether a scenario is refused never depends on the machine.
"""

from __future__ import annotations

from clustersim.errors import BudgetError
from clustersim.limits import MAX_CLOSED_FORM_OPERATIONS, MAX_EVENT_OPERATIONS
from clustersim.plan.comm_plans import Item, pp_plan
from clustersim.plan.compiled_unit import CompiledUnit
from clustersim.plan.data_parallel import DpPlan, dp_plan
from clustersim.plan.stage_work import StepWork, Work, build_step_work
from clustersim.plan.step_plan import Host, UnitCompiler
from clustersim.scenario import Scenario

ENGINES = ("event", "analytical")


def tiers_used_beside_compute(scenario: Scenario, work: StepWork, dp: DpPlan) -> frozenset[str]:
    """Link tiers that DP collectives or pipeline transfers use while compute runs (the
    ``shared`` tiers of clustersim.plan.step_plan.build_plan, counted without building a plan)."""
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
    """The unit's contention-free duration is exact (clustersim.plan.step_plan._isolated)."""
    overlapped = any(s.plan is not None and s.overlapped for s in unit.steps)
    collectives = sum(1 for s in unit.steps if s.plan is not None)
    return not (unit.tiers & shared_tiers) and (not overlapped or collectives == 1)


def unit_operations(unit: CompiledUnit) -> int:
    """Kernel runs and collective phases of one unit (at least 1)."""
    return max(1, sum(1 + (len(s.plan.phases) if s.plan is not None else 0) for s in unit.steps))


def _items(items: tuple[Item, ...]) -> int:
    return sum(1 + len(plan.phases) for _, plan in items)


def step_operations(scenario: Scenario, engine: str, compiler: UnitCompiler | None = None) -> int:
    """Operations one step of ``scenario`` takes in ``engine`` ("event" or "analytical");
    ``compiler``: the run's compiled units (clustersim.plan.plan_cache), which the plan then reuses."""
    par = scenario.parallel
    m = par.num_micro_batches
    work = build_step_work(scenario)
    dp = dp_plan(scenario, work)
    z3 = dp.zero3
    compile_ = compiler or UnitCompiler()
    host = Host(scenario)
    shared = tiers_used_beside_compute(scenario, work, dp) if engine == "event" else frozenset()
    per_work: dict[int, tuple[int, bool]] = {}

    def unit_cost(w: Work) -> tuple[int, bool]:
        known = per_work.get(id(w))
        if known is None:
            unit = compile_(host, w)
            known = per_work[id(w)] = (unit_operations(unit), engine != "event" or unit_isolated(unit, shared))
        return known

    total = 2 * m * par.pp * par.virtual_stages  # every action of the schedule (built, validated, walked)
    for st in work.stages:
        for kind, works in (("F", st.forward), ("B", st.backward)):
            costs = [unit_cost(w) for w in works]
            slow = sum(c for c, _ in costs)
            if z3 is not None:
                n = len(st.forward)
                if kind == "F":
                    slow += sum(_items(z3.gather.get((st.index, u), ())) for u in range(n))
                else:
                    slow += z3.backward_gathers * sum(_items(z3.gather.get((st.index, u), ())) for u in range(n))
                    slow += sum(_items(z3.reduce.get((st.index, b), ())) for b in range(len(works)))
                total += m * slow
                continue
            fast = (len(costs) if engine == "event" else 1) if all(ok for _, ok in costs) else slow
            total += (m - 1) * fast + slow
    return total


def check_step_budget(scenario: Scenario, engine: str, compiler: UnitCompiler | None = None) -> int:
    """BudgetError (exit 2) when one step of ``scenario`` exceeds ``engine``'s budget; else its count."""
    ops = step_operations(scenario, engine, compiler)
    limit = MAX_EVENT_OPERATIONS if engine == "event" else MAX_CLOSED_FORM_OPERATIONS
    if ops > limit:
        par = scenario.parallel
        hint = ("use --engine analytical (the closed form, no contention), " if engine == "event" else "use ")
        raise BudgetError(
            "simulated step",
            f"{ops:,} operations ({par.num_micro_batches:,} micro-batches x {scenario.model.layers:,} layers "
            f"on {par.pp * par.virtual_stages:,} pipeline stages{', ZeRO-3' if par.zero_stage == 3 else ''})",
            f"at most {limit:,} operations in the {'event engine' if engine == 'event' else 'closed form'} "
            f"(clustersim's limit: {'under a minute' if engine == 'event' else 'about 10 s'}); {hint}fewer micro-batches per step (a larger "
            "parallel.micro_batch or a smaller parallel.global_batch) or fewer layers")
    return ops
