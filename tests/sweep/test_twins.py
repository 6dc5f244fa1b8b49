"""ZeRO-1 / ZeRO-2 twins share their closed-form step time (``SweepSpec.time_twins``) where the
ZeRO-2 one reduces its gradients once (one micro-batch): the branch and bound runs one of each
such pair and gives the other its time, which must change nothing."""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clustersim import api
from clustersim.api import SWEEP_EVALUATORS
from clustersim.memory.report import VERDICTS
from clustersim.plan.data_parallel import grads_every_micro_batch
from clustersim.scenario import load_scenario
from clustersim.sweep.evaluate import COL, estimate_keys
from clustersim.sweep.executors import SerialExecutor
from clustersim.sweep.runner import run_sweep, sweep_spec
from clustersim.sweep.screen import Screen
from clustersim.sweep.space import shape_layouts, shapes
from tests.sweep.test_screen import DP_SCENARIOS, SCENARIOS

CASES = {**{f"screen{i}": o for i, o in enumerate(SCENARIOS)}, **{f"dp-{k}": o for k, o in DP_SCENARIOS.items()}}


@functools.cache
def _ones(which: str):
    s = load_scenario(None, CASES[which])
    return s, tuple(p for x in shapes(s.model, s.cluster, s.parallel.global_batch)
                    for p in shape_layouts(s.model, x, s.parallel) if p.zero_stage == 1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from(sorted(CASES)), i=st.integers(min_value=0, max_value=10**9))
def test_zero2_twins_take_zero1s_time_unless_they_reduce_every_micro_batch(which, i):
    """On random ZeRO-1 layouts of dense and MoE models (every schedule, offload, EP) the closed
    form gives its ZeRO-2 twin the same step time, tokens/s and MFU, bit for bit, and the screen
    gives each twin the closed form's own memory."""
    s, ones = _ones(which)
    p = ones[i % len(ones)]
    one = api.estimate(replace(s, parallel=p))
    two = api.estimate(replace(s, parallel=replace(p, zero_stage=2)))
    if grads_every_micro_batch(replace(p, zero_stage=2)):   # ZeRO-2 reduces after every backward: slower
        assert two.step_time_s >= one.step_time_s
    else:
        assert (one.step_time_s, one.tokens_per_s, one.mfu) == (two.step_time_s, two.tokens_per_s, two.mfu)
    sc = Screen(s)
    q = replace(p, zero_stage=2)
    verdict, peak = sc.worst(q, sc.profile(q))
    assert (VERDICTS[verdict], peak) == (two.memory.verdict, two.memory.peak_bytes_per_gpu)


def test_branch_and_bound_with_twins_ranks_as_without(monkeypatch):
    """Sharing the twins' time gives the same table, row for row, with fewer closed-form runs."""
    import clustersim.sweep.bnb as bnb
    import clustersim.sweep.runner as runner

    runs = []

    def counted(spec, keys):
        runs.append(len(keys))
        return estimate_keys(spec, keys)

    monkeypatch.setattr(bnb, "estimate_keys", counted)
    monkeypatch.setattr(runner, "estimate_keys", counted)  # the scenario's own layout
    s = load_scenario(None, DP_SCENARIOS["mixtral"])
    spec = sweep_spec(s, evaluators=SWEEP_EVALUATORS)
    assert spec.time_twins
    shared = run_sweep(spec, SerialExecutor(), rerank=0, keep=6)
    shared_runs, runs[:] = sum(runs), []
    alone = run_sweep(replace(spec, share_twins=False), SerialExecutor(), rerank=0, keep=6)
    assert np.array_equal(shared.table, alone.table, equal_nan=True)
    assert shared.top(6) == alone.top(6)
    evaluated_twos = ~np.isnan(shared.table[:, COL["step_time_s"]]) & (shared.table[:, COL["zero_stage"]] == 2)
    assert evaluated_twos.any()
    assert shared_runs < sum(runs) == alone.estimated
    assert replace(spec, evaluators=replace(spec.evaluators, zero_twins_share_time=False)).time_twins is False
