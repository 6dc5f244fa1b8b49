"""Ring attention (cp_comm p2p) per step: kernel shapes, the log-sum-exp merges, and the kernel of
the scenario (clustersim/compute/context_parallel.py)."""

import pytest

from clustersim.compute import CommOp, Op, transformer_layer_cost
from clustersim.compute.attention import attention_fwd_flops, attention_ops
from clustersim.compute.roofline import memory_bound_op
from clustersim.parallel.layout import ParallelLayout
from tests.conftest import preset

GPT = preset("gpt3-175b")
LLAMA = preset("llama3-70b")


def _ops(p, name):
    return [op for op in p.ops if isinstance(op, Op) and op.name == name]


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_ring_steps_shapes_and_merges(a100, cp):
    lc = transformer_layer_cost(LLAMA, ParallelLayout(tp=8, cp=cp), a100, "bf16")
    # step 0: the causal diagonal; steps 1..cp-1: non-causal half blocks (TE's load-balanced split)
    (diag,) = _ops(lc.forward, "attention_ring_diag")
    steps = _ops(lc.forward, "attention_ring_step")
    assert len(steps) == cp - 1 and len(_ops(lc.backward, "attention_ring_step_bwd")) == cp - 1
    # each step = its kernel + the merge of its partial output (fp32 accumulator, fp64 lse)
    s_q, heads, d = LLAMA.seq_len // cp, LLAMA.heads // 8, LLAMA.head_dim
    kernel, _ = attention_ops(1, s_q, s_q // 2, heads, LLAMA.kv_heads // 8, d, a100, "bf16", 2, causal=False)
    merge = memory_bound_op("m", s_q * heads * d * (2 + 8) + s_q * heads * 24, a100)
    assert steps[0].time_s == pytest.approx(kernel.time_s + merge.time_s)
    assert steps[0].flops == pytest.approx(kernel.flops)
    # each transfer hides behind one step
    sends = [c for c in lc.forward.ops if isinstance(c, CommOp) and c.group == "cp_p2p"]
    assert len(sends) == cp - 1 and all(c.overlap_ops == 1 for c in sends)
    # the ring's attention FLOPs are the rank's share of the causal attention: s^2 / (2 cp) per head
    ring = diag.flops + sum(op.flops for op in steps)
    assert ring == pytest.approx(attention_fwd_flops(1, LLAMA.seq_len, LLAMA.seq_len, heads, d) / cp, rel=0.02)


def test_ring_short_blocks_run_slower_than_one_long_block(h100):
    """At 2,048 tokens a CP2 ring step sees 512-1024 keys: lower flash efficiency than the whole
    sequence at once (the ramp of short key ranges), plus the merges, so the attention core costs
    more per FLOP."""
    one = transformer_layer_cost(GPT, ParallelLayout(tp=8), h100, "bf16", attention="flash")
    two = transformer_layer_cost(GPT, ParallelLayout(tp=8, cp=2), h100, "bf16", attention="flash")
    (core,) = _ops(one.forward, "attention_core")
    ring = _ops(two.forward, "attention_ring_diag") + _ops(two.forward, "attention_ring_step")
    assert sum(op.flops for op in ring) / sum(op.time_s for op in ring) < core.flops / core.time_s


def test_cp_runs_the_scenarios_attention_kernel(a100):
    """The CP ring uses the same kernel as the non-CP layouts of the scenario: with the unfused core
    (framework megatron-legacy) it is not silently replaced by flash attention. The unfused core
    computes every score of a block (the mask is applied in the softmax), flash skips the blocks
    above the diagonal: on the causal diagonal step (s/2 = 1,024 keys, n = 8 blocks of 128 per row)
    flash computes (n + 1) / 2n of the scores, the unfused core all of them."""
    std = transformer_layer_cost(GPT, ParallelLayout(tp=8, cp=2), a100, "bf16", attention="standard")
    fl = transformer_layer_cost(GPT, ParallelLayout(tp=8, cp=2), a100, "bf16", attention="flash")
    (d_std,) = _ops(std.forward, "attention_ring_diag")
    (d_fl,) = _ops(fl.forward, "attention_ring_diag")
    n = GPT.seq_len // 2 // 128
    assert d_std.flops / d_fl.flops == pytest.approx(2 * n / (n + 1))
    # the off-diagonal half blocks are unmasked: the same FLOPs for both kernels, the unfused one slower
    (s_std,) = _ops(std.forward, "attention_ring_step")
    (s_fl,) = _ops(fl.forward, "attention_ring_step")
    assert s_std.flops == pytest.approx(s_fl.flops) and s_std.time_s > s_fl.time_s


def test_cp_does_not_lower_compute_per_token(a100):
    """docs/moe.md, "Context parallelism at short sequences": GPT-3 175B at 2,048 tokens. With the same (flash) kernel a CP2 layer, at
    half the tokens per micro-batch, costs at least half the compute of the same layer without CP:
    CP adds per-step merges and shorter blocks and removes no work."""
    one = transformer_layer_cost(GPT, ParallelLayout(tp=4), a100, "bf16", attention="flash")
    two = transformer_layer_cost(GPT, ParallelLayout(tp=4, cp=2), a100, "bf16", attention="flash")
    t1 = one.forward.compute_time_s + one.backward.compute_time_s
    t2 = two.forward.compute_time_s + two.backward.compute_time_s
    assert 2 * t2 >= t1
