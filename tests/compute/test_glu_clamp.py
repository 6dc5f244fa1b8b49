"""The clamp of gpt-oss's SwiGLU halves (model.activation_clamp, clustersim.compute.glu_clamp): its
kernels and bytes in a MoE layer and a dense MLP, against the ops torch dispatches for the code
Megatron-Core and torchtitan run."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clustersim.compute.glu_clamp import clamp_bwd_bytes_kernels, clamp_fwd_bytes_kernels
from clustersim.compute.layer import transformer_layer_cost
from clustersim.parallel.layout import ParallelLayout
from tests.conftest import preset

OSS = preset("gpt-oss-120b")
QWEN = preset("qwen3-30b-a3b")
EP8 = ParallelLayout(ep=8, expert_tp=1)


def _op(p, name):
    return next(op for op in p.compute_ops if op.name == name)


def _kernels(p) -> int:
    return sum(op.kernels for op in p.compute_ops)


@pytest.mark.parametrize("elementwise,framework,fwd_k,bwd_k", [("fused", "megatron-core", 3, 9),
                                                               ("eager", "torchtitan", 2, 8)])
def test_the_clamp_adds_time_and_kernels_to_a_gpt_oss_moe_layer(h100, elementwise, framework, fwd_k, bwd_k) -> None:
    with_clamp = transformer_layer_cost(OSS, EP8, h100, "bf16", moe=True, elementwise=elementwise, framework=framework)
    without = transformer_layer_cost(replace(OSS, activation_clamp=0.0), EP8, h100, "bf16", moe=True,
                                     elementwise=elementwise, framework=framework)
    for part, k in (("forward", fwd_k), ("backward", bwd_k)):
        a, b = getattr(with_clamp, part), getattr(without, part)
        name = "expert_activation_clamp" + ("_bwd" if part == "backward" else "")
        op = _op(a, name)
        assert op.kernels == k and op.time_s > 0
        assert a.compute_time_s == pytest.approx(b.compute_time_s + op.time_s)
        assert _kernels(a) == _kernels(b) + k
        assert name not in {o.name for o in b.compute_ops}
    # the clamp runs on the busiest rank's token-expert pairs: 4096 tokens x top-4, 2880 wide halves
    fwd = _op(with_clamp.forward, "expert_activation_clamp")
    assert fwd.bytes_moved == clamp_fwd_bytes_kernels(4096 * 4 * 2880, 2, elementwise == "fused")[0]


def test_qwen3_moe_has_no_clamp(h100) -> None:
    assert QWEN.activation_clamp == 0.0
    lc = transformer_layer_cost(QWEN, EP8, h100, "bf16", moe=True)
    assert not [op.name for p in (lc.forward, lc.backward) for op in p.compute_ops if "clamp" in op.name]


def test_moe_act_recompute_runs_the_clamp_again(h100) -> None:
    lay = ParallelLayout(ep=8, expert_tp=1, recompute="selective", recompute_modules=("moe_act",))
    lc = transformer_layer_cost(OSS, lay, h100, "bf16", moe=True)
    names = [op.name for op in lc.recompute.compute_ops]
    assert names.index("expert_activation_clamp") == names.index("expert_activation") - 1
    full = transformer_layer_cost(OSS, replace(lay, recompute="full", recompute_modules=()), h100, "bf16", moe=True)
    assert "expert_activation_clamp" in [op.name for op in full.recompute.compute_ops]
    plain = transformer_layer_cost(OSS, replace(lay, recompute_modules=()), h100, "bf16", moe=True)
    assert "expert_activation_clamp" not in [op.name for op in plain.recompute.compute_ops]


def test_a_dense_mlp_pays_the_two_clamps_without_the_cat(h100) -> None:
    llama = replace(preset("llama3-8b"), activation_clamp=7.0)
    lc = transformer_layer_cost(llama, ParallelLayout(), h100, "bf16")
    names = [op.name for op in lc.forward.compute_ops]
    assert names.index("activation_clamp") == names.index("activation") - 1
    assert _op(lc.forward, "activation_clamp").kernels == 2
    assert _op(lc.backward, "activation_clamp_bwd").kernels == 8


# -- the counts against what torch dispatches -----------------------------------------------------

N, F, V = 64, 96, 7.0


def _megatron(x):
    """megatron/core/fusions/fused_bias_geglu.py weighted_bias_quick_geglu_impl, 2edffadb lines 423-432."""
    x_glu, x_linear = x.chunk(2, -1)
    return _torch().cat((x_glu.clamp(min=None, max=V), x_linear.clamp(min=-V, max=V)), -1)


def _titan(x_glu, x_linear):
    """torchtitan/models/gpt_oss/moe.py swiglu at b5bcd76c6: each half clamped (its halves are strided
    views of the fc1 output, sliced with or without the clamp: here they are the leaves, so that
    only the clamp's own kernels are recorded)."""
    return x_glu.clamp(min=None, max=V), x_linear.clamp(min=-V, max=V)


def _torch():
    from tests.compute.dispatch_trace import torch
    return torch


@pytest.mark.parametrize("cat", [True, False])
def test_the_counts_are_the_kernels_torch_dispatches(cat: bool) -> None:
    from tests.compute.dispatch_trace import trace
    torch = _torch()
    if cat:
        x = torch.randn(N, 2 * F, dtype=torch.bfloat16, requires_grad=True)
        run = lambda: (_megatron(x),)  # noqa: E731
    else:
        halves = [torch.randn(N, F, dtype=torch.bfloat16, requires_grad=True) for _ in range(2)]
        run = lambda: _titan(*halves)  # noqa: E731
    outs: list = []
    t_fwd = trace(lambda: outs.extend(run()))
    grads = [torch.ones_like(o) for o in outs]
    t_bwd = trace(lambda: torch.autograd.backward(outs, grads))
    assert (t_fwd.bytes, t_fwd.kernels) == clamp_fwd_bytes_kernels(N * F, 2, cat), t_fwd.names
    assert (t_bwd.bytes, t_bwd.kernels) == clamp_bwd_bytes_kernels(N * F, 2, cat), t_bwd.names
