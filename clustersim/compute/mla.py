"""Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434 §2.1.2; DeepSeek-V3 §2.1.1) on one GPU.

Projections (hidden h, heads n, query/key head ``d_qk = nope + rope``, value head ``d_v``):

* queries: ``W_DQ`` h -> q_lora, RMSNorm, ``W_UQ`` q_lora -> n d_qk (without a query latent,
  q_lora_rank 0, one h -> n d_qk projection);
* keys/values: ``W_DKV`` h -> kv_lora + rope (the latent and the shared rotary key), RMSNorm,
  ``W_UKV`` kv_lora -> n (nope + d_v);
* attention over n heads of depth d_qk (values d_v); ``W_O`` n d_v -> h.

Tensor parallelism as Megatron-Core does it (megatron/core/transformer/multi_latent_attention.py):
the two down-projections are *duplicated* on every TP rank (TELinear parallel_mode
"duplicated") and run on the rank's sequence-parallel share of the tokens; the compressed
latents are then all-gathered over TP (``gather_from_sequence_parallel_region``), the
up-projections are column-parallel over heads and ``W_O`` row-parallel (reduce-scatter with SP).
So TP all-gathers ``q_lora + kv_lora + rope`` values per token instead of ``h``. Without SP the
down-projections run on all tokens on every rank and the latent gradients are all-reduced.
"""

from __future__ import annotations

from clustersim.compute.layer_context import LayerContext
from clustersim.compute.ops import CommOp, Op


def _dims(c: LayerContext) -> tuple[int, int, int, int, int, int]:
    m = c.model
    return (m.q_lora_rank, m.kv_lora_rank, m.qk_rope_head_dim, m.head_dim, m.v_head_dim, c.heads)


def _latent_bytes(c: LayerContext) -> float:
    q_lora, kv_lora, rope, _, _, _ = _dims(c)
    return c.tokens * (q_lora + kv_lora + rope) * c.act_b


def mla_projections_fwd(c: LayerContext) -> list[Op | CommOp]:
    """Forward ops from the normed input to Q, K, V (before the attention core)."""
    q_lora, kv_lora, rope, d_qk, d_v, n = _dims(c)
    t, t_down, h = c.tokens, (c.tokens_sp if c.sp else c.tokens), c.h
    ops: list[Op | CommOp] = []
    if q_lora:
        ops.append(c.gemm("mla_q_down", t_down, q_lora, h))
    ops += [c.gemm("mla_kv_down", t_down, kv_lora + rope, h),
            c.mem("mla_latent_norms", t_down * (q_lora + kv_lora), t_down * (q_lora + kv_lora))]
    if c.sp:
        ops.append(CommOp("mla_latent_all_gather", "all_gather", _latent_bytes(c), "tp",
                          c.overlap_all_tp))
    if q_lora:
        ops.append(c.gemm("mla_q_up", t, n * d_qk, q_lora))
    else:
        ops.append(c.gemm("mla_q_proj", t, n * d_qk, h))
    ops += [c.gemm("mla_kv_up", t, n * (d_qk - rope + d_v), kv_lora),
            c.mem("mla_rope", t * (n + 1) * rope, t * n * rope)]     # rotate q_pe (n heads) and the shared k_pe
    return ops


def mla_projections_bwd(c: LayerContext) -> list[Op | CommOp]:
    """Backward ops from dQ, dK, dV to the input gradient of the down-projections."""
    q_lora, kv_lora, rope, d_qk, d_v, n = _dims(c)
    t, t_down, h = c.tokens, (c.tokens_sp if c.sp else c.tokens), c.h
    ops: list[Op | CommOp] = [c.mem("mla_rope_bwd", t * n * rope, t * (n + 1) * rope),
                              c.gemm("mla_kv_up_dgrad", t, kv_lora, n * (d_qk - rope + d_v)),
                              c.wgemm("mla_kv_up_wgrad", n * (d_qk - rope + d_v), kv_lora, t)]
    if q_lora:
        ops += [c.gemm("mla_q_up_dgrad", t, q_lora, n * d_qk), c.wgemm("mla_q_up_wgrad", n * d_qk, q_lora, t)]
    else:
        ops += [c.gemm("mla_q_proj_dgrad", t, h, n * d_qk), c.wgemm("mla_q_proj_wgrad", n * d_qk, h, t)]
    if c.tp > 1:
        if c.sp:   # conjugate of the latent all-gather
            ops.append(CommOp("mla_latent_grad_reduce_scatter", "reduce_scatter", _latent_bytes(c), "tp",
                              c.overlap_all_tp))
        else:      # partial latent gradients of the column-parallel up-projections
            ops.append(CommOp("mla_latent_grad_all_reduce", "all_reduce", _latent_bytes(c), "tp", True))
    ops.append(c.mem("mla_latent_norms_bwd", 2 * t_down * (q_lora + kv_lora), t_down * (q_lora + kv_lora)))
    ops += [c.gemm("mla_kv_down_dgrad", t_down, h, kv_lora + rope),
            c.wgemm("mla_kv_down_wgrad", kv_lora + rope, h, t_down)]
    if q_lora:
        ops += [c.gemm("mla_q_down_dgrad", t_down, h, q_lora), c.wgemm("mla_q_down_wgrad", q_lora, h, t_down)]
    return ops


def mla_params_per_gpu(model, tp: int) -> int:
    """MLA parameters held by one GPU: down-projections and latent norms replicated, the rest / tp."""
    n = max(1, model.heads // tp)
    q_lora, kv_lora, rope = model.q_lora_rank, model.kv_lora_rank, model.qk_rope_head_dim
    h, d_qk, d_v = model.hidden, model.head_dim, model.v_head_dim
    q = (h * q_lora + q_lora + q_lora * n * d_qk) if q_lora else h * n * d_qk
    kv = h * (kv_lora + rope) + kv_lora + kv_lora * n * (d_qk - rope + d_v)
    return q + kv + n * d_v * h
