"""The 80% interval of a scenario on a calibrated cluster (docs/uncertainty.md, "A calibrated
machine").

After calibration the prediction already carries what the runs said about the machine (its
fitted constants), so the band is centred on it (mu = 0): the regime's bias of the uncalibrated
model must not be applied a second time, and neither may the calibrated runs' own errors before
calibration. Its spread:

* **several runs, scenario inside the cover** (a regime the runs were of, ``cover_key``): the
  leave-one-out errors of the calibrated model, r_i = ln(1 + e_i), as a mean square about zero
  (their bias is error too), shrunk toward the pooled spread of the published runs with K_S
  pseudo-runs: s^2 = (sum r_i^2 + K_S s_pool^2) / (n + K_S); widened where the scenario leaves the
  runs' GPU range or framework.
* **one run, inside the cover**: there is no leave-one-out error (a fit without the run is no
  fit). The generic spread s of the scenario's regime (interval.regime_spread) stands in, times
  sqrt(2): the calibrated prediction of another job errs by e_new - e_run, the difference of two
  runs' independent errors, whose variance is 2 s^2.
* **outside the cover** (MoE, ZeRO-3/FSDP, CP or FP8 on a profile fitted on other runs): the
  generic spread and widenings of the regime, as for an uncalibrated machine, centred on the
  calibrated point, and the reason named; x sqrt(2) after one run (the calibrated prediction errs
  by e_new - e_run there too) and never narrower than the band inside the cover.

Inside the cover and outside, the band holds the calibration's own runs (``_holding_own_runs``).
"""

from __future__ import annotations

import math

from clustersim.hardware.spec import CalibrationEvidence, at_range_edge
from clustersim.uncertainty.interval import (
    K_S,
    LEVEL,
    S_MIN,
    WIDEN,
    Z_80,
    Evidence,
    Interval,
    _spread,
    band,
    gpu_range_widenings,
    regime_spread,
    schedule_widening,
    widenings,
)
from clustersim.uncertainty.regimes import Features, cover_key


def _range_widenings(f: Features, ev: CalibrationEvidence) -> list[tuple[str, float]]:
    out = gpu_range_widenings(f.gpus, ev.min_gpus, ev.max_gpus, "the calibrated") if ev.max_gpus else []
    out += schedule_widening(f.schedule, ev.schedules, "in the calibrated runs"
                             + (f" ({', '.join(ev.schedules)})" if ev.schedules else " (none had a pipeline)"))
    if ev.frameworks and f.framework not in ev.frameworks:
        out.append((f"framework {f.framework} not among the calibrated runs' ({', '.join(ev.frameworks)})",
                    WIDEN["framework"]))
    return out


def _own_runs_spread(ev: CalibrationEvidence) -> float:
    """The spread (ln units, 1 sigma) at which the 80% band holds every run the calibration was
    fitted to: its largest in-sample miss, |ln(measured / calibrated)|, over Z_80. A fit that
    reaches its runs leaves this small; one stopped at the edge of its range (compute_scale 0.4 or
    2.5) leaves the miss, which the interval must not hide (a run 3.4x the model's time was
    predicted at 1.75 s (1.54-1.99) against its measured 2.5 s)."""
    misses = [abs(math.log(r.measured_s / r.after_s)) for r in ev.per_run if r.measured_s > 0 and r.after_s > 0]
    # + 1e-5: the profile stores the times to 6 significant digits (hardware.evidence), the run's
    # own prediction is not rounded
    return (max(misses) + 1e-5) / Z_80 if misses else 0.0


def _holding_own_runs(ev: CalibrationEvidence, s: float, wides: list[tuple[str, float]]) -> float:
    """``s``, widened to ``_own_runs_spread`` where that is wider (and the reason added to ``wides``)."""
    own = _own_runs_spread(ev)
    if own <= max(s, S_MIN):
        return s
    edge = any(f.name == "compute_scale" and at_range_edge(f.value) for f in ev.factors)
    wides.append((f"widened to hold the calibration's own runs: the calibrated model misses one by "
                  f"{math.expm1(own * Z_80):.0%}" + (" (a fit at the edge of its range)" if edge else ""), 0.0))
    return own


def _regime_source(f: Features, regime: Evidence | None) -> str:
    """What ``regime_spread`` took the spread from: the regime's published runs, or, where the
    regime has none, the pooled spread of every published run."""
    if regime is not None and regime.n:
        return f"the spread of regime {f.regime}'s published runs"
    return f"the pooled spread of all published runs (regime {f.regime} has no measured run)"


def _inside_cover(f: Features, ev: CalibrationEvidence, regime: Evidence | None,
                  pooled: Evidence) -> tuple[float, list[tuple[str, float]], int]:
    """(1-sigma spread before holding the own runs, widenings, evidence runs) of a scenario inside
    the calibration's cover (module docstring): the leave-one-out errors of several runs, or the
    regime's spread x sqrt(2) for one run; widened for the runs' GPU range, schedules and frameworks."""
    errors = ev.step_time_rel_errors
    if errors:
        r = [math.log1p(e) for e in errors]
        s_pool = max(_spread(pooled), S_MIN)
        var = (sum(x * x for x in r) + K_S * s_pool ** 2) / (len(r) + K_S)
        wides = _range_widenings(f, ev)
        return math.sqrt(var + sum(w * w for _, w in wides)), wides, len(r)
    _, var, n = regime_spread(regime, pooled)
    wides = [(f"calibrated from one run: no leave-one-out error; {_regime_source(f, regime)}, centred on the "
              "calibrated prediction, x sqrt(2)", 0.0), *_range_widenings(f, ev)]
    var = 2 * var + sum(w * w for _, w in wides)
    return max(math.sqrt(var), S_MIN) * math.sqrt(1 + 1 / (n + K_S)), wides, n


def calibrated_interval(f: Features, ev: CalibrationEvidence, regime: Evidence | None, pooled: Evidence,
                        generations: frozenset[str]) -> Interval:
    key = cover_key(f)
    inside, inside_wides, runs = _inside_cover(f, ev, regime, pooled)
    if not ev.cover or key in ev.cover:
        s = _holding_own_runs(ev, inside, inside_wides)
        lo, hi = band(0.0, s)
        return Interval(LEVEL, lo, hi, f.regime, runs, validated=bool(ev.step_time_rel_errors) and runs >= 3
                        and not inside_wides, why=tuple(w for w, _ in inside_wides))
    # outside the cover: the uncalibrated spread and widenings of the regime, x sqrt(2) after one run
    # (the calibrated prediction errs by e_new - e_run there too), never narrower than inside the
    # cover, and holding the calibration's own runs
    _, var, n = regime_spread(regime, pooled)
    one = not ev.step_time_rel_errors
    wides = [(f"outside the calibration's cover ({', '.join(ev.cover)}; this scenario is {key}): the "
              "uncalibrated spread, centred on the calibrated prediction"
              + (f" ({_regime_source(f, regime)}), x sqrt(2) as the calibration had one run" if one else ""), 0.0),
             *widenings(f, regime, generations, True, pooled)]
    var = (2 if one else 1) * var + sum(w * w for _, w in wides)
    base = max(math.sqrt(var), S_MIN) * math.sqrt(1 + 1 / (n + K_S))
    if inside > base:
        wides.append(("no narrower than inside the cover: "
                      + "; ".join(w for w, _ in inside_wides or [("the calibrated runs' leave-one-out errors", 0.0)]),
                      0.0))
        base = inside
    s = _holding_own_runs(ev, base, wides)
    lo, hi = band(0.0, s)
    return Interval(LEVEL, lo, hi, f.regime, n, validated=False, why=tuple(w for w, _ in wides))
