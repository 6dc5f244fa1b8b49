"""The engines' fast paths give the answers of the slow ones.

* Closed form: extrapolating identical steady-state periods (clustersim.engine.collapse) equals
  walking every micro-batch.
* Event engine: the hybrid (closed form where nothing contends, simpy elsewhere;
  clustersim.engine.hybrid) equals running the whole step in simpy, contention included.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from clustersim.engine.collapse import run_collapsed
from clustersim.engine.hybrid import simulate_hybrid
from clustersim.engine.recurrence import Recurrence
from clustersim.engine.selector import estimate_step, simulate_step
from clustersim.engine.timeline import CAUSES
from clustersim.errors import InputError
from clustersim.plan.step_plan import build_plan
from clustersim.scenario import load_scenario, scenario_from_dict
from tests.engine.test_properties import scenarios


def _same(a, b, rel: float = 1e-11) -> None:
    assert math.isclose(a.step_time_s, b.step_time_s, rel_tol=rel), (a.step_time_s, b.step_time_s)
    for cause in CAUSES:
        assert math.isclose(a.breakdown[cause], b.breakdown[cause], rel_tol=1e-9, abs_tol=1e-9 * a.step_time_s), cause
    assert a.critical_rank == b.critical_rank


def _gpt3(**parallel: object):
    return scenario_from_dict({"model": {"preset": "gpt3-175b"}, "cluster": {"preset": "dgx-a100", "nodes": 32},
                               "parallel": {"tp": 8, "pp": 8, "dp": 4, "micro_batch": 1, "zero_stage": 0,
                                            "recompute": "full", **parallel}})


@pytest.mark.parametrize("parallel", [
    dict(global_batch=256, schedule="1f1b"),
    dict(global_batch=256, schedule="interleaved-1f1b", virtual_stages=3),
    dict(global_batch=64, schedule="gpipe"),
    dict(global_batch=256, schedule="1f1b", zero_stage=1),
], ids=["1f1b", "interleaved", "gpipe", "zero1"])
def test_collapsed_closed_form_equals_every_micro_batch(parallel: dict) -> None:
    sc = _gpt3(**parallel)
    _same(estimate_step(sc, collapse=True), estimate_step(sc, collapse=False))
    rec = Recurrence(build_plan(sc))
    rec.issue_param_gathers()
    assert run_collapsed(rec) > 0, "the steady state was not extrapolated"


@pytest.mark.parametrize("parallel", [
    dict(global_batch=128, schedule="1f1b"),
    dict(global_batch=128, schedule="interleaved-1f1b", virtual_stages=3),
    dict(global_batch=128, schedule="1f1b", zero_stage=1),
], ids=["1f1b", "interleaved", "zero1"])
def test_hybrid_event_engine_equals_all_simpy(parallel: dict) -> None:
    sc = _gpt3(**parallel)
    fast = simulate_hybrid(build_plan(sc))
    assert fast is not None, "the hybrid fell back to simpy"
    _same(fast, simulate_step(sc, record=True, hybrid=False))


def test_zero2_reductions_in_every_backward_collapse_to_the_same_step() -> None:
    # each micro-batch's reduce-scatter queues on the data-parallel stream; where it outlasts a
    # micro-batch the backlog grows and no period repeats (nothing is jumped), else it is jumped
    for gb in (128, 512):
        sc = _gpt3(global_batch=gb, schedule="1f1b", zero_stage=2, sequence_parallel=True)
        _same(estimate_step(sc, collapse=True), estimate_step(sc, collapse=False))


def test_hybrid_leaves_zero2_over_several_micro_batches_to_simpy() -> None:
    # every backward reduces its gradients (plan.data_parallel.grads_every_micro_batch): no action
    # before the last backwards is quiet, so the closed-form stretch does not apply
    sc = _gpt3(global_batch=128, schedule="1f1b", zero_stage=2, sequence_parallel=True)
    assert simulate_hybrid(build_plan(sc)) is None
    _same(simulate_step(sc, record=False), simulate_step(sc, record=True, hybrid=False))


def test_hybrid_falls_back_where_links_are_shared() -> None:
    # PP and DP both cross nodes on one slow NIC per node: the closed-form stretch would contend
    sc = scenario_from_dict({"model": {"preset": "megatron-3.6b"},
                             "cluster": {"preset": "dgx-h100", "nodes": 4, "scale_out": "eth-10g", "nics_per_node": 1},
                             "parallel": {"tp": 8, "pp": 2, "dp": 2, "global_batch": 64, "micro_batch": 1,
                                          "zero_stage": 1}})
    _same(simulate_step(sc, record=False), simulate_step(sc, record=True, hybrid=False))


def test_shipped_gpt3_runs_hybrid_and_agrees(root) -> None:
    sc = load_scenario(root / "scenarios" / "gpt3_175b_a100x1024.yaml")
    fast = simulate_hybrid(build_plan(sc))
    assert fast is not None
    _same(fast, simulate_step(sc, record=False, hybrid=False))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(scenarios(), st.sampled_from([4, 8]))
def test_fast_paths_agree_on_random_layouts(data: dict, more: int) -> None:
    data["parallel"]["global_batch"] *= more  # enough micro-batches for a steady state
    try:
        sc = scenario_from_dict(data)
    except InputError:
        assume(False)
        return
    _same(estimate_step(sc, collapse=True), estimate_step(sc, collapse=False), rel=1e-10)
    _same(simulate_step(sc, record=False), simulate_step(sc, record=True, hybrid=False), rel=1e-10)


@pytest.mark.parametrize("parallel", [
    dict(global_batch=128, schedule="zb-h1"),
    dict(global_batch=128, schedule="zb-v"),
    dict(global_batch=128, schedule="dualpipe"),
    dict(global_batch=128, schedule="dualpipe-v"),
], ids=["zb-h1", "zb-v", "dualpipe", "dualpipe-v"])
def test_new_schedules_take_the_general_paths(parallel: dict) -> None:
    # W actions, F&B pairs and V / DualPipe stage graphs: no collapse, no hybrid (it declines),
    # the recorded and unrecorded event engine agree, and the closed form stays close
    sc = _gpt3(**parallel)
    plan = build_plan(sc)
    assert plan.general and plan.period == (0, 0)
    assert simulate_hybrid(plan) is None
    fast = simulate_step(sc, record=False)
    _same(fast, simulate_step(sc, record=True, hybrid=False))
    _same(estimate_step(sc, collapse=True), estimate_step(sc, collapse=False))
    closed = estimate_step(sc)
    assert math.isclose(closed.step_time_s, fast.step_time_s, rel_tol=0.05)


@pytest.mark.parametrize("parallel", [
    dict(global_batch=64, schedule="1f1b", zero_stage=1),
    dict(global_batch=64, schedule="interleaved-1f1b", virtual_stages=3, zero_stage=1),
    dict(global_batch=64, schedule="1f1b", zero_stage=0, overlap_grad_reduce=True),
], ids=["1f1b-zero1", "interleaved-zero1", "1f1b-ddp"])
def test_a_last_backward_run_once_for_like_stages_equals_each_rank_walking_it(monkeypatch, parallel: dict) -> None:
    # the middle stages of a pipeline run the same last backward (units and gradient buckets):
    # the closed form runs it once from time 0 and shifts it to each rank's clock
    plan = build_plan(_gpt3(**parallel))
    rec = Recurrence(plan)
    rec.issue_param_gathers()
    rec.run_to_end()
    shared = rec.finish()
    assert 0 < len(rec._final_runs) < len(plan.ranks), "no last backward was shared between ranks"
    monkeypatch.setattr(Recurrence, "share_final_backwards", False)
    walked = Recurrence(plan)
    walked.issue_param_gathers()
    walked.run_to_end()
    assert not walked._final_runs
    _same(shared, walked.finish(), rel=1e-13)
