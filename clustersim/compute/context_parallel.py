"""The attention core under context parallelism: ring attention, Ulysses, and their mix.

Megatron-Core passes ``--cp-comm-type`` to Transformer Engine's context-parallel attention
(transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py):

* ``p2p`` (ring attention, Liu et al. 2023, arXiv 2310.01889; TE ``AttnFuncWithCPAndKVP2P``):
  the sequence is cut into ``2 cp`` chunks and rank ``i`` keeps chunks ``i`` and ``2cp-1-i``, so
  that causal masking gives every rank the same work (Megatron's load-balanced split). The K/V
  shard (``s/cp`` tokens) travels around the ring in ``cp - 1`` send/recv steps; step ``j``'s
  transfer runs beside step ``j - 1``'s attention block and the next block waits for it. Each
  step computes half of an ``(s/cp) x (s/cp)`` block (the causal diagonal on step 0, one of the
  two halves afterwards), ``1/cp`` of the rank's ``s^2 / (2 cp)`` causal work. The backward pass
  sends K, V and the partial dK, dV around the ring: twice the forward volume per step.
* ``a2a`` (DeepSpeed-Ulysses, Jacobs et al. 2023, arXiv 2309.14509; TE ``AttnFuncWithCPAndQKVOA2A``):
  an all-to-all turns the sequence-sharded Q, K, V into head-sharded ones (every rank sees the
  whole sequence for ``heads / cp`` heads), attention runs locally, and a second all-to-all
  brings the output back; backward: all-to-all of dO, then of dQ, dK, dV. These block the stream.
* ``a2a+p2p`` (hierarchical, Megatron ``--hierarchical-context-parallel-sizes``): all-to-all
  inside the first ``a`` ranks of the CP group (usually inside a node), ring over the ``p = cp/a``
  groups.

Per ring step (TE ``AttnFuncWithCPAndKVP2P.forward``/``backward``), beyond the attention kernel:

* the kernel's shape: step 0 is the causal diagonal (``s/p`` queries x ``s/p`` keys, causal);
  every later step is a *non-causal* half block - either both query chunks against the first key
  chunk or the second query chunk against both key chunks - so ``s/p x s/(2p)`` with no masking.
  These short blocks run at the lower efficiency of short key ranges (clustersim.compute.attention
  ramp), and each is its own kernel launch;
* the merge of partial results with the log-sum-exp (online softmax, Milakov & Gimelshein 2018;
  TE ``flash_attn_fwd_out_correction`` and ``flash_attn_fwd_softmax_lse_correction``): per step the
  partial output (16 bit) is scaled by ``exp(lse_step - lse)`` and added into the fp32 accumulator
  (read 16-bit partial, read and write fp32 accumulator: ``act + 8`` bytes per output element),
  and the fp64 log-sum-exp is updated (read two, write one: 24 bytes per query row and head);
* backward: per step the partial dQ is added into the fp32 dQ (``act + 8`` bytes per element) and
  the partial dK, dV are added into the dK, dV received from the neighbour before they move on
  (read two 16-bit shards, write one).

The attention kernel is the scenario's (``training.attention`` or the framework's default): flash
under Megatron-Core/TE; the unfused core under ``framework: megatron-legacy``, as a blockwise ring
attention with the unfused kernels would run it (Liu et al. 2023 describe ring attention over any
blockwise attention). Modelling CP with a different kernel from the one the non-CP layouts of the
same scenario get made CP look faster than it is (docs/moe.md, "Context parallelism at short
sequences").
"""

from __future__ import annotations

import math

from clustersim.compute.attention import attention_ops
from clustersim.compute.attention_standard import standard_attention_ops
from clustersim.compute.layer_context import LayerContext
from clustersim.compute.ops import CommOp, Op
from clustersim.compute.roofline import memory_bound_op


def cp_attention(c: LayerContext, d_qk: int, d_v: int) -> tuple[list[Op | CommOp], list[Op | CommOp]]:
    """(forward, backward) ops of the attention core with its CP exchanges (cp > 1)."""
    lay, m = c.layout, c.model
    b, s, a, p = lay.micro_batch, m.seq_len, lay.cp_a2a, lay.cp_p2p
    heads, kv_heads = c.heads, c.kv_heads
    fwd: list[Op | CommOp] = []
    bwd_pre: list[Op | CommOp] = []
    bwd_post: list[Op | CommOp] = []
    s_shard = math.ceil(s / lay.cp)             # tokens each rank holds before and after attention
    if a > 1:
        # Ulysses: heads / a per rank, s / p tokens per rank after the exchange
        qkv = b * s_shard * (heads * d_qk + kv_heads * (d_qk + d_v)) * c.act_b
        out = b * s_shard * heads * d_v * c.act_b
        heads, kv_heads = max(1, heads // a), max(1, kv_heads // a)
        fwd.append(CommOp("cp_qkv_all_to_all", "all_to_all", qkv, "cp_a2a"))
        bwd_pre.append(CommOp("cp_out_grad_all_to_all", "all_to_all", out, "cp_a2a"))
        bwd_post.append(CommOp("cp_qkv_grad_all_to_all", "all_to_all", qkv, "cp_a2a"))
        post_fwd = [CommOp("cp_out_all_to_all", "all_to_all", out, "cp_a2a")]
    else:
        post_fwd = []
    s_q = math.ceil(s / p)                       # queries of this rank inside the ring
    if p == 1:   # Ulysses alone: the whole sequence per head group, so a local layer keeps its span
        f, g = _kernel(c, s_q, s, heads, kv_heads, d_qk, d_v, True, local=True)
        return [*fwd, *f, *post_fwd], [*bwd_pre, *g, *bwd_post]
    kv_shard = b * s_q * kv_heads * (d_qk + d_v) * c.act_b
    out_elems = b * s_q * heads * d_v
    rows = b * s_q * heads
    # merge of a step's partial output into the fp32 accumulator, and of its log-sum-exp (fp64)
    out_fix = memory_bound_op("cp_out_correction", out_elems * (c.act_b + 8) + rows * 24, c.gpu)
    dq_fix = memory_bound_op("cp_dq_accumulate", b * s_q * heads * d_qk * (c.act_b + 8), c.gpu)
    dkv_fix = memory_bound_op("cp_dkv_accumulate", 3 * kv_shard, c.gpu)
    # step 0: the causal diagonal block; steps 1..p-1: non-causal half blocks (s/p x s/2p). Each
    # step is one Op (its kernels and its merges, which run back to back on the compute stream)
    diag_f, diag_g = _kernel(c, s_q, s_q, heads, kv_heads, d_qk, d_v, True)
    half_f, half_g = _kernel(c, s_q, max(1, s_q // 2), heads, kv_heads, d_qk, d_v, False)
    diag_f = _fold("attention_ring_diag", [*diag_f, out_fix])
    half_f = _fold("attention_ring_step", [*half_f, out_fix])
    diag_g = _fold("attention_ring_diag_bwd", [*diag_g, dq_fix, dkv_fix])
    half_g = _fold("attention_ring_step_bwd", [*half_g, dq_fix, dkv_fix])
    # the next shard's transfer runs beside this step's kernels and merge; the next step waits for it
    # (every step's transfer is the same op: one object, planned once by the engines)
    kv_send = CommOp("cp_ring_kv", "send_recv", kv_shard, "cp_p2p", True, overlap_ops=1)
    for j in range(p):
        if j < p - 1:
            fwd.append(kv_send)
        fwd.append(diag_f if j == 0 else half_f)
    bwd: list[Op | CommOp] = list(bwd_pre)
    # K, V and the partial dK, dV of the previous shard move on while this block runs
    kv_dkv_send = CommOp("cp_ring_kv_dkv", "send_recv", 2 * kv_shard, "cp_p2p", True, overlap_ops=1)
    for j in range(p):
        bwd.append(kv_dkv_send)
        bwd.append(diag_g if j == 0 else half_g)
    return [*fwd, *post_fwd], [*bwd, *bwd_post]


def _fold(name: str, ops: list[Op]) -> Op:
    return Op(name, sum(o.flops for o in ops), sum(o.bytes_moved for o in ops), sum(o.time_s for o in ops))


def _kernel(c: LayerContext, s_q: int, s_k: int, heads: int, kv_heads: int, d_qk: int, d_v: int, causal: bool,
            name: str = "attention_core", local: bool = False) -> tuple[list[Op], list[Op]]:
    """The scenario's attention kernel on one block: flash (TE fused attention), or the unfused core
    (which computes every score of the block, the mask applied in the softmax). ``local``: the
    block is the whole sequence, so the layer's sliding window or chunk applies (the ring's
    blocks never carry one: clustersim.parallel.attention_rules refuses p2p for local layers)."""
    b = c.layout.micro_batch
    if c.attention == "flash" or c.model.is_mla or d_qk != d_v:
        pattern, window = (c.pattern, c.window) if local else ("full", 0)
        f, g = attention_ops(b, s_q, s_k, heads, kv_heads, d_qk, c.gpu, c.dtype, c.act_b, causal=causal,
                             v_head_dim=d_v, name=name, pattern=pattern, window=window)
        return [f], [g]
    fs, gs = standard_attention_ops(b, s_q, s_k, heads, d_qk, c.gpu, c.dtype, c.act_b, c.dropout)
    return list(fs), list(gs)
