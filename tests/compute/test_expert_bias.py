"""Megatron-Core's fc2 bias of gpt-oss's routed experts, added expert by expert (model.moe.expert_bias,
clustersim.compute.expert_bias): its kernels per framework and dispatcher, in the step's plan, and
against the ops torch dispatches for TEGroupedMLP._apply_bias."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clustersim.compute.expert_bias import bias_bwd_bytes_kernels, bias_fwd_bytes_kernels
from clustersim.compute.layer import transformer_layer_cost
from clustersim.parallel.layout import ParallelLayout
from clustersim.plan.stage_work import build_step_work
from clustersim.scenario import load_scenario
from tests.conftest import preset

OSS = preset("gpt-oss-120b")
EP8 = ParallelLayout(ep=8, expert_tp=1)
LOCAL = 128 // 8


def _names(p) -> list[str]:
    return [op.name for op in p.compute_ops]


def _op(p, name):
    return next(op for op in p.compute_ops if op.name == name)


@pytest.mark.parametrize("dispatcher,fwd_k,bwd_k", [
    ("alltoall", 2 * LOCAL + 1, 4 * LOCAL + 2),    # bf16 routing probabilities: no cast
    ("flex", 2 * LOCAL + 2, 6 * LOCAL + 3),        # DeepEP / HybridEP hand fp32 probabilities: fp32 sum, casts
])
def test_megatron_pays_the_bias_loop_per_local_expert(h100, dispatcher, fwd_k, bwd_k) -> None:
    model = replace(OSS, moe_token_dispatcher=dispatcher)
    lc = transformer_layer_cost(model, EP8, h100, "bf16", moe=True, framework="megatron-core")
    fwd, bwd = _op(lc.forward, "expert_fc2_bias"), _op(lc.backward, "expert_fc2_bias_bwd")
    assert (fwd.kernels, bwd.kernels) == (fwd_k, bwd_k)
    names = _names(lc.forward)
    assert names.index("expert_fc2_bias") == names.index("expert_fc2") + 1
    assert _names(lc.backward).index("expert_fc2_bias_bwd") < _names(lc.backward).index("expert_fc2_dgrad")
    without = transformer_layer_cost(replace(model, moe_expert_bias=False), EP8, h100, "bf16", moe=True)
    assert lc.forward.compute_time_s == pytest.approx(without.forward.compute_time_s + fwd.time_s)
    assert lc.backward.compute_time_s == pytest.approx(without.backward.compute_time_s + bwd.time_s)


def test_the_loop_is_not_recomputed_by_moe_act(h100) -> None:
    lay = replace(EP8, recompute="selective", recompute_modules=("moe_act",))
    lc = transformer_layer_cost(OSS, lay, h100, "bf16", moe=True)
    assert "expert_fc2_bias" not in _names(lc.recompute)


@pytest.mark.parametrize("framework,elementwise", [("torchtitan", "eager"), ("deepspeed", "fused")])
def test_other_frameworks_do_not_run_megatrons_loop(h100, framework, elementwise) -> None:
    lc = transformer_layer_cost(OSS, EP8, h100, "bf16", moe=True, elementwise=elementwise, framework=framework)
    assert not [n for p in (lc.forward, lc.backward) for n in _names(p) if "fc2_bias" in n]


def test_models_without_expert_biases_do_not_pay_it(h100) -> None:
    lc = transformer_layer_cost(preset("qwen3-30b-a3b"), EP8, h100, "bf16", moe=True)
    assert not [n for p in (lc.forward, lc.backward) for n in _names(p) if "fc2_bias" in n]


def test_the_plan_prices_it_for_megatron_and_not_for_torchtitan() -> None:
    sets = ["model.preset=gpt-oss-20b", "model.layers=2", "cluster.nodes=1", "parallel.tp=1", "parallel.pp=1",
            "parallel.ep=8", "parallel.dp=8", "parallel.global_batch=8"]
    kernels = {}
    for fw in ("megatron-core", "torchtitan"):
        stage = build_step_work(load_scenario(None, [*sets, f"framework={fw}", "parallel.zero_stage=0"])).stages[0]
        ops = [op.name for w in stage.forward for op in w]
        kernels[fw] = "expert_fc2_bias" in ops
    assert kernels == {"megatron-core": True, "torchtitan": False}


# -- the counts against what torch dispatches -----------------------------------------------------

H = 512
TOKENS = [40, 24, 64]


@pytest.mark.parametrize("probs_dtype", ["bfloat16", "float32"])
def test_the_counts_are_the_kernels_torch_dispatches(probs_dtype: str) -> None:
    """TEGroupedMLP._apply_bias (megatron/core/transformer/moe/experts.py, Megatron-LM 2edffadb
    lines 250-268); the bias and probability vectors (under 2% of the bytes here) are left out of
    clustersim's count."""
    from tests.compute.dispatch_trace import torch, trace
    t = torch.randn(sum(TOKENS), H, dtype=torch.bfloat16, requires_grad=True)
    biases = [torch.randn(H, dtype=torch.bfloat16, requires_grad=True) for _ in TOKENS]
    probs = torch.rand(sum(TOKENS), 1, dtype=getattr(torch, probs_dtype), requires_grad=True)
    out: list = []

    def apply_bias():
        shape = t.shape
        out.append(torch.cat([a + b * p for a, b, p in zip(torch.split(t.view(-1, shape[-1]), TOKENS), biases,
                                                          torch.split(probs, TOKENS), strict=True)])
                   .view(shape).to(t.dtype))

    t_fwd = trace(apply_bias)
    grad = torch.ones_like(out[0])
    t_bwd = trace(lambda: out[0].backward(grad))
    q = 4 if probs_dtype == "float32" else 2
    fwd_b, fwd_k = bias_fwd_bytes_kernels(sum(TOKENS) * H, len(TOKENS), 2, q)
    bwd_b, bwd_k = bias_bwd_bytes_kernels(sum(TOKENS) * H, len(TOKENS), 2, q)
    assert t_fwd.kernels == fwd_k and t_fwd.bytes == pytest.approx(fwd_b, rel=0.02), t_fwd.names
    assert t_bwd.kernels == bwd_k and t_bwd.bytes == pytest.approx(bwd_b, rel=0.02), t_bwd.names
