"""DeepSpeed ZeRO-3's reduce bucket is the one bucket rule (frameworks.grad_bucket_params):
``parallel.dp_bucket_params`` when set (what ``clustersim import deepspeed-json`` writes from
reduce_bucket_size), else DeepSpeed's 5e8 elements. It decides how many reduce-scatters a
micro-batch runs, and DeepSpeed holds a flat buffer of that many elements in the communication
dtype (deepspeed/runtime/zero/stage3.py, ``bucket.buffer = torch.empty(self.reduce_bucket_size)``)."""

from __future__ import annotations

import pytest

from clustersim.api import estimate, simulate
from clustersim.memory.buffers import buffer_bytes
from clustersim.plan.data_parallel import dp_plan
from clustersim.plan.dp_rules import bucket_params, grad_reduce_bytes
from clustersim.plan.stage_work import build_step_work
from clustersim.scenario import scenario_from_dict

SMALL, LARGE = 16_777_216, 2_000_000_000   # below one Llama-2-7B layer (202M); ten layers


def make(bucket: int = 0, framework: str = "deepspeed", fsdp_version: int | None = None):
    parallel = {"dp": 32, "micro_batch": 1, "global_batch": 256, "zero_stage": 3, "recompute": "full",
                "overlap_grad_reduce": False, "dp_bucket_params": bucket}
    if fsdp_version:
        parallel["fsdp"] = {"version": fsdp_version}
    return scenario_from_dict({"framework": framework, "model": {"preset": "llama2-7b", "seq_len": 4096},
                               "cluster": {"preset": "dgx-a100", "nodes": 4}, "parallel": parallel,
                               "training": {"dtype": "bf16"}})


def reduce_scatters(sc) -> int:
    z3 = dp_plan(sc, build_step_work(sc)).zero3
    assert z3 is not None
    return sum(1 for items in z3.reduce.values() for item in items if item.plan.op == "reduce_scatter")


def test_deepspeed_zero3_bucket_is_the_one_rule() -> None:
    assert bucket_params(make(SMALL)) == SMALL                          # the scenario's (the config's) own
    # Megatron-LM 2021 runs ZeRO-3 in DeepSpeed: reduce_bucket_size's 5e8, not Megatron's max(40M, 1M x dp)
    assert bucket_params(make(0, "megatron-legacy")) == 500_000_000


def test_the_bucket_decides_the_reduce_scatters() -> None:
    # 32 layers, the embedding and the head: one bucket per unit below a layer's size (202M), fewer
    # and larger ones at the default 5e8 elements, fewer still at 2e9
    assert reduce_scatters(make(SMALL)) == 34
    assert reduce_scatters(make(LARGE)) < reduce_scatters(make(0)) < reduce_scatters(make(SMALL))


@pytest.mark.parametrize("engine", [estimate, simulate])
def test_blocking_reduce_scatters_cost_their_latency(engine) -> None:
    """overlap_comm false: every reduce-scatter blocks the compute stream, so more of them cost more."""
    small, default, large = (engine(make(b)).step_time_s for b in (SMALL, 0, LARGE))
    assert small > default > large


def test_memory_holds_deepspeeds_flat_bucket() -> None:
    held = {}
    for b in (SMALL, 0, LARGE):
        sc = make(b)
        held[b] = buffer_bytes(sc.model, sc.parallel, sc.training.dtype, sc.model.layers, True, True,
                               sc.framework)[0]
    sc = make()
    assert held[LARGE] - held[SMALL] == pytest.approx((LARGE - SMALL) * grad_reduce_bytes(sc))
    assert held[0] - held[SMALL] == pytest.approx((500_000_000 - SMALL) * grad_reduce_bytes(sc))
    report = {b: estimate(make(b)).memory.comm_buffers for b in (SMALL, LARGE)}
    assert report[LARGE] - report[SMALL] == pytest.approx((LARGE - SMALL) * grad_reduce_bytes(sc))
    # torch FSDP holds no such buffer
    fsdp = [estimate(make(b, "torchtitan", 2)).memory.comm_buffers for b in (SMALL, LARGE)]
    assert fsdp[0] == fsdp[1]
