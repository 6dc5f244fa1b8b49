"""The optimizer step's time reads the shard that the memory report holds (clustersim.plan.optimizer_step)."""

from __future__ import annotations

import math

import pytest

from clustersim.compute.optimizer import adam_kernel_s, grad_buffer_time_s
from clustersim.memory.report import states
from clustersim.plan.optimizer_step import grad_norm_all_reduce_s
from clustersim.plan.stage_work import build_step_work
from clustersim.plan.step_plan import build_plan
from clustersim.scenario import scenario_from_dict


def _scenario(model: str, parallel: dict, dtype: str = "bf16", framework: str | None = None, **training):
    raw = {"model": {"preset": model}, "cluster": {"preset": "dgx-h100", "nodes": 1},
           "parallel": {"pp": 1, "global_batch": 16, **parallel}, "training": {"dtype": dtype, **training}}
    if framework:
        raw["framework"] = framework
    return scenario_from_dict(raw)


def _adam_s(sc) -> float:
    """The Adam kernel's part of rank 0's optimizer step: the step less the framework's pass over
    the whole gradient buffer and the gradient norm's all-reduce."""
    plan = build_plan(sc)
    par = sc.parallel
    params = build_step_work(sc).params_per_rank[0]
    buffer = sc.framework.grad_buffer_bytes_per_param if par.zero_stage <= 2 and par.dp * par.cp > 1 else 0
    return (plan.ranks[0].tail.optimizer_time_s - grad_buffer_time_s(params, buffer, sc.cluster.gpu)
            - grad_norm_all_reduce_s(sc))


@pytest.mark.parametrize("model,parallel", [
    # dp 8 = ep 8: the expert-data-parallel group is one rank, so each GPU steps all its experts'
    # states (the memory holds them unsharded); the step sharded them over dp 8 (5.3 ms for 10.0)
    ("mixtral-8x7b", {"tp": 1, "dp": 8, "ep": 8, "zero_stage": 1, "sequence_parallel": False}),
    ("mixtral-8x7b", {"tp": 2, "dp": 4, "ep": 4, "expert_tp": 1, "zero_stage": 1}),
    ("llama3-8b", {"tp": 2, "dp": 4, "zero_stage": 1}),
])
def test_adam_steps_the_shard_the_memory_holds(model, parallel) -> None:
    sc = _scenario(model, parallel)
    par, m = sc.parallel, sc.model
    _, _, optimizer_bytes = states(m, par, "bf16", m.layers, True, True, sc.framework)
    shard = optimizer_bytes / 12   # fp32 master + Adam m, v per parameter
    # megatron-core's pass over the whole buffer zeroes it: Adam's 38 B less the 4 of zeroing
    assert math.isclose(_adam_s(sc), adam_kernel_s(shard * 34, sc.cluster.gpu), rel_tol=1e-6)


def test_fp32_and_zero_0_adam_bytes() -> None:
    # fp32 training: no master or 16-bit copy, 36 B (was priced at bf16's 38); the buffer pass zeroes: 32
    sc = _scenario("llama3-8b", {"tp": 8, "dp": 1, "zero_stage": 0}, dtype="fp32")
    params = sc.model.total_params() / 8
    assert math.isclose(_adam_s(sc), adam_kernel_s(params * 36, sc.cluster.gpu), rel_tol=1e-3)
    # ZeRO 0 over dp 2: the whole buffer's pass zeroes it, Adam over all of the rank's parameters at 34 B
    sc = _scenario("llama3-8b", {"tp": 4, "dp": 2, "zero_stage": 0})
    params = sc.model.total_params() / 4
    assert math.isclose(_adam_s(sc), adam_kernel_s(params * 34, sc.cluster.gpu), rel_tol=1e-3)


def test_bf16_moments_stream_half_the_moment_bytes() -> None:
    # Adam's m and v in bf16 (training.adam_moments): each read and written at 2 bytes, 8 B fewer
    # than fp32's 16 (the step ignored their dtype: 34 B for both, 0.0387 s on the default scenario)
    parallel = {"tp": 4, "dp": 2, "zero_stage": 0}
    sc, half = _scenario("llama3-8b", parallel), _scenario("llama3-8b", parallel, adam_moments="bf16")
    params = sc.model.total_params() / 4
    assert math.isclose(_adam_s(sc), adam_kernel_s(params * 34, sc.cluster.gpu), rel_tol=1e-3)
    assert math.isclose(_adam_s(half), adam_kernel_s(params * 26, sc.cluster.gpu), rel_tol=1e-3)
