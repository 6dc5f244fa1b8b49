"""The stage times a time-driven schedule is ordered by (zb-2p: clustersim.parallel.zb_auto).

Per pipeline rank, one micro-batch's F (the forward units), B (the input-gradient part of the
backward) and W (its weight-gradient part) as the plan compiles them (clustersim.plan.compiled_unit,
the times the engines run, without contention), and one pipeline transfer: the slowest boundary's
(the paper's code profiles one p2p time). As the paper's code does (zb_schedules.py
``update_schedule``: ``max(int(t_ms * 1000), 1)``) every time is rounded down to whole
microseconds, at least one: the heuristic compares sums of times, and integers keep its ties
exact. The paper's schedule is built once for the job from one rank's profile; here from the
scenario's nominal GPUs (a fault's or a mixed group's slower rank does not reorder it).

Its memory count (``StageCosts.memory``, ``schedule_memory``): a micro-batch adds 1 at its F, frees
``1 - w`` at its B and ``w`` at its W, ``w`` what a layer still holds for its weight gradients
(clustersim.memory.activations.weight_gradient_share: the weight-gradient GEMMs' inputs and
output gradients over the forward's activation), one value for all ranks as the paper's formula
(``f_mem = 34 h + 5 a s``, ``w_mem = -32 h``: zb_schedules.py on the ``arxiv`` branch); in whole
millionths of F, so that the heuristic's sums stay exact; the limit is ``2 pp`` F's. The rule is
clustersim.plan.memory_plan.schedule_memory, which counts the activations held by the same weights."""

from __future__ import annotations

import functools

from clustersim.parallel.pipeline import COST_DRIVEN_SCHEDULES
from clustersim.parallel.zb_auto import StageCosts
from clustersim.plan.comm_plans import pp_plan
from clustersim.plan.compiled_unit import compile_unit
from clustersim.plan.memory_plan import schedule_memory
from clustersim.plan.stage_work import Work, build_step_work
from clustersim.scenario import Scenario

__all__ = ["COST_DRIVEN_SCHEDULES", "schedule_costs"]


def _micros(seconds: float) -> int:
    return max(int(seconds * 1e6), 1)


@functools.lru_cache(maxsize=64)
def schedule_costs(scenario: Scenario) -> StageCosts | None:
    """The scenario's ``StageCosts`` when its schedule is ordered by them, else None."""
    par = scenario.parallel
    if par.schedule not in COST_DRIVEN_SCHEDULES:
        return None
    work = build_step_work(scenario)
    graph = work.graph
    times: dict[int, float] = {}
    keep: list[Work] = []

    def seconds(works: tuple[Work, ...]) -> float:
        total = 0.0
        for w in works:
            if id(w) not in times:
                times[id(w)] = compile_unit(scenario, w).time_s
                keep.append(w)   # keep the id valid
            total += times[id(w)]
        return total

    stages = [work.stages[graph.stage(r, 0)] for r in range(par.pp)]
    comm = max((pp_plan(scenario, work.p2p_bytes, r).time_s for r in range(par.pp - 1)), default=0.0)
    return StageCosts(tuple(_micros(seconds(st.forward)) for st in stages),
                      tuple(_micros(seconds(st.backward_input)) for st in stages),
                      tuple(_micros(seconds(st.backward_weight)) for st in stages),
                      _micros(comm) if par.pp > 1 else 0, schedule_memory(scenario))
