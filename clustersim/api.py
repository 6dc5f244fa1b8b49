"""Public entry points."""

from __future__ import annotations

import functools

from clustersim.collectives import plan_collective
from clustersim.compute import model_flops_per_step
from clustersim.engine.analytical import estimate_step
from clustersim.engine.budget import check_step_budget
from clustersim.engine.memory_plan import rank_memory
from clustersim.engine.sim import SimResult, simulate_step
from clustersim.parallel.pipeline import build_schedule, validate_schedule
from clustersim.report import StepReport
from clustersim.scenario import Scenario, load_scenario, scenario_from_dict

__all__ = ["StepReport", "estimate", "load_scenario", "plan_collective", "scenario_from_dict", "simulate",
           "simulate_with_timeline"]


def _schedule(scenario: Scenario):
    par = scenario.parallel
    return _validated_schedule(par.schedule, par.pp, par.num_micro_batches, par.virtual_stages)


@functools.lru_cache(maxsize=256)
def _validated_schedule(kind: str, pp: int, num_micro_batches: int, virtual_stages: int):
    schedule = build_schedule(kind, pp, num_micro_batches, virtual_stages)
    validate_schedule(schedule, pp, num_micro_batches, virtual_stages)
    return schedule


def _report(scenario: Scenario, engine: str, step_time_s: float, breakdown: dict[str, float],
            critical_rank: int, analytical_s: float | None = None) -> StepReport:
    memories = rank_memory(scenario, _schedule(scenario))
    worst = max(memories, key=lambda m: m.peak_bytes_per_gpu)
    flops = model_flops_per_step(scenario.model, scenario.parallel.global_batch)
    return StepReport(scenario, engine, step_time_s, flops, breakdown, worst, memories, critical_rank,
                      analytical_s)


def simulate_with_timeline(scenario: Scenario, record: bool = True) -> tuple[StepReport, SimResult]:
    """The event-driven simulation and its raw result (timeline for traces)."""
    check_step_budget(scenario, "event")
    _schedule(scenario)
    result = simulate_step(scenario, record=record)
    closed = estimate_step(scenario)
    report = _report(scenario, "event", result.step_time_s, result.breakdown, result.critical_rank,
                     closed.step_time_s)
    return report, result


def simulate(scenario: Scenario) -> StepReport:
    """One step through the event engine (contention on shared links included)."""
    return simulate_with_timeline(scenario, record=False)[0]


def estimate(scenario: Scenario) -> StepReport:
    """One step through the closed-form twin (no contention): fast, for sweeps."""
    check_step_budget(scenario, "analytical")
    _schedule(scenario)
    closed = estimate_step(scenario)
    return _report(scenario, "analytical", closed.step_time_s, closed.breakdown, closed.critical_rank)
