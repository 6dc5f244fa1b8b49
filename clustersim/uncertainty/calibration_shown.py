"""What `clustersim run` shows of a calibrated cluster: what calibration changed (each fitted
factor with what it was fitted to, every run before and after), the regimes it covers and
whether this scenario is one of them (docs/calibration.md)."""

from __future__ import annotations

from typing import Any

from clustersim.scenario import Scenario


def _covered(sc: Scenario) -> tuple[str, bool]:
    from clustersim.uncertainty.regimes import cover_key, features
    key = cover_key(features(sc))
    ev = sc.cluster.calibration
    return key, bool(ev is not None and (not ev.cover or key in ev.cover))


def calibration_json(sc: Scenario) -> dict[str, Any]:
    from clustersim.hardware.evidence import evidence_to_json
    key, inside = _covered(sc)
    return {**evidence_to_json(sc.cluster.calibration), "scenario_kind": key, "covered": inside}


def calibration_line(sc: Scenario) -> str:
    ev = sc.cluster.calibration
    key, inside = _covered(sc)
    factors = "; ".join(f"{f.name} {f.before:.4g} -> {f.value:.4g} from {', '.join(f.fitted_to)}" for f in ev.factors)
    runs = "; ".join(f"{r.name} measured {r.measured_s:.4g} s, before {r.before_s:.4g} s, after {r.after_s:.4g} s"
                     for r in ev.per_run)
    cover = ", ".join(ev.cover) or "not recorded"
    loo = (f"leave-one-out errors of {len(ev.step_time_rel_errors)} runs" if ev.step_time_rel_errors
           else "one run: no leave-one-out error")
    return (f"{factors or 'no factor recorded'} ({ev.source}, {ev.date}); runs: {runs or 'not recorded'}; "
            f"covers {cover}: this scenario ({key}) is {'inside' if inside else 'OUTSIDE'}; {loo}")
