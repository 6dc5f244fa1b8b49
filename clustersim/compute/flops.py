"""Model FLOPs of one step (what MFU divides by; recomputation not counted).

Korthikanti et al. 2022 (arXiv 2205.05198) eq. 7 / Narayanan et al. 2021 (arXiv 2104.04473) eq. 3
without recompute: ``F = 72 B s l h^2 (1 + s/(6h) + V/(12 l h))`` for a GPT with 4h MLP. Derivation,
per layer and forward pass (x3 for forward + backward):

* QKV, out-projection: 2 B s h (h + 2 h_kv) + 2 B s h^2   (h_kv = h for multi-head attention)
* attention scores and values: 2 x 2 B s^2 h (no causal discount, as in the papers)
* MLP: 2 B s h f x (3 for SwiGLU, 2 for GELU)
* logits: 2 B s h V (once, not per layer)

With h_kv = h, f = 4h, GELU: 24 B s h^2 + 4 B s^2 h per layer forward, times 3 and l layers plus
6 B s h V gives eq. 7 exactly.

Generalised, each term the same "2 x tokens x weights" count:

* MoE layers: ``top_k`` routed plus ``shared`` experts of width ``f_e`` per token and the router
  ``2 B s h E``; the first ``first_dense_layers`` layers keep the dense MLP (DeepSeek-V3's three).
* MLA (DeepSeek-V2 §2.1.2): the projections' weights (clustersim.workload.model_spec
  ``attention_params``) and an attention core of ``2 B s^2 n (d_qk + d_v)`` (Q K^T at the
  query/key depth, P V at the value depth).
* Attention widths (``head_dim`` set explicitly): the projections are ``h x heads d`` (Q, and O
  back), ``h x kv_heads d`` (K, V); the core ``4 B s^2 heads d``.
* Local layers (sliding window ``W``, chunks of ``C``; clustersim.compute.attention_span): the
  core's ``s^2`` becomes twice the causal pairs of the span, ``2 s W - W^2`` or ``n C^2 + r^2``,
  so that a span covering the sequence gives back ``s^2``.
* Multi-token prediction (DeepSeek-V3 §2.2): each module adds one transformer layer, the
  ``2h -> h`` projection and a second pass through the output head.
"""

from __future__ import annotations

from clustersim.compute.attention_span import equivalent_square, layer_span
from clustersim.workload.model_spec import ModelSpec


def _layer_fwd_flops(model: ModelSpec, tokens: int, batch: int, moe: bool, local: bool = False) -> float:
    s, h = model.seq_len, model.hidden
    span = equivalent_square(s, *layer_span(model, local))   # s^2, or the local span's (attention_span.py)
    if model.is_mla:
        proj = 2 * tokens * model.attention_params()
        core = 2 * batch * span * model.heads * (model.head_dim + model.v_head_dim)
    else:
        q = model.q_width
        proj = 2 * tokens * h * (q + 2 * model.kv_hidden) + 2 * tokens * q * h
        core = 4 * batch * span * q
    if moe:
        width = model.moe_top_k * model.moe_expert_ffn_hidden + model.moe_shared_ffn_hidden
        mlp = 2 * tokens * h * width * model.num_mlp_matrices
        mlp += 2 * tokens * h * model.moe_experts   # router
    else:
        mlp = 2 * tokens * h * model.ffn_hidden * model.num_mlp_matrices
    return float(proj + core + mlp)


def model_flops_per_step(model: ModelSpec, global_batch: int) -> float:
    b, s, h = global_batch, model.seq_len, model.hidden
    tokens = b * s
    per_step = 0.0
    for kind, n in model.layer_kind_counts():   # MoE before dense, full before local layers
        per_step += n * _layer_fwd_flops(model, tokens, b, kind.moe, kind.local)
    logits = 2 * tokens * h * model.vocab
    mtp = model.mtp_layers * (_layer_fwd_flops(model, tokens, b, model.is_moe) + 2 * tokens * 2 * h * h + logits)
    return float(3 * (per_step + logits + mtp))
