"""What a layer holds between its input-gradient pass (B) and its weight-gradient pass (W):
clustersim.memory.saved.weight_gradient_operands, and its share of the forward's activation
(clustersim.memory.activations.weight_gradient_share), which zb-2p's memory count uses."""

from __future__ import annotations

import pytest

from clustersim.memory.activations import gpu_kernels, layer_activation_bytes, weight_gradient_share
from clustersim.memory.saved import layer_saved, weight_gradient_operands
from clustersim.parallel.layout import ParallelLayout
from clustersim.workload.model_spec import ModelSpec

GPT = ModelSpec(name="gpt-6.2b", layers=30, hidden=4096, heads=32, ffn_hidden=4 * 4096, vocab=32000, seq_len=1024,
                ffn_act="gelu", dropout=True)


def _layout(**kw) -> ParallelLayout:
    base = dict(tp=1, pp=8, dp=1, micro_batch=3, global_batch=72)
    return ParallelLayout(**{**base, **kw})


def test_gpt_holds_32h_of_34h_plus_5as_the_papers_formula() -> None:
    """Unfused attention, no TP: the four GEMMs' inputs (2 + 2 + 2 + 8 sbh) and output gradients
    (6 + 2 + 8 + 2 sbh) = 32 sbh, the Zero Bubble paper's w_mem = -32 h of f_mem = 34 h + 5 a s."""
    lay = _layout()
    sbh = 3 * 1024 * 4096
    assert sum(s.bytes for s in weight_gradient_operands(GPT, lay, "fp16")) == 32 * sbh
    w = weight_gradient_share(GPT, lay, "fp16", kernels=gpu_kernels("standard"))
    assert w == pytest.approx(32 * 4096 / (34 * 4096 + 5 * 32 * 1024), rel=1e-3)


def test_the_gemm_inputs_are_the_saved_tensors_and_tp_splits_the_rest() -> None:
    lay = _layout()
    saved = {(s.op, s.tensor): s.bytes for s in layer_saved(GPT, lay, "fp16", gpu_kernels("standard"))}
    for s in weight_gradient_operands(GPT, lay, "fp16"):
        if "gradient" not in s.tensor:   # each input is a tensor the forward keeps, as it keeps it
            assert any(op == s.op and b == s.bytes for (op, _), b in saved.items()), s
    one = sum(s.bytes for s in weight_gradient_operands(GPT, lay, "fp16"))
    sp = sum(s.bytes for s in weight_gradient_operands(GPT, _layout(tp=4, sequence_parallel=True), "fp16"))
    assert one / 4 < sp < one   # row-parallel output gradients stay whole


def test_share_with_flash_attention_and_full_recompute() -> None:
    lay = _layout()
    flash = weight_gradient_share(GPT, lay, "fp16", kernels=gpu_kernels("flash"))
    assert 0.9 < flash < 1   # no scores to free: B frees the norms, masks, Q, K, V, GeLU input
    full = _layout(recompute="full")
    share = weight_gradient_share(GPT, full, "fp16", kernels=gpu_kernels("flash"))
    held = sum(s.bytes for s in weight_gradient_operands(GPT, full, "fp16"))
    assert share == pytest.approx(held / layer_activation_bytes(GPT, full, "fp16", "flash")) and share > 1
