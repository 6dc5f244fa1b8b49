"""Residuals of the reference runs under the current model (what clustersim/data/residuals.json holds,
read by clustersim.uncertainty): every reference run through the event engine."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from clustersim.uncertainty.interval import RESIDUALS_FILE
from clustersim.uncertainty.reference import reference_runs
from clustersim.uncertainty.regimes import features

__all__ = ["RESIDUALS_FILE", "Residual", "compute_residuals", "residuals_document"]


@dataclass(frozen=True, slots=True)
class Residual:
    table: str
    name: str
    scenario: dict[str, Any]
    regime: str
    framework: str
    zero3_impl: str
    gpus: int
    schedule: str
    predicted_step_time_s: float
    measured_step_time_s: float

    @property
    def log_ratio(self) -> float:
        return math.log(self.predicted_step_time_s / self.measured_step_time_s)


def compute_residuals() -> list[Residual]:
    """Every reference run through the event engine."""
    from clustersim.api import simulate
    from clustersim.scenario import scenario_from_dict

    out = []
    for run in reference_runs():
        sc = scenario_from_dict(run.scenario)
        f = features(sc)
        out.append(Residual(run.table, run.name, run.scenario, f.regime, f.framework, f.zero3_impl, f.gpus,
                            f.schedule, simulate(sc).step_time_s, run.measured_step_time_s))
    return out


def residuals_document(runs: list[Residual]) -> dict[str, Any]:
    return {
        "generated_by": "python benchmarks/accuracy.py --write",
        "source": "validation/reference/ (copies of the shared calibration tables, each row with its source)",
        "runs": [{"table": r.table, "name": r.name, "regime": r.regime, "framework": r.framework,
                  "zero3_impl": r.zero3_impl, "gpus": r.gpus, "schedule": r.schedule,
                  "predicted_step_time_s": round(r.predicted_step_time_s, 6),
                  "measured_step_time_s": round(r.measured_step_time_s, 6),
                  "log_ratio": round(r.log_ratio, 6)} for r in runs],
    }
