"""The sweep's two-level bound and shared unit-time classes are exact.

* level 0 (each unit's kernels alone) is at most level 1 (the compiled units), unit by unit and
  layout by layout, and that at most level 2 (the MoE data-parallel stream term), so each is a
  bound on the closed form too;
* a MoE class keyed by its group shapes instead of dp has the unit times of every layout in it;
* the branch and bound with lazy refinement evaluates in closed form exactly the layouts that the
  second level everywhere evaluates, so the ranking is the same.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clustersim.api import SWEEP_EVALUATORS
from clustersim.plan.compiled_unit import compile_unit
from clustersim.plan.stage_work import build_step_work
from clustersim.scenario import load_scenario
from clustersim.sweep.evaluate import COL, KEY_FIELDS, SweepSpec
from clustersim.sweep.executors import SerialExecutor
from clustersim.sweep.runner import run_sweep, sweep_spec
from clustersim.sweep.screen import Screen, compiled_bounds, exact_bounds, kernel_screen_shape, screen_shape
from clustersim.sweep.space import SearchSpace, layout_from_key, micro_batch_sizes, shape_layouts, shapes
from clustersim.sweep.unit_times import class_dp_key, class_scenario, compute_s, lower_unit_times, unit_times
from tests.sweep.test_screen import SCENARIOS

MOE = ["model.preset=mixtral-8x22b", "model.layers=4", "model.hidden=1024", "model.heads=8", "model.kv_heads=8",
       "model.vocab=2000", "model.seq_len=1024", "model.ffn_hidden=2048",
       "model.moe={experts: 8, top_k: 2, expert_ffn_hidden: 1024}",
       "cluster.preset=dgx-h100", "cluster.nodes=1", "parallel.tp=2", "parallel.pp=2", "parallel.dp=2",
       "parallel.ep=2", "parallel.sequence_parallel=true", "parallel.global_batch=8"]
# on two nodes, EP groups of different dp sit alike once a stage fills a node
MOE2 = [o for o in MOE if not o.startswith(("cluster.nodes", "parallel.dp"))] + ["cluster.nodes=2", "parallel.dp=4"]
DENSE = ["model.preset=llama2-7b", "model.layers=8", "cluster.preset=dgx-h100", "cluster.nodes=2", "parallel.tp=2",
         "parallel.pp=2", "parallel.dp=4", "parallel.global_batch=16"]


@functools.cache
def _scenario(which: str):
    if which.startswith("screen"):  # the ZeRO-3 flavours of tests/sweep/test_screen.py (backward re-gathers or none)
        return load_scenario(None, SCENARIOS[int(which[6:])])
    return load_scenario(None, {"moe": MOE, "moe2": MOE2, "dense": DENSE}[which])


@functools.cache
def _layouts(which: str) -> tuple:
    s = _scenario(which)
    return tuple(p for x in shapes(s.model, s.cluster, s.parallel.global_batch)
                 for p in shape_layouts(s.model, x, s.parallel))


def screen_exact(base, shape, micro_batches, space):
    """A screener with the second-level bound everywhere (the sweep before lazy refinement)."""
    return screen_shape(base, shape, micro_batches, space, exact=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from(["moe", "moe2", "dense"]), i=st.integers(min_value=0, max_value=10**9))
def test_first_level_is_below_the_second(which, i):
    """Per unit: kernels alone <= the compiled unit; per class and per layout: level 0 <= 1 <= 2."""
    s = _scenario(which)
    layouts = _layouts(which)
    p = layouts[i % len(layouts)]
    rep = class_scenario(s, p)
    stage = build_step_work(rep).stages[0]
    for w in {id(w): w for w in (*stage.forward, *stage.backward)}.values():
        assert compute_s(w) <= compile_unit(rep, w).time_s * (1 + 1e-12)
    lo, ex = Screen(s).classes.lower_times(p), unit_times(rep)
    assert lower_unit_times(rep) == lo  # the shortened model of lower_times changes nothing
    assert Screen(s).classes.unit_times(p) == ex  # nor that of the compiled units
    for f in ("layer_f_s", "layer_b_s", "first_f_s", "first_b_s", "last_f_s", "last_b_s"):
        assert getattr(lo, f) <= getattr(ex, f) * (1 + 1e-12)
    for f in ("layer_params", "first_params", "last_params", "p2p_bytes", "layer_all_params", "moe_all_params"):
        assert getattr(lo, f) == getattr(ex, f)
    sc = Screen(s)
    prof = sc.profile(p)
    # level 0 (kernels alone, the screen's) <= 1 (compiled units, ZeRO-3 gathers) <= 2 (MoE stream term)
    assert sc.step_bound_s(p, prof, exact=False) <= sc.step_bound_s(p, prof, level=1) <= sc.step_bound_s(p, prof)


def test_moe_classes_that_share_a_key_share_unit_times():
    """Expert-parallel layouts with the same (tp, cp, ep, etp, micro-batch, sp, recompute) and
    group shapes but another dp have identical unit times (class_dp_key); the key is not vacuous:
    some classes of different dp share it."""
    s = _scenario("moe2")
    groups: dict[tuple, dict[int, object]] = {}
    for p in _layouts("moe2"):
        if p.ep > 1:
            key = (p.tp, p.cp, p.ep, p.etp, p.micro_batch, p.sequence_parallel, p.recompute, class_dp_key(s, p))
            groups.setdefault(key, {}).setdefault(p.dp, p)
    shared = [g for g in groups.values() if len(g) > 1]
    assert shared
    for g in shared[::max(1, len(shared) // 12)]:
        dps = sorted(g)
        assert unit_times(class_scenario(s, g[dps[0]])) == unit_times(class_scenario(s, g[dps[-1]]))


@pytest.mark.parametrize("which", ["moe", "dense", "screen4", "screen5"])
def test_refined_bounds_equal_the_exact_screen(which):
    """Same memory; first level <= second; ``exact_bounds`` and ``step_bound_s`` give the screen's
    numbers to the bit."""
    s = _scenario(which)
    gb = s.parallel.global_batch
    for x in shapes(s.model, s.cluster, gb)[:6]:
        mbs = tuple(micro_batch_sizes(x, gb))
        ex = screen_shape(s, x, mbs, SearchSpace(), exact=True)
        first = screen_shape(s, x, mbs, SearchSpace())  # the sweep's screen: level 1
        lo = screen_shape(s, x, mbs, SearchSpace(), level=0)
        for other in (first, lo):  # memory the same
            np.testing.assert_array_equal(np.delete(ex, 15, axis=1), np.delete(other, 15, axis=1))
        assert (lo[:, 15] <= first[:, 15]).all() and (first[:, 15] <= ex[:, 15]).all()
        keys = tuple(tuple(int(v) for v in row[:13]) for row in ex)
        np.testing.assert_array_equal(exact_bounds(s, keys), ex[:, 15])
        np.testing.assert_array_equal(compiled_bounds(s, keys), first[:, 15])
        sc = Screen(s)
        for key, row in zip(keys[::7], lo[::7], strict=False):
            p = layout_from_key(key, s.parallel)
            assert sc.step_bound_s(p, sc.profile(p), exact=False) == row[15]


@pytest.mark.parametrize("screener", [screen_shape, kernel_screen_shape])
@pytest.mark.parametrize("which,keep", [("moe", 3), ("dense", 5)])
def test_lazy_branch_and_bound_evaluates_what_the_exact_one_does(which, keep, screener, monkeypatch):
    """Same closed-form evaluations, same ranking, with the screen's level (1, the compiled
    units; or 0, kernels alone, raised to 1 first) refined lazily."""
    import clustersim.sweep.runner as runner
    # the ZeRO-2 dominance cut (clustersim.sweep.dominance) needs clustersim's own screen, which
    # this test's exact screener is not: off for both, so that only the bounds differ
    monkeypatch.setattr(runner, "slower_zero2", lambda table, template, scale: np.zeros(table.shape[0], bool))
    s = _scenario(which)
    # without the third level (tests/sweep/test_replay.py), which prunes more
    spec = replace(sweep_spec(s, evaluators=SWEEP_EVALUATORS), replayer=None, screener=screener)
    lazy = run_sweep(spec, SerialExecutor(), rerank=0, keep=keep)
    assert lazy.spec.refine_levels == {(screen_shape, "moe"): (exact_bounds,), (screen_shape, "dense"): (),
                                       (kernel_screen_shape, "moe"): (compiled_bounds, exact_bounds),
                                       (kernel_screen_shape, "dense"): (compiled_bounds,)}[(screener, which)]
    exact = run_sweep(SweepSpec(lazy.spec.scenario, lazy.spec.space, screener=screen_exact,
                                evaluators=SWEEP_EVALUATORS),
                      SerialExecutor(), rerank=0, keep=keep)
    n = len(KEY_FIELDS)

    def estimated(r):
        t = r.table
        rows = t[~np.isnan(t[:, COL["step_time_s"]])]
        return {tuple(row[:n]): tuple(row[COL["step_time_s"]:]) for row in rows}

    assert estimated(lazy) == estimated(exact)
    assert lazy.top(keep) == exact.top(keep)
    # the lazy sweep refined only part of the space: unrefined bounds stay at the first level, below
    assert lazy.estimated < lazy.fitting
    by_key = {tuple(row[:n]): row[COL["bound_step_time_s"]] for row in exact.table}
    assert all(row[COL["bound_step_time_s"]] <= by_key[tuple(row[:n])] for row in lazy.table)
    assert replace(lazy.spec, refiner=None).lazy_bounds is False


@pytest.mark.parametrize("which", ["moe", "dense", "screen4", "screen5"])
def test_vectorized_memory_equals_the_one_by_one_screen(which):
    """``rows.VectorRows`` (all schedules and offload options of a layout at once, on arrays) gives
    the rows of ``Screen.worst`` layout by layout, to the byte."""
    s = _scenario(which)
    gb = s.parallel.global_batch
    for x in shapes(s.model, s.cluster, gb)[::3]:
        mbs = tuple(micro_batch_sizes(x, gb))
        np.testing.assert_array_equal(screen_shape(s, x, mbs, SearchSpace()),
                                      screen_shape(s, x, mbs, SearchSpace(), vectorized=False))
