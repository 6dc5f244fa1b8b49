"""Ring attention (cp_comm p2p) per step: kernel shapes, the log-sum-exp merges, and the kernel of
the scenario (clustersim/compute/context_parallel.py)."""

import pytest

from clustersim.compute import CommOp, Op, transformer_layer_cost
from clustersim.compute.attention import attention_fwd_flops
from clustersim.parallel.layout import ParallelLayout
from tests.conftest import preset

GPT = preset("gpt3-175b")
LLAMA = preset("llama3-70b")


def _ops(p, prefix):
    return [op for op in p.ops if isinstance(op, Op) and op.name.startswith(prefix)]


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_ring_steps_shapes_and_merges(a100, cp):
    lc = transformer_layer_cost(LLAMA, ParallelLayout(tp=8, cp=cp), a100, "bf16")
    # step 0: the causal diagonal; steps 1..cp-1: non-causal half blocks (TE's load-balanced split)
    assert len(_ops(lc.forward, "attention_ring_diag")) == 1
    assert len(_ops(lc.forward, "attention_ring_step")) == cp - 1
    # one log-sum-exp merge per step in forward; dQ and dK/dV accumulation per step in backward
    assert len(_ops(lc.forward, "cp_out_correction")) == cp
    assert len(_ops(lc.backward, "cp_dq_accumulate")) == cp
    assert len(_ops(lc.backward, "cp_dkv_accumulate")) == cp
    # each transfer hides behind exactly the kernels of one step
    sends = [c for c in lc.forward.ops if isinstance(c, CommOp) and c.group == "cp_p2p"]
    assert len(sends) == cp - 1 and all(c.overlap_ops == 2 for c in sends)
    # the ring's attention FLOPs are the rank's share of the causal attention: (s/cp)^2/2 on the
    # diagonal (block-causal) plus (cp-1) half blocks of (s/cp)^2/2 = s^2/(2 cp) per head
    s, heads, d = LLAMA.seq_len, LLAMA.heads // 8, LLAMA.head_dim
    ring = sum(op.flops for op in lc.forward.ops if isinstance(op, Op) and op.name.startswith("attention_ring"))
    whole = attention_fwd_flops(1, s, s, heads, d) / cp
    assert ring == pytest.approx(whole, rel=0.02)


def test_ring_short_blocks_run_slower_than_one_long_block(h100):
    """At 2,048 tokens a CP2 ring step sees 512-1024 keys: lower flash efficiency than the whole
    sequence at once (the ramp of short key ranges), so the attention core costs more per FLOP."""
    m = GPT
    one = transformer_layer_cost(m, ParallelLayout(tp=8), h100, "bf16", attention="flash")
    two = transformer_layer_cost(m, ParallelLayout(tp=8, cp=2), h100, "bf16", attention="flash")
    core1 = [op for op in one.forward.ops if isinstance(op, Op) and op.name == "attention_core"][0]
    ring = [op for op in two.forward.ops if isinstance(op, Op) and op.name.startswith("attention_ring")]
    rate1 = core1.flops / core1.time_s
    rate2 = sum(op.flops for op in ring) / sum(op.time_s for op in ring)
    assert rate2 < rate1


@pytest.mark.parametrize("attention", ["standard", "flash"])
def test_cp_runs_the_scenarios_attention_kernel(a100, attention):
    """The CP ring uses the same kernel as the non-CP layouts of the scenario: with the unfused core
    (framework megatron-legacy) it is not silently replaced by flash attention."""
    lc = transformer_layer_cost(GPT, ParallelLayout(tp=8, cp=2), a100, "bf16", attention=attention)
    names = [op.name for op in lc.forward.ops]
    if attention == "standard":
        assert "attn_softmax" in names and not any(n.startswith("attention_ring") for n in names)
    else:
        assert "attention_ring_diag" in names and "attn_softmax" not in names


@pytest.mark.parametrize("attention", ["standard", "flash"])
def test_cp_does_not_lower_compute_per_token(a100, attention):
    """Issue 8's question: GPT-3 175B at 2,048 tokens. With the same kernel, a CP2 layer (half the
    tokens per micro-batch) costs at least half the compute of the same layer without CP: CP adds
    per-step launches, merges and shorter blocks; it removes no work the kernel would have done
    except the masked half of the unfused core's scores (standard: the ring's half blocks skip them,
    so at most the masked share of the scores may be saved)."""
    one = transformer_layer_cost(GPT, ParallelLayout(tp=4), a100, "bf16", attention=attention)
    two = transformer_layer_cost(GPT, ParallelLayout(tp=4, cp=2), a100, "bf16", attention=attention)
    t1 = one.forward.compute_time_s + one.backward.compute_time_s
    t2 = two.forward.compute_time_s + two.backward.compute_time_s
    if attention == "flash":
        assert 2 * t2 >= t1
    else:
        # the unfused core's score work is the only thing the ring may save: bounded by it
        scores = sum(op.time_s for p in (one.forward, one.backward) for op in p.ops
                     if isinstance(op, Op) and op.name.startswith("attn_"))
        assert 2 * t2 >= t1 - scores / 2
