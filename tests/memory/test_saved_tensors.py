"""clustersim's per-layer activation bytes against what torch keeps for real blocks on CPU
(validation/saved_tensors.py): Llama-style blocks (RMSNorm, RoPE, GQA through SDPA, SwiGLU or GeGLU, with
and without wider heads, QK-norm, sandwich norms and a sliding window) and
GPT-style blocks (LayerNorm, GeLU / ReLU / squared ReLU, dropout, unfused MHA), bf16 and fp32, under no checkpointing,
Megatron's selective recompute, torchtitan's per-op selective checkpointing and full
checkpointing. Needs torch (the CI installs it)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from validation import saved_tensors as st  # noqa: E402

CASES = [(shape, dtype, policy) for shape in st.SHAPES for dtype in st.DTYPES for policy in st.POLICIES_OF[shape.kind]]


@pytest.mark.parametrize("shape,dtype,policy", CASES, ids=lambda x: getattr(x, "kind", None) and
                         f"{x.kind}-{x.batch}x{x.seq}x{x.hidden}" or str(x))
def test_model_matches_what_torch_keeps(shape, dtype, policy):
    count = st.count(shape, dtype, policy)
    model = st.model_bytes(shape, dtype, policy)
    assert abs(model / count.alive_bytes - 1) <= 0.02, (count, model)
    if policy == "none":   # the two counts agree: what autograd packs is what stays alive
        assert count.hooked_bytes == count.alive_bytes


def test_the_count_sees_a_change():
    """The counter is not blind: a block that keeps one more tensor counts exactly its bytes more."""
    shape = st.SHAPES[0]
    block, x = shape.build(torch.float32)
    base = st.measure(block, x, "none").alive_bytes
    extra = {}

    def keep_one_more(module, inputs, output):  # an output that the graph saves (a multiply by itself)
        extra["t"] = (output * 1.0).pow(2)
        return output + 0 * extra["t"].sum()

    handle = block.ffn_norm.register_forward_hook(keep_one_more)
    try:
        more = st.measure(block, x, "none").alive_bytes
    finally:
        handle.remove()
    assert more > base


def test_a_window_keeps_what_full_attention_keeps_on_gpu():
    """On the GPU the window is a kernel argument: a sliding-window layer keeps the tensors of a
    full-attention one (the CPU count differs only by the s x s additive mask torch SDPA builds)."""
    from clustersim.memory.saved import GPU_FUSED, cpu_kernels, saved_bytes
    from clustersim.parallel.layout import ParallelLayout
    from clustersim.workload.model_spec import ModelSpec

    full = ModelSpec("m", layers=1, hidden=128, heads=4, vocab=2, seq_len=64, ffn_act="swiglu")
    window = ModelSpec("m", layers=1, hidden=128, heads=4, vocab=2, seq_len=64, ffn_act="swiglu",
                       attention_pattern="sliding", attention_window=16)
    lay = ParallelLayout(micro_batch=2)
    assert saved_bytes(window, lay, "bf16", GPU_FUSED, "none") == saved_bytes(full, lay, "bf16", GPU_FUSED, "none")
    cpu = cpu_kernels("bf16")
    assert saved_bytes(window, lay, "bf16", cpu, "none") - saved_bytes(full, lay, "bf16", cpu, "none") == 2 * 64 * 64


def test_replicated_key_value_heads_are_saved_by_every_rank_that_holds_them():
    """tp 8 over 2 KV heads: each rank computes (and keeps for the backward) one whole KV head, as
    its QKV GEMM does (compute.conventions.local_kv_heads); the saved Q, K, V counted 2/8 of one."""
    from clustersim.memory.saved import layer_saved
    from clustersim.parallel.layout import ParallelLayout
    from clustersim.scenario import model_from_fields

    model = model_from_fields("m", dict(layers=2, hidden=1024, heads=16, kv_heads=2, vocab=1000, seq_len=512))
    layout = ParallelLayout(tp=8, micro_batch=1, global_batch=1, recompute="none")
    qkv = next(s for s in layer_saved(model, layout, "bf16") if s.op == "attention" and s.tensor == "Q, K, V")
    head = 1024 // 16
    assert qkv.bytes == 2 * 512 * (16 // 8 + 2 * 1) * head
