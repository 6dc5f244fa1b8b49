"""The 80% interval of one scenario's step: its features, the stored evidence of its regime, and
the cluster's calibration when it has one (docs/uncertainty.md)."""

from __future__ import annotations

from clustersim.compute.arch import arch_for
from clustersim.scenario import Scenario
from clustersim.uncertainty.calibrated import calibrated_interval
from clustersim.uncertainty.interval import Interval, _stored, interval_from
from clustersim.uncertainty.regimes import features


def step_interval(scenario: Scenario) -> Interval:
    """The 80% interval of ``scenario``'s step time (and of everything proportional to it)."""
    f = features(scenario)
    regimes, pooled = _stored()
    generations = frozenset(regime.split("/", 1)[1] for regime in regimes)
    calibration = getattr(scenario.cluster, "calibration", None)
    if calibration is not None:
        return calibrated_interval(f, calibration, regimes.get(f.regime), pooled, generations | {f.generation})
    gemm_measured = getattr(arch_for(scenario.cluster.gpu), "gemm_measured", True)
    return interval_from(f, regimes.get(f.regime), pooled, generations, gemm_measured)
