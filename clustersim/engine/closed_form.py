"""The closed-form twin of the event engine: the same plan run as a recurrence, no contention.

Each rank's compute stream, communication streams and pipeline transfers are computed by a
direct recurrence (start = max(stream free, inputs arrived) + duration: clustersim.engine.recurrence)
instead of simpy events, and every link is assumed to be free whenever a transfer starts. Where
nothing contends this gives exactly the event engine's times; elsewhere the event engine is
slower, and the gap between the two is the congestion estimate. Identical steady-state
micro-batches are computed once and the rest extrapolated (``collapse``: clustersim.engine.collapse).
"""

from __future__ import annotations

from clustersim.engine.collapse import run_collapsed
from clustersim.engine.recurrence import Recurrence
from clustersim.engine.timeline import ClosedResult
from clustersim.plan.step_plan import StepPlan


class ClosedForm:
    """The closed form as a timing model (``collapse``: extrapolate identical steady-state periods;
    without it every micro-batch is walked, the same answer to rounding)."""

    def __init__(self, collapse: bool = True) -> None:
        self.collapse = collapse

    def time(self, plan: StepPlan) -> ClosedResult:
        rec = Recurrence(plan)
        rec.issue_param_gathers()
        if self.collapse:
            run_collapsed(rec)
        rec.run_to_end()
        return rec.finish()
