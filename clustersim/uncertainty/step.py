"""The 80% interval of one scenario's step: its features, the stored evidence of its regime, and
the cluster's calibration when it has one (docs/uncertainty.md)."""

from __future__ import annotations

from dataclasses import replace

from clustersim.compute.arch import arch_for
from clustersim.scenario import Scenario
from clustersim.uncertainty.calibrated import calibrated_interval
from clustersim.uncertainty.interval import Interval, _stored, interval_from, per_rank_widenings
from clustersim.uncertainty.regimes import features


def step_interval(scenario: Scenario) -> Interval:
    """The 80% interval of ``scenario``'s step time (and of everything proportional to it).

    On a mixed cluster (``cluster.groups``) every group's GPUs get the interval of their own
    regime, and the step's is the widest that holds them all (the lowest low end, the highest high
    end), named after all of them: whichever GPUs pace the step, its prediction is no surer than
    the least sure of them, and no run of mixed GPUs is measured (``interval.per_rank_widenings``,
    the rule faults go through too: never validated). It does not depend on the order in which the
    groups are listed (group 0's hardware stood for the whole cluster before)."""
    groups = {g.cluster for g in scenario.node_groups}
    if len(groups) < 2:
        return _one(scenario)
    parts = sorted({_one(replace(scenario, cluster=c, node_groups=())) for c in groups},
                   key=lambda iv: (iv.regime, iv.lo_factor, iv.hi_factor, iv.why))
    if len(parts) == 1:
        return parts[0]
    family = parts[0].regime.split("/", 1)[0]
    gens = sorted({iv.regime.split("/", 1)[1] for iv in parts})
    runs = {iv.regime: iv.evidence_runs for iv in parts}
    why = sorted({f"{iv.regime}: {reason}" for iv in parts for reason in iv.why})
    mixing = [reason for reason, _ in per_rank_widenings((), 0, mixed=tuple(sorted(runs)))]
    return Interval(parts[0].level, min(iv.lo_factor for iv in parts), max(iv.hi_factor for iv in parts),
                    f"{family}/{'+'.join(gens)}", sum(runs.values()), validated=False, why=(*mixing, *why))


def _one(scenario: Scenario) -> Interval:
    f = features(scenario)
    regimes, pooled = _stored()
    generations = frozenset(regime.split("/", 1)[1] for regime in regimes)
    calibration = getattr(scenario.cluster, "calibration", None)
    if calibration is not None:
        return calibrated_interval(f, calibration, regimes.get(f.regime), pooled, generations | {f.generation})
    gemm_measured = getattr(arch_for(scenario.cluster.gpu), "gemm_measured", True)
    return interval_from(f, regimes.get(f.regime), pooled, generations, gemm_measured)
