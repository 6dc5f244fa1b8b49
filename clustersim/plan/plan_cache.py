"""One run's memo of the lowering: the plans it builds and the compiled units they share.

A run times one scenario more than once: `clustersim run` through the event engine and the
closed form, per-rank mode its faulty and its healthy plan through both, a web app or a benchmark
the same scenario again and again. Each call of the API makes one ``PlanCache`` (or is handed one)
and passes it on, so every plan is built once per run and its compiled units are shared:

* ``step_plan(scenario)``: the representative plan (clustersim.plan.step_plan.build_plan);
* ``remember(kind, key, build)``: any other plan or table of the run (per-rank mode keeps its
  plans of rank classes here);
* ``compiler``: the compiled units of every plan the cache builds.

What the timing models learn about a plan lives in the plan's own ``StepMemo``. The pure cost
functions below the plan (a layer's cost, a collective's plan, the step's work) keep bounded
``functools.lru_cache`` memos of their own: they are functions of the frozen specs alone.
Nothing here is module-global: a cache lives as long as its holder keeps it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

from clustersim.plan.step_plan import StepPlan, UnitCompiler, build_plan
from clustersim.scenario import Scenario

T = TypeVar("T")


class PlanCache:
    """The memo of one run (module docstring)."""

    def __init__(self) -> None:
        self.compiler = UnitCompiler()
        self._memo: dict[tuple[str, Hashable], object] = {}

    def remember(self, kind: str, key: Hashable, build: Callable[[], T]) -> T:
        """``build()``, once per (``kind``, ``key``) for the life of this cache."""
        slot = (kind, key)
        value = self._memo.get(slot)
        if value is None:
            value = self._memo[slot] = build()
        return value  # type: ignore[return-value]

    def step_plan(self, scenario: Scenario) -> StepPlan:
        """The representative step plan of ``scenario``, built once."""
        return self.remember("step_plan", scenario, lambda: build_plan(scenario, compiler=self.compiler))
