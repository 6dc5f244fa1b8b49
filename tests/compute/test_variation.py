"""The expected wait for the slowest GPU (clustersim.compute.variation)."""

from __future__ import annotations

import math

import pytest

from clustersim.compute.variation import (
    SIGMA_GPU,
    expected_max_normal,
    speed_beyond_spread,
    sync_wait_fraction,
)


@pytest.mark.parametrize("n,exact", [(1, 0.0), (2, 1 / math.sqrt(math.pi)), (3, 1.5 / math.sqrt(math.pi)),
                                     (8, 1.42360), (100, 2.50759), (1000, 3.24144)])
def test_expected_maximum_of_normals_matches_the_tables(n: int, exact: float) -> None:
    # n = 2, 3 in closed form; 8, 100, 1000 from Harter's 1961 tables of normal order statistics
    assert math.isclose(expected_max_normal(n), exact, abs_tol=1e-4)


def test_grows_like_sqrt_two_log_n_and_never_shrinks() -> None:
    values = [expected_max_normal(2 ** k) for k in range(15)]
    assert all(b > a for a, b in zip(values, values[1:], strict=False))
    assert expected_max_normal(16384) < math.sqrt(2 * math.log(16384))


def test_one_gpu_waits_for_nobody_and_sigma_comes_from_the_two_sources() -> None:
    assert sync_wait_fraction(1) == 0.0
    assert math.isclose(SIGMA_GPU, (0.08 / 5.40 + 0.05 / 2.847) / 2)
    assert math.isclose(sync_wait_fraction(8), SIGMA_GPU * expected_max_normal(8))


def test_a_faulty_gpu_is_simulated_only_beyond_the_healthy_spread() -> None:
    n = 4096
    full = sync_wait_fraction(n)
    assert math.isclose(speed_beyond_spread(0.5, n), 0.5 * (1 + full))
    # its simulated slowdown times the wait every rank keeps is its whole slowness
    assert math.isclose((1 / speed_beyond_spread(0.5, n)) * (1 + full), 1 / 0.5)
    assert speed_beyond_spread(0.99, n) == 1.0 and speed_beyond_spread(1.0, n) == 1.0   # within the spread
    speeds = [speed_beyond_spread(s / 100, n) for s in range(1, 101)]
    assert all(a <= b <= 1.0 for a, b in zip(speeds, speeds[1:], strict=False))
    assert speed_beyond_spread(0.5, 1) == 0.5   # one GPU: no spread
