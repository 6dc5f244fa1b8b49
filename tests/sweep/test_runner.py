"""Sweeps end to end on small cases: branch and bound equals brute force, executors agree,
everything ranked fits, ties are ordered by the layout key."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from clustersim import api
from clustersim.scenario import load_scenario
from clustersim.sweep.evaluate import COL, KEY_FIELDS, SweepSpec
from clustersim.sweep.executors import LocalExecutor, SerialExecutor
from clustersim.sweep.rank import pareto_front
from clustersim.sweep.runner import run_sweep, sweep_spec
from clustersim.sweep.space import enumerate_layouts, layout_key

SMALL = ["model.preset=megatron-1.7b", "cluster.preset=dgx-a100", "cluster.nodes=1", "parallel.tp=2",
         "parallel.pp=2", "parallel.dp=2", "parallel.global_batch=8", "parallel.zero_stage=1"]
TOY = dict(estimator="tests.sweep.toy_model:estimate", simulator="tests.sweep.toy_model:simulate",
           screener="tests.sweep.toy_model:screen")


@pytest.fixture(scope="module")
def small():
    return load_scenario(None, SMALL)


@pytest.fixture(scope="module")
def small_result(small):
    return run_sweep(sweep_spec(small), SerialExecutor(), rerank=3, keep=5)


@pytest.fixture(scope="module")
def brute_force(small):
    """(tokens/s, peak bytes, key) of every layout that fits, by the closed form."""
    rows = []
    for p in enumerate_layouts(small.model, small.cluster, small.parallel):
        r = api.estimate(replace(small, parallel=p))
        if r.memory.fits:
            rows.append((r.tokens_per_s, r.memory.peak_bytes_per_gpu, layout_key(p)))
    return rows


def test_branch_and_bound_finds_the_brute_force_best(small_result, brute_force):
    """Estimate every layout that fits: the sweep's closed-form top 5 is the true top 5."""
    truth = [k for _, _, k in sorted(brute_force, key=lambda r: (-r[0], r[2]))[:5]]
    t = small_result.table
    est = np.flatnonzero((t[:, COL["fits"]] == 1) & ~np.isnan(t[:, COL["step_time_s"]]))
    order = sorted(est, key=lambda i: (-t[i, COL["tokens_per_s"]], tuple(t[i, :len(KEY_FIELDS)])))
    got = [tuple(int(v) for v in t[i, :len(KEY_FIELDS)]) for i in order[:5]]
    assert got == truth
    assert small_result.estimated < small_result.fitting  # the bound saved work


def test_pareto_mode_finds_the_brute_force_front(small, brute_force):
    front, best = [], -1.0
    for tps, _, key in sorted(brute_force, key=lambda r: (r[1], -r[0], r[2])):
        if tps > best:
            front.append(key)
            best = tps
    r = run_sweep(sweep_spec(small), SerialExecutor(), rerank=0, keep=1, pareto=True)
    got = [tuple(int(v) for v in r.table[i, :len(KEY_FIELDS)]) for i in r.pareto()]
    assert got == front


def test_pareto_front_by_hand():
    # rows: key (13 fields), fits, peak, bound, verdict, step, tokens/s, mfu
    def row(tp, peak, tps):
        return [tp, 1, 1, 1, 1, 0, 1, 0, 0, 0, 1, 1, 0, 1.0, peak, 0.0, 0.0, 1.0, tps, 0.5]
    t = np.array([row(1, 10, 5.0), row(2, 20, 4.0), row(4, 20, 7.0), row(8, 30, 7.0), row(16, 40, 9.0)])
    # (10, 5) is front; (20, 4) dominated; (20, 7) front; (30, 7) not faster; (40, 9) front
    assert list(pareto_front(t)) == [0, 2, 4]


def test_every_ranked_layout_fits_and_top_is_simulated(small, small_result):
    top = small_result.top(3)
    assert [row["engine"] for row in top] == ["simulate"] * 3
    for row in top:
        assert row["peak_bytes_per_gpu"] <= small.cluster.gpu.hbm_capacity_bytes
    tps = [row["tokens_per_s"] for row in top]
    assert tps == sorted(tps, reverse=True)
    ranked = small_result.ranked_mask()
    assert (small_result.table[ranked, COL["peak_bytes_per_gpu"]] <= small.cluster.gpu.hbm_capacity_bytes).all()


def test_best_is_at_least_the_scenario_layout(small, small_result):
    """The scenario's own layout is re-ranked too, so the best simulated layout is never worse."""
    own = api.simulate(small).tokens_per_s
    assert small_result.top(1)[0]["tokens_per_s"] >= own * (1 - 1e-12)


def _toy_spec():
    s = load_scenario(None, ["model.layers=8", "model.hidden=512", "model.heads=8", "model.vocab=1000",
                             "model.seq_len=1024", "cluster.preset=dgx-a100", "cluster.nodes=2", "parallel.tp=2",
                             "parallel.pp=2", "parallel.dp=4", "parallel.global_batch=32"])
    return SweepSpec(s, **TOY)


def test_ties_rank_by_layout_key():
    """The toy model ignores ZeRO and SP, so layouts differing only there tie: smaller key first."""
    r = run_sweep(_toy_spec(), SerialExecutor(), rerank=0, keep=50)
    t = r.table[r.ranked_mask() & np.isnan(r.sim[:, 0])]  # the closed-form part of the ranking
    tps = t[:, COL["tokens_per_s"]]
    keys = [tuple(row[:len(KEY_FIELDS)]) for row in t]
    for i in range(len(t) - 1):
        assert tps[i] > tps[i + 1] or (tps[i] == tps[i + 1] and keys[i] < keys[i + 1])


def test_local_pool_gives_identical_results():
    spec = _toy_spec()
    serial = run_sweep(spec, SerialExecutor(), rerank=2, keep=5)
    pool = LocalExecutor(2)
    try:
        local = run_sweep(spec, pool, rerank=2, keep=5)
    finally:
        pool.close()
    np.testing.assert_array_equal(serial.table, local.table)
    np.testing.assert_array_equal(serial.sim, local.sim)


def test_dask_local_cluster_gives_the_same_ranking(small, small_result):
    pytest.importorskip("distributed")
    from clustersim.sweep.executors import DaskExecutor

    ex = DaskExecutor(workers=2)
    try:
        dask = run_sweep(sweep_spec(small), ex, rerank=3, keep=5)
    finally:
        ex.close()
    np.testing.assert_array_equal(small_result.table, dask.table)
    np.testing.assert_array_equal(small_result.sim, dask.sim)
    assert small_result.top(5) == dask.top(5)


@pytest.mark.parametrize("seed", range(5))
def test_key_codes_order_like_the_keys(seed):
    """``rank.key_codes`` packs a layout key into one int64 that sorts like the key's fields one
    after another (the sweep's tie-breaks), and gives each row's rank among the keys where the
    fields do not fit."""
    from clustersim.sweep.evaluate import COLUMNS
    from clustersim.sweep.rank import key_codes

    rng = np.random.default_rng(seed)
    n = 5000
    table = np.full((n, len(COLUMNS)), np.nan)
    highs = [8, 32, 64, 1024, 8, 8, 256, 4, 3, 2, 7, 56, 2]
    for j, f in enumerate(KEY_FIELDS):
        table[:, COL[f]] = rng.integers(0, highs[j], n)
    table[n // 2:, :] = table[: n - n // 2, :]  # equal keys too
    by_fields = np.lexsort([table[:, COL[f]] for f in reversed(KEY_FIELDS)])
    codes = key_codes(table)
    assert np.array_equal(np.argsort(codes, kind="stable"), by_fields)
    assert codes.max() >= n  # packed bits, not ranks
    table[0, COL["dp"]] = 2.0**40  # too wide to pack with the rest: ranks among the keys instead
    by_fields = np.lexsort([table[:, COL[f]] for f in reversed(KEY_FIELDS)])
    codes = key_codes(table)
    assert np.array_equal(np.argsort(codes, kind="stable"), by_fields)
    assert codes.max() < n
