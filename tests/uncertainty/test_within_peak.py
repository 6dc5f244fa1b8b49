"""No interval reaches past the GPUs' peak: the low end of the step interval stops at the step's
FLOPs at peak (MFU 1, report.step_at_peak_s). A `validate` profile, whose peak is the measured GEMM
rate, put a step at MFU 82.9% and its interval at 65.3-105.3%."""

from __future__ import annotations

from clustersim.uncertainty.interval import Interval


def test_the_low_end_stops_at_the_peak() -> None:
    iv = Interval(0.8, 0.79, 1.27, "3d/hopper", 9, True)
    near = iv.within_peak(0.829, 1.0)
    assert near.lo_factor == 0.829 and near.hi_factor == 1.27
    assert max(near.of_rate(0.829)) <= 1.0 + 1e-12
    assert iv.within_peak(0.45, 1.0) == iv          # far from the peak: unchanged
    assert iv.within_peak(0.0, 1.0) == iv and iv.within_peak(1.5, 1.0) == iv


def test_an_interval_that_holds_measured_runs_stops_at_the_peak_too() -> None:
    """Widened to hold a calibration's own runs (x0.2-5), the low end went below the floor calibrate
    itself refuses a measured step under (MFU 110%)."""
    held = Interval(0.8, 0.2, 5.0, "3d/hopper", 1, False, ("widened to hold the calibration's own runs",))
    assert held.within_peak(0.6, 2.0).lo_factor == 0.3
