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

Context parallelism needs fused/flash attention kernels (TE), so the core is always flash here.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from clustersim.compute.attention import attention_ops
from clustersim.compute.ops import CommOp, Op

if TYPE_CHECKING:
    from clustersim.compute.layer import _Ctx


def cp_attention(c: _Ctx, d_qk: int, d_v: int) -> tuple[list[Op | CommOp], list[Op | CommOp]]:
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
    if p == 1:
        f, g = attention_ops(b, s_q, s, heads, kv_heads, d_qk, c.gpu, c.dtype, c.act_b, v_head_dim=d_v)
        return [*fwd, f, *post_fwd], [*bwd_pre, g, *bwd_post]
    kv_shard = b * s_q * kv_heads * (d_qk + d_v) * c.act_b
    # one ring step: this rank's s/p queries against one s/p-token K/V shard, half of it under the
    # load-balanced causal split (the causal fraction of an s/p x s/p block)
    f, g = attention_ops(b, s_q, s_q, heads, kv_heads, d_qk, c.gpu, c.dtype, c.act_b, v_head_dim=d_v,
                         name="attention_ring_step")
    for j in range(p):
        if j < p - 1:
            fwd.append(CommOp("cp_ring_kv", "send_recv", kv_shard, "cp_p2p", True, overlap_ops=1))
        fwd.append(f)
    bwd: list[Op | CommOp] = list(bwd_pre)
    for _ in range(p):
        # K, V and the partial dK, dV of the previous shard move on while this block runs
        bwd.append(CommOp("cp_ring_kv_dkv", "send_recv", 2 * kv_shard, "cp_p2p", True, overlap_ops=1))
        bwd.append(g)
    return [*fwd, *post_fwd], [*bwd, *bwd_post]
