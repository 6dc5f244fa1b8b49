"""ZeRO-2 reduces every micro-batch's gradients (clustersim.plan.data_parallel.grads_every_micro_batch):
it keeps only its shard of them, so it cannot accumulate whole ones over the micro-batches as
ZeRO-1 does. Before, ZeRO-2 took ZeRO-1's step time at any number of micro-batches."""

from __future__ import annotations

import math

import pytest

from clustersim.api import estimate, simulate
from clustersim.plan.step_plan import build_plan
from clustersim.scenario import scenario_from_dict


def _job(framework: str, zero: int, global_batch: int):
    return scenario_from_dict({"framework": framework, "model": {"preset": "llama3-8b", "seq_len": 4096},
                               "cluster": {"preset": "dgx-h100", "nodes": 1},
                               "parallel": {"tp": 1, "pp": 1, "dp": 8, "zero_stage": zero, "micro_batch": 1,
                                            "global_batch": global_batch}})


@pytest.mark.parametrize("framework", ["megatron-core", "deepspeed"])   # torchtitan has no ZeRO-2
def test_zero2_pays_a_reduction_per_micro_batch(framework: str) -> None:
    one_mb = [estimate(_job(framework, z, 8)).step_time_s for z in (1, 2)]
    assert one_mb[0] == one_mb[1]                # one micro-batch: one reduction either way
    z1, z2 = (_job(framework, z, 32) for z in (1, 2))
    assert estimate(z2).step_time_s > estimate(z1).step_time_s
    for sc in (z1, z2):                          # one node, nothing else on the links: the engines agree
        assert math.isclose(simulate(sc).step_time_s, estimate(sc).step_time_s, rel_tol=1e-9)


def test_deepspeed_zero2_waits_for_each_reduction() -> None:
    """DeepSpeed reduces on the compute stream unless overlap_comm is set (its default here): each
    of the 4 micro-batches waits for its gradients' reduce-scatter, and the step for the parameters'
    all-gather: the data-parallel wait is 4 reductions and 1 gather, all exposed."""
    sc = _job("deepspeed", 2, 32)
    plan = build_plan(sc)
    reduce_s = sum(p.time_s for items in plan.dp.grad_buckets.values() for _, p in items)
    gather_s = sum(p.time_s for items in plan.dp.after_optimizer.values() for _, p in items)
    assert plan.dp.every_backward and plan.dp.blocking_reduce and reduce_s > 0 and gather_s > 0
    assert math.isclose(estimate(sc).breakdown["dp_comm"], 4 * reduce_s + gather_s, rel_tol=1e-9)
    assert math.isclose(simulate(sc).breakdown["dp_comm"], 4 * reduce_s + gather_s, rel_tol=1e-9)
