"""The step models a sweep evaluates layouts with, handed to it from above.

The sweep sits below the public API (``.importlinter``, contract "floors"), so it imports neither
the closed form nor the event engine: whoever starts a sweep (``clustersim.api.sweep``, the
``sweep`` and ``compare`` commands) passes them in, filled from ``clustersim.api.SWEEP_EVALUATORS``.
Executors send them to their workers with the task: functions defined at module level pickle by
reference (their module and name), so pass such functions, never lambdas or closures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clustersim.scenario import Scenario


@dataclass(frozen=True, slots=True)
class Evaluators:
    """The closed form and the event engine of a sweep, each ``Scenario -> StepReport``."""

    estimate: Callable[[Scenario], Any]  # the closed form: every layout the bounds cannot rule out
    simulate: Callable[[Scenario], Any]  # the event engine: the re-ranked best rows
    # whether ``estimate`` is clustersim's closed form, which the replay's third-level bound
    # bounds (``SweepSpec.replay_bounds``); the screen's own bounds must bound any estimate, with
    # the screener that goes with it
    bounds_hold: bool = False
    # whether ``estimate`` reads ZeRO stages 1 and 2 alike for time, so that one of each pair of
    # twins is evaluated and the other shares its time (``SweepSpec.time_twins``)
    zero_twins_share_time: bool = False
