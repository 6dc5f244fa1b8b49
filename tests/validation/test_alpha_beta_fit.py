"""Fits recover known constants; hand-checked numbers."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.calibrate.fit import DesignRow, fit_alpha_beta, fit_rate


def test_alpha_beta_exact_ring_points():
    # ring all-reduce on 4 ranks: a = 2(n-1) = 6 latency terms, b = 2(n-1)/n * S = 1.5 S bytes
    # with alpha = 50 us, beta = 1/(100 MB/s) = 1e-8 s/B:
    #   S = 1 MB  -> t = 6*50e-6 + 1.5e6*1e-8 = 3e-4 + 1.5e-2 = 0.0153 s
    #   S = 10 kB -> t = 3e-4 + 1.5e4*1e-8  = 3e-4 + 1.5e-4 = 4.5e-4 s
    rows = [DesignRow(6, 1.5e6, 0.0153), DesignRow(6, 1.5e4, 4.5e-4)]
    fit = fit_alpha_beta(rows)
    assert fit.alpha_s == pytest.approx(50e-6, rel=1e-9)
    assert fit.beta_s_per_byte == pytest.approx(1e-8, rel=1e-9)
    assert fit.bw_bytes_per_s == pytest.approx(1e8, rel=1e-9)
    assert fit.median_abs_err_pct == pytest.approx(0.0, abs=1e-6)


def test_alpha_beta_clamps_negative_latency_to_zero():
    # points lying on t = b * 1e-8 - 1e-5 (a negative intercept) would give alpha < 0;
    # the constrained fit sets alpha = 0 and fits beta alone
    rows = [DesignRow(2, 1e6, 1e-2 - 1e-5), DesignRow(2, 2e6, 2e-2 - 1e-5)]
    fit = fit_alpha_beta(rows)
    assert fit.alpha_s == 0.0
    assert fit.beta_s_per_byte == pytest.approx(1e-8, rel=2e-3)


def test_rate_fit_of_consistent_points():
    # 2 GFLOP in 0.02 s and 4 GFLOP in 0.04 s: both exactly 100 GFLOP/s
    assert fit_rate([2e9, 4e9], [0.02, 0.04]) == pytest.approx(1e11)


@settings(max_examples=60, deadline=None)
@given(alpha=st.floats(1e-6, 1e-2), bw=st.floats(1e6, 1e11),
       sizes=st.lists(st.floats(1e3, 1e9), min_size=2, max_size=6, unique=True),
       terms=st.integers(1, 12))
def test_alpha_beta_recovers_noise_free_constants(alpha, bw, sizes, terms):
    rows = [DesignRow(terms, s, terms * alpha + s / bw) for s in sizes]
    fit = fit_alpha_beta(rows)
    for r in rows:  # the fitted model reproduces every point
        assert (terms * fit.alpha_s + r.wire_bytes * fit.beta_s_per_byte) == pytest.approx(r.measured_s, rel=1e-5)
