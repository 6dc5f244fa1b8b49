"""The exact expectation: Daly's closed form where his assumptions hold, the optimal interval
against Young/Daly, and the directions every goodput model must respect."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from clustersim.goodput.expectation import (
    RunParams,
    best_interval_steps,
    daly_interval_s,
    expected,
    fractions,
    young_interval_s,
)


def sync(mtbf_s: float, delta_s: float, restart_s: float) -> RunParams:
    return RunParams(lam=1.0 / mtbf_s, mu=0.0, blocking_s=delta_s, lag_s=0.0, final_save_s=delta_s,
                     restart_failure_s=restart_s, restart_planned_s=restart_s)


def daly_goodput(tau: float, delta: float, mtbf: float, restart: float) -> float:
    """Daly 2006, expected wall time per unit of work: T_w / T_s = M e^{R/M} (e^{(tau+delta)/M} - 1) / tau."""
    return tau / (mtbf * math.exp(restart / mtbf) * (math.exp((tau + delta) / mtbf) - 1.0))


def test_hand_case_matches_dalys_closed_form() -> None:
    # M = 10,000 s, delta = 10 s, R = 300 s, tau = 440 s:
    # 440 / (10,000 e^0.03 (e^0.045 - 1)) = 440 / (10,000 x 1.030455 x 0.046028) = 440 / 474.30 = 0.92769
    f = expected(sync(10_000.0, 10.0, 300.0), 440.0)
    assert f.goodput == pytest.approx(0.92769, abs=1e-5)
    assert f.goodput == pytest.approx(daly_goodput(440.0, 10.0, 10_000.0, 300.0), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(mtbf=st.floats(1e3, 1e6), delta=st.floats(0.01, 600.0), restart=st.floats(0.0, 3600.0),
       tau=st.floats(1.0, 1e5))
@example(mtbf=1000.0, delta=1.0, restart=0.0, tau=34486.0)  # rework came out -1e-16 (rounding)
def test_equals_daly_without_planned_interruptions(mtbf: float, delta: float, restart: float, tau: float) -> None:
    f = expected(sync(mtbf, delta, restart), tau)
    assert f.goodput == pytest.approx(daly_goodput(tau, delta, mtbf, restart), rel=1e-9, abs=1e-300)
    assert f.goodput + f.checkpoint + f.rework + f.restart == pytest.approx(1.0, abs=1e-9)
    assert min(f.goodput, f.checkpoint, f.rework) >= 0.0


@settings(max_examples=30, deadline=None)
@given(mtbf=st.floats(1e3, 1e6), ratio=st.floats(1e-6, 1e-2), restart=st.floats(0.0, 3600.0))
def test_best_interval_is_dalys_where_his_assumptions_hold(mtbf: float, ratio: float, restart: float) -> None:
    """Exponential failures, synchronous checkpoints, delta << M: the searched optimum is Daly's
    higher-order estimate (within 0.1%, the search runs on 0.01 s steps) and Young's first-order
    one within its own error, which grows as sqrt(delta / M)."""
    delta = ratio * mtbf
    step = min(0.01, delta / 100)
    p = sync(mtbf, delta, restart)
    best = best_interval_steps(p, step, int(10 * mtbf / step)) * step
    assert best == pytest.approx(daly_interval_s(delta, mtbf), rel=1e-3, abs=2 * step)
    assert best == pytest.approx(young_interval_s(delta, mtbf), rel=2.0 * math.sqrt(ratio) + 1e-3)


def test_best_interval_beats_its_neighbours() -> None:
    p = RunParams(lam=1 / 3600.0, mu=1 / 86400.0, blocking_s=20.0, lag_s=0.0, final_save_s=20.0,
                  restart_failure_s=600.0, restart_planned_s=500.0)
    k = best_interval_steps(p, 5.0, 10_000)
    g = fractions(p, np.array([k - 1, k, k + 1]) * 5.0)["goodput"]
    assert g[1] >= g[0] and g[1] >= g[2]
    assert 10 < k < 1000


def test_directions() -> None:
    base = RunParams(lam=1 / 10_000.0, mu=1 / 100_000.0, blocking_s=10.0, lag_s=0.0, final_save_s=10.0,
                     restart_failure_s=600.0, restart_planned_s=500.0)
    g = expected(base, 400.0).goodput
    more_failures = RunParams(**{**_fields(base), "lam": 2 / 10_000.0})
    slower_restart = RunParams(**{**_fields(base), "restart_failure_s": 1200.0})
    slower_save = RunParams(**{**_fields(base), "blocking_s": 30.0})
    assert expected(more_failures, 400.0).goodput < g
    assert expected(slower_restart, 400.0).goodput < g
    assert expected(slower_save, 400.0).goodput < g
    # asynchronous: only the snapshot blocks, the write (lag) runs behind; never worse than sync
    sync_save = RunParams(**{**_fields(base), "blocking_s": 10.5})
    async_save = RunParams(**{**_fields(base), "blocking_s": 0.5, "lag_s": 10.0})
    assert expected(async_save, 400.0).goodput > expected(sync_save, 400.0).goodput
    # a checkpoint that is durable later loses more work when a failure comes in between
    assert expected(RunParams(**{**_fields(base), "lag_s": 200.0}), 400.0).rework > expected(base, 400.0).rework


def test_impossible_restart_gives_zero_goodput() -> None:
    """A restart far longer than the MTBF never finishes: goodput 0, no overflow."""
    f = expected(sync(100.0, 1.0, 1e6), 50.0)
    assert f.goodput == 0.0 and f.restart == 1.0


def _fields(p: RunParams) -> dict[str, float]:
    return {k: getattr(p, k) for k in p.__slots__}
