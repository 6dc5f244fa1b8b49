"""Errors, summary statistics and the plot."""

import pytest

from clustersim.calibrate.compare import CaseResult, save_plot, summary


def test_error_is_signed_percent_of_measurement():
    # predicted 1.1 s for 1.0 s measured: +10%; 0.8 for 1.0: -20%
    assert CaseResult("a", "collective", "holdout", 1.1, 1.0).error_pct == pytest.approx(10.0)
    assert CaseResult("b", "collective", "holdout", 0.8, 1.0).error_pct == pytest.approx(-20.0)


def test_summary_median_and_nearest_rank_p90():
    # |errors| of the held-out cases: 1, 2, ..., 10 %  -> median 5.5, p90 = 9th of 10 = 9
    cases = [CaseResult(f"c{i}", "collective", "holdout", 1 + i / 100, 1.0) for i in range(1, 11)]
    cases.append(CaseResult("fit", "collective", "fit", 3.0, 1.0))  # not counted
    s = summary(cases, "holdout")
    assert s["cases"] == 10
    assert s["median_abs_error_pct"] == pytest.approx(5.5)
    assert s["p90_abs_error_pct"] == pytest.approx(9.0)
    assert summary(cases, "none")["cases"] == 0


def test_plot_is_a_png(tmp_path):
    cases = [CaseResult("a", "collective", "fit", 1e-3, 1.1e-3), CaseResult("b", "ddp_step", "holdout", 0.5, 0.45)]
    path = save_plot(cases, tmp_path / "p.png", "t")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
