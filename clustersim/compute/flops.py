"""Model FLOPs of one step (what MFU divides by; recomputation not counted).

Korthikanti et al. 2022 (arXiv 2205.05198) eq. 7 / Narayanan et al. 2021 (arXiv 2104.04473) eq. 3
without recompute: ``F = 72 B s l h^2 (1 + s/(6h) + V/(12 l h))`` for a GPT with 4h MLP. Derivation,
per layer and forward pass (x3 for forward + backward):

* QKV, out-projection: 2 B s h (h + 2 h_kv) + 2 B s h^2   (h_kv = h for multi-head attention)
* attention scores and values: 2 x 2 B s^2 h (no causal discount, as in the papers)
* MLP: 2 B s h f x (3 for SwiGLU, 2 for GELU) x top_k experts for MoE (plus the router, 2 B s h E)
* logits: 2 B s h V (once, not per layer)

With h_kv = h, f = 4h, GELU: 24 B s h^2 + 4 B s^2 h per layer forward, times 3 and l layers plus
6 B s h V gives eq. 7 exactly.
"""

from __future__ import annotations

from clustersim.workload.model_spec import ModelSpec


def model_flops_per_step(model: ModelSpec, global_batch: int) -> float:
    b, s, h = global_batch, model.seq_len, model.hidden
    tokens = b * s
    attn_proj = 2 * tokens * h * (h + 2 * model.kv_hidden) + 2 * tokens * h * h
    attn_core = 4 * b * s * s * h
    active = model.moe_top_k if model.is_moe else 1
    mlp = 2 * tokens * h * model.ffn_hidden * model.num_mlp_matrices * active
    router = 2 * tokens * h * model.moe_experts
    per_layer_fwd = attn_proj + attn_core + mlp + router
    logits_fwd = 2 * tokens * h * model.vocab
    return float(3 * (model.layers * per_layer_fwd + logits_fwd))
