from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.compute import (
    CommOp,
    Op,
    embedding_cost,
    optimizer_step_time_s,
    output_cost,
    transformer_layer_cost,
)
from clustersim.compute.attention import attention_fwd_flops
from clustersim.errors import InputError
from clustersim.parallel.layout import ParallelLayout
from tests.conftest import preset

GPT = preset("gpt3-175b")
LLAMA = preset("llama3-70b")


def names(p):
    return [op.name for op in p.ops]


def comm(p):
    return [op for op in p.ops if isinstance(op, CommOp)]


def test_forward_order_no_tp(a100):
    lc = transformer_layer_cost(GPT, ParallelLayout(), a100, "bf16", attention="flash")
    assert names(lc.forward) == ["input_norm", "qkv", "attention_core", "attn_out_proj", "attn_bias_dropout_add",
                                 "pre_mlp_norm", "fc1", "activation", "fc2", "mlp_bias_dropout_add"]
    assert comm(lc.forward) == [] and comm(lc.backward) == []


def test_tp_all_reduce_placement_and_size(a100):
    lc = transformer_layer_cost(GPT, ParallelLayout(tp=8, micro_batch=2), a100, "bf16")
    n = names(lc.forward)
    assert n.index("attn_out_tp_reduce") == n.index("attn_out_proj") + 1
    assert n.index("mlp_out_tp_reduce") == n.index("fc2") + 1
    fwd = comm(lc.forward)
    # b s h bytes = 2 * 2048 * 12288 * 2 = 100,663,296
    assert [(c.collective, c.size_bytes, c.group) for c in fwd] == [("all_reduce", 100_663_296, "tp")] * 2
    bwd = comm(lc.backward)
    assert [c.collective for c in bwd] == ["all_reduce", "all_reduce"]
    assert all(c.overlappable for c in bwd)          # async grad all-reduce behind the wgrad GEMM
    assert not any(c.overlappable for c in fwd)
    n = names(lc.backward)
    assert n.index("fc1_dgrad_all_reduce") == n.index("fc1_dgrad") + 1
    assert n.index("qkv_dgrad_all_reduce") == n.index("qkv_dgrad") + 1


def test_sequence_parallel_same_forward_bytes(a100):
    plain = transformer_layer_cost(GPT, ParallelLayout(tp=8), a100, "bf16")
    sp = transformer_layer_cost(GPT, ParallelLayout(tp=8, sequence_parallel=True), a100, "bf16")
    cols = [c.collective for c in comm(sp.forward)]
    assert cols == ["all_gather", "reduce_scatter", "all_gather", "reduce_scatter"]
    # an all_reduce moves what a reduce_scatter + all_gather of the same (gathered) size move
    assert sum(c.size_bytes for c in comm(sp.forward)) == 2 * sum(c.size_bytes for c in comm(plain.forward))
    assert sp.forward.compute_time_s < plain.forward.compute_time_s   # norms on s/t tokens


def test_backward_gemm_flops_twice_forward(a100):
    lc = transformer_layer_cost(GPT, ParallelLayout(tp=4), a100, "bf16", attention="flash")
    gemm_fwd = sum(op.flops for op in lc.forward.ops if isinstance(op, Op) and op.name != "attention_core")
    gemm_bwd = sum(op.flops for op in lc.backward.ops if isinstance(op, Op) and op.name != "attention_core_bwd")
    assert gemm_bwd == pytest.approx(2 * gemm_fwd, rel=1e-12)
    fa = next(op for op in lc.forward.ops if op.name == "attention_core")
    fb = next(op for op in lc.backward.ops if op.name == "attention_core_bwd")
    assert fb.flops == pytest.approx(2.5 * fa.flops)          # FlashAttention-2 §4.1


def test_attention_flops_causal_half(a100):
    # s = 2048, 16 blocks of 128: (16 + 1) / 32 of 4 b s^2 h FLOPs
    assert attention_fwd_flops(1, 2048, 2048, 96, 128) == 4 * 2048 * 2048 * 96 * 128 * 17 / 32
    assert attention_fwd_flops(1, 2048, 2048, 96, 128, causal=False) == 4 * 2048 * 2048 * 96 * 128


def test_gemm_flops_hand_checked(a100):
    # QKV of GPT-3 on tp=8, b=1: 2 * 2048 * 12288 * (3 * 12288 / 8) = 1.5462e11
    lc = transformer_layer_cost(GPT, ParallelLayout(tp=8), a100, "bf16")
    qkv = next(op for op in lc.forward.ops if op.name == "qkv")
    assert qkv.flops == 2 * 2048 * 12288 * 4608
    # GQA + SwiGLU: llama3-70b tp=8: q 8 heads, kv 1 head of 128 -> N = (8 + 2) * 128; fc1 N = 2 * 28672 / 8
    lc = transformer_layer_cost(LLAMA, ParallelLayout(tp=8), a100, "bf16")
    ops = {op.name: op for op in lc.forward.ops}
    assert ops["qkv"].flops == 2 * 8192 * 8192 * 1280
    assert ops["fc1"].flops == 2 * 8192 * 8192 * 7168
    assert "attn_bias_dropout_add" in ops


def test_recompute_passes(a100):
    base = ParallelLayout(tp=8, sequence_parallel=True)
    none = transformer_layer_cost(GPT, base, a100, "bf16", attention="flash")
    sel = transformer_layer_cost(GPT, replace(base, recompute="selective"), a100, "bf16", attention="flash")
    full = transformer_layer_cost(GPT, replace(base, recompute="full"), a100, "bf16", attention="flash")
    assert none.recompute.ops == ()
    assert names(sel.recompute) == ["attention_core"]
    std = transformer_layer_cost(GPT, replace(base, recompute="selective"), a100, "bf16", attention="standard")
    assert names(std.recompute) == ["attn_scores_qk", "attn_softmax", "attn_dropout", "attn_values_pv"]
    assert full.recompute.ops == full.forward.ops
    assert len(comm(full.recompute)) == 4


def test_params_match_model_spec(a100):
    for m in (GPT, LLAMA, preset("mixtral-8x7b")):
        assert transformer_layer_cost(m, ParallelLayout(), a100, "bf16").params == m.layer_params()
    # tp = 8: everything but the norms (4h) splits
    lc = transformer_layer_cost(GPT, ParallelLayout(tp=8), a100, "bf16")
    assert lc.params == (GPT.layer_params() - 4 * 12288) // 8 + 4 * 12288


def test_cp_and_ep_comm(a100):
    lc = transformer_layer_cost(LLAMA, ParallelLayout(tp=8, cp=2), a100, "bf16")
    cp = [c for c in comm(lc.forward) if c.group.startswith("cp")]
    # ring attention, cp = 2: one ring step passes this rank's K and V shard (8192 / 2 tokens, 1 local
    # kv head of 128, K and V) to its neighbour beside the first attention block (and its log-sum-exp
    # merge): 4096 * 128 * 2 * 2 bytes
    assert [(c.collective, c.size_bytes, c.group, c.overlappable, c.overlap_ops) for c in cp] == [
        ("send_recv", 4096 * 128 * 2 * 2, "cp_p2p", True, 1)]
    moe = preset("mixtral-8x7b")
    lc = transformer_layer_cost(moe, ParallelLayout(ep=4), a100, "bf16")
    ep = [c for c in comm(lc.forward) if c.group == "ep"]
    # 4096 tokens x top-2 x 4096 hidden x 2 bytes each way
    assert [(c.name, c.collective, c.size_bytes) for c in ep] == [
        ("ep_dispatch", "all_to_all", 4096 * 2 * 4096 * 2), ("ep_combine", "all_to_all", 4096 * 2 * 4096 * 2)]
    assert len([c for c in comm(lc.backward) if c.group == "ep"]) == 2


def test_cached_across_irrelevant_fields(a100):
    a = transformer_layer_cost(GPT, ParallelLayout(tp=8, dp=4, pp=2, global_batch=64), a100, "bf16")
    b = transformer_layer_cost(GPT, ParallelLayout(tp=8, dp=16, pp=8, global_batch=1536), a100, "bf16")
    assert a is b


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.booleans(), st.integers(1, 4),
       st.sampled_from(["none", "selective", "full"]), st.sampled_from(["a100", "h100"]))
def test_times_positive_and_faster_with_more_tp(request, tp, sp, mb, rec, gpu_name):
    gpu = request.getfixturevalue(gpu_name)
    lay = ParallelLayout(tp=tp, sequence_parallel=sp, micro_batch=mb, recompute=rec)
    lc = transformer_layer_cost(GPT, lay, gpu, "bf16")
    assert all(op.time_s > 0 for op in lc.forward.compute_ops + lc.backward.compute_ops)
    assert lc.backward.compute_time_s > lc.forward.compute_time_s
    if tp > 1:
        half = transformer_layer_cost(GPT, replace(lay, tp=tp // 2), gpu, "bf16")
        assert lc.forward.compute_time_s < half.forward.compute_time_s


def test_embedding_and_output(a100):
    lay = ParallelLayout(tp=8, sequence_parallel=True)
    emb = embedding_cost(GPT, lay, a100, "bf16")
    assert emb.params == 51200 // 8 * 12288
    assert [c.collective for c in comm(emb.forward)] == ["reduce_scatter"]
    out = output_cost(GPT, lay, a100, "bf16")
    logits = next(op for op in out.forward.ops if op.name == "logits")
    assert logits.flops == 2 * 2048 * 6400 * 12288
    assert out.params == 6400 * 12288 + 2 * 12288


def test_optimizer_step_hand_checked(a100):
    # a shard of 1.25e8 params (1e9 under ZeRO-1 over dp 8): 1.25e8 x 38 B = 4.75e9 B at the fused
    # optimizer's 0.743 of the HBM peak (torch fused AdamW on an H100, validation/micro/):
    # 4.75e9 / (2039e9 x 0.7430) = 3.135 ms
    layout = ParallelLayout(dp=8, zero_stage=1)
    eff = 28e9 / 11.246812e-3 / 3350e9
    t = optimizer_step_time_s(125_000_000, layout, a100)
    assert abs(t - 1.25e8 * 38 / (2039e9 * eff)) < 1e-12
    # the framework's whole-buffer pass zeroes the gradients: Adam leaves the 4 B out (34 B);
    # fp32 training has no master or 16-bit copy: 36 B, 32 B beside such a pass
    assert abs(optimizer_step_time_s(125_000_000, layout, a100, buffer_zeroed=True) - 1.25e8 * 34 / (2039e9 * eff)) < 1e-12
    assert abs(optimizer_step_time_s(125_000_000, layout, a100, "fp32") - 1.25e8 * 36 / (2039e9 * eff)) < 1e-12
    assert abs(optimizer_step_time_s(125_000_000, layout, a100, "fp32", True) - 1.25e8 * 32 / (2039e9 * eff)) < 1e-12


def test_standard_attention(a100, h100):
    # "standard" is the unfused core (Megatron-LM 2021-2022); "auto" without a scenario is flash on every GPU
    a = transformer_layer_cost(GPT, ParallelLayout(tp=8), a100, "bf16", attention="standard")
    h = transformer_layer_cost(GPT, ParallelLayout(tp=8), h100, "bf16")
    assert "attention_core" in names(transformer_layer_cost(GPT, ParallelLayout(tp=8), a100, "bf16").forward)
    assert "attn_softmax" in names(a.forward) and "attention_core" in names(h.forward)
    ops = {op.name: op for op in a.forward.ops}
    # full s^2: Q K^T over 12 local heads: 2 * 12 * 2048 * 2048 * 128 FLOPs
    assert ops["attn_scores_qk"].flops == 2 * 12 * 2048 * 2048 * 128
    # softmax reads and writes 12 * 2048^2 fp16 scores: 2 * 2 * 50,331,648 bytes
    assert ops["attn_softmax"].bytes_moved == 4 * 12 * 2048 * 2048
    gemm_f = sum(op.flops for op in a.forward.compute_ops)
    gemm_b = sum(op.flops for op in a.backward.compute_ops)
    assert gemm_b == pytest.approx(2 * gemm_f, rel=1e-12)
    with pytest.raises(InputError):
        transformer_layer_cost(GPT, ParallelLayout(), a100, "bf16", attention="magic")
