"""The one place that picks a timing model of the step.

Every timing model takes a step plan (clustersim.plan.step_plan: what every simulated rank does)
and answers with a ``StepResult`` (clustersim.engine.timeline) through one method, ``time(plan)``:

* ``EventEngine`` (clustersim.engine.event): every action in simpy, links shared by processor
  sharing; picked for engine "event" when an exact run is asked for (with or without its
  timeline);
* ``Recorded`` (clustersim.engine.hybrid): engine "event" with the timeline recorded (traces,
  pages): the hybrid's numbers, bit for bit, with the all-simpy run's segments;
* ``Hybrid`` (clustersim.engine.hybrid): the event engine with the stretches where nothing can
  contend in closed form (the same result to rounding); engine "event" otherwise;
* ``ClosedForm`` (clustersim.engine.closed_form): the recurrence without contention, identical
  steady-state periods extrapolated (clustersim.engine.collapse); engine "analytical" (exact:
  every micro-batch walked).

Per-rank mode (clustersim.perrank.run) times its plans of rank classes through ``time_plan``
too; the shared fabric (clustersim.engine.cosim) runs several jobs' event engines on one clock.
"""

from __future__ import annotations

from typing import Protocol

from clustersim.engine.closed_form import ClosedForm
from clustersim.engine.event import EventEngine
from clustersim.engine.hybrid import Hybrid, Recorded
from clustersim.engine.timeline import ClosedResult, SimResult, StepResult
from clustersim.plan.plan_cache import PlanCache
from clustersim.plan.step_plan import StepPlan
from clustersim.scenario import Scenario

ENGINES = ("event", "analytical")


class TimingModel(Protocol):
    """A model that times one step of a plan."""

    def time(self, plan: StepPlan) -> StepResult: ...


def timing_model(engine: str, record: bool = False, exact: bool = False) -> TimingModel:
    """The model for ``engine`` ("event" or "analytical"); ``record``: the event engine keeps every
    segment of the timeline; ``exact``: no fast path (every action in simpy, every micro-batch in
    the recurrence), the same answer to rounding."""
    if engine == "analytical":
        return ClosedForm(collapse=not exact)
    if engine == "event":
        if record:
            return EventEngine(record=True) if exact else Recorded()
        return EventEngine(record=False) if exact else Hybrid()
    raise ValueError(f"engine {engine!r}: one of {ENGINES}")


def time_plan(plan: StepPlan, engine: str, record: bool = False) -> StepResult:
    """One step of ``plan`` through ``engine``'s model."""
    return timing_model(engine, record).time(plan)


def simulate_plan(plan: StepPlan, record: bool = True, hybrid: bool = True) -> SimResult:
    """One step of ``plan`` in the event engine (``hybrid``: closed form where nothing can contend,
    when no timeline is recorded)."""
    result = timing_model("event", record, exact=not hybrid).time(plan)
    assert isinstance(result, SimResult)
    return result


def simulate_step(scenario: Scenario, record: bool = True, hybrid: bool = True,
                  cache: PlanCache | None = None) -> SimResult:
    """One step of ``scenario``'s representative plan in the event engine (``cache``: the run's
    memo, which keeps the plan for the next call; None: a plan of this call's own)."""
    return simulate_plan((cache or PlanCache()).step_plan(scenario), record, hybrid)


def estimate_step(scenario: Scenario, collapse: bool = True, cache: PlanCache | None = None) -> ClosedResult:
    """One step of ``scenario``'s representative plan in the closed form (``cache`` as for
    ``simulate_step``)."""
    result = timing_model("analytical", exact=not collapse).time((cache or PlanCache()).step_plan(scenario))
    assert isinstance(result, ClosedResult)
    return result
