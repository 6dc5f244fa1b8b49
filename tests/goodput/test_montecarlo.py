"""The seeded Monte-Carlo against the exact expectation, by hand, and for determinism."""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.goodput.expectation import RunParams, expected
from clustersim.goodput.montecarlo import simulate_runs

DAY = 86400.0


def params(mu: float = 0.0, lag_s: float = 0.0) -> RunParams:
    return RunParams(lam=1 / 1000.0, mu=mu, blocking_s=3.0, lag_s=lag_s, final_save_s=3.0,
                     restart_failure_s=100.0, restart_planned_s=80.0)


@pytest.mark.parametrize("mu,lag_s", [(0.0, 0.0), (0.0, 30.0), (1 / 5000.0, 0.0), (1 / 5000.0, 30.0)],
                         ids=["sync", "async", "sync+planned", "async+planned"])
def test_mean_of_runs_is_the_expectation(mu: float, lag_s: float) -> None:
    """Some 4,700 interruptions per run: the window's edges (the first epoch has no restart, the
    last is cut) move the mean by about one restart per window, 2e-4 here; a model that ignored
    the async lag or the planned stops would be off by 0.01-0.03."""
    p = params(mu, lag_s)
    window = 54 * DAY
    s = simulate_runs(p, np.array([p.lam]), 60.0, window, 60, seed=7)
    f = expected(p, 60.0)
    assert np.mean(s.useful_s) / window == pytest.approx(f.goodput, abs=2e-3)
    assert np.mean(s.rework_s) / window == pytest.approx(f.rework, abs=2e-3)
    assert np.mean(s.checkpoint_s) / window == pytest.approx(f.checkpoint, abs=1e-3)
    assert np.mean(s.restart_s) / window == pytest.approx(f.restart, abs=2e-3)
    assert np.mean(s.unplanned) == pytest.approx(p.lam * window, rel=0.01)
    assert np.mean(s.planned) == pytest.approx(f.planned_per_s * window, rel=0.03)
    total = s.useful_s + s.rework_s + s.checkpoint_s + s.restart_s
    assert np.allclose(total, window)


def test_a_run_without_failures_only_pays_for_checkpoints() -> None:
    """MTBF of 10^12 s: no event in 10 days. Periods of 60 s training + 3 s checkpoint:
    864,000 s = 13,714 periods (863,982 s) + 18 s of training -> 13,714 x 60 + 18 = 822,858 s."""
    p = RunParams(lam=1e-12, mu=0.0, blocking_s=3.0, lag_s=0.0, final_save_s=3.0, restart_failure_s=100.0,
                  restart_planned_s=80.0)
    s = simulate_runs(p, np.array([p.lam]), 60.0, 10 * DAY, 3, seed=0)
    assert s.unplanned.tolist() == [0, 0, 0]
    assert s.useful_s.tolist() == [822_858.0] * 3
    assert s.checkpoint_s.tolist() == [13_714 * 3.0] * 3


def test_failure_counts_by_class_follow_the_rates() -> None:
    p = params()
    rates = np.array([0.7, 0.2, 0.1]) * p.lam
    s = simulate_runs(p, rates, 60.0, 54 * DAY, 40, seed=3)
    share = s.by_class.sum(axis=0) / s.by_class.sum()
    assert share == pytest.approx([0.7, 0.2, 0.1], abs=0.01)
    assert (s.by_class.sum(axis=1) == s.unplanned).all()


def test_same_seed_same_runs_other_seed_other_runs() -> None:
    p = params(1 / 5000.0, 30.0)
    a = simulate_runs(p, np.array([p.lam]), 60.0, 5 * DAY, 20, seed=11)
    b = simulate_runs(p, np.array([p.lam]), 60.0, 5 * DAY, 20, seed=11)
    c = simulate_runs(p, np.array([p.lam]), 60.0, 5 * DAY, 20, seed=12)
    assert a.useful_s.tobytes() == b.useful_s.tobytes() and (a.unplanned == b.unplanned).all()
    assert a.useful_s.tobytes() != c.useful_s.tobytes()


def test_mean_agrees_with_the_expectation_within_its_error_at_any_trial_count() -> None:
    """About 100 failures per run (rate 1 / 2,000 s over 200,000 s): each run's count is Poisson,
    and its failure times are that many i.i.d. uniforms over the window. Drawing a row of
    ``max(count)`` uniforms, sorting it and keeping the first ``count`` (the defect) kept the
    smallest ``count`` of them: failures bunched at the window's start, more so as more trials
    raise the maximum, so the mean drifted up with the trial count (10 standard errors above the
    expectation at 2,000 trials, 31 at 20,000). The window's edges (no restart before the first
    epoch, the last one's training kept) move the mean here by about 2e-4, under 2 standard
    errors at 20,000 trials."""
    p = RunParams(lam=1 / 2000.0, mu=0.0, blocking_s=30.0, lag_s=0.0, final_save_s=3.0,
                  restart_failure_s=5.0, restart_planned_s=8.0)
    window, tau = 200_000.0, 600.0
    f = expected(p, tau)
    means = {}
    for trials in (200, 2_000, 20_000):
        g = simulate_runs(p, np.array([p.lam]), tau, window, trials, seed=5).useful_s / window
        se = g.std(ddof=1) / np.sqrt(trials)
        assert abs(g.mean() - f.goodput) < 3 * se, (trials, g.mean(), f.goodput, se)
        means[trials] = (g.mean(), se)
    # the mean does not move with the trial count beyond the smaller sample's error
    assert abs(means[20_000][0] - means[200][0]) < 3 * means[200][1]
    assert abs(means[20_000][0] - means[2_000][0]) < 3 * means[2_000][1]

