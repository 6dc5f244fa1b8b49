"""The resolved model as the reports show it: ``run --json``'s ``model`` block and the readable
report's model lines (docs/compute.md, "Model fields"; the key names are the scenario's).

``params`` is the model's parameters as its owner counts them (``ModelSpec.main_params``: all but
the multi-token-prediction modules), ``mtp_params`` those of the MTP modules (trained and held in
memory beside them; 0 without MTP), ``vision_params`` a vision tower that ``params`` includes where
the owner's total counts it (Llama 4) and that clustersim does not simulate, ``active_params`` those one token passes through
(``ModelSpec.active_params``: the routed experts' top-k, every dense layer, the embedding and the
output layer, never the vision tower, which does not run on text tokens; equal to ``params`` less
``vision_params`` for a dense model), ``active_params_without_embedding`` the same
less an untied embedding table (owners' "active" counts differ on it: gpt-oss's card leaves it
out, Qwen3's and Mixtral's count it).
"""

from __future__ import annotations

from typing import Any

from clustersim.workload.model_spec import ModelSpec


def model_json(model: ModelSpec) -> dict[str, Any]:
    """``run --json``'s ``model`` block: name, params, active_params and the resolved shape."""
    out: dict[str, Any] = {
        "name": model.name, "params": model.main_params(), "active_params": model.active_params(),
        "active_params_without_embedding": model.active_params_without_embedding(),
        "mtp_params": model.mtp_modules_params(), "vision_params": model.vision_params,
        "layers": model.layers, "hidden": model.hidden, "heads": model.heads, "kv_heads": model.kv_heads,
        "head_dim": model.head_dim, "ffn_hidden": model.ffn_hidden, "ffn_act": model.ffn_act,
        "vocab": model.vocab, "seq_len": model.seq_len, "tie_embeddings": model.tie_embeddings,
        "attention": model.attention, "qk_norm": model.qk_norm, "attention_pattern": model.attention_pattern,
        "attention_window": model.attention_window, "global_every": model.global_every,
        "attention_sinks": model.attention_sinks, "sandwich_norm": model.sandwich_norm,
        "mtp_layers": model.mtp_layers,
        "moe": moe_json(model),
        "notes": list(model.notes),
    }
    if model.is_mla:
        out.update(q_lora_rank=model.q_lora_rank, kv_lora_rank=model.kv_lora_rank,
                   qk_nope_head_dim=model.qk_nope_head_dim, qk_rope_head_dim=model.qk_rope_head_dim,
                   v_head_dim=model.v_head_dim)
    return out


def moe_json(model: ModelSpec) -> dict[str, Any]:
    """``run --json``'s ``model.moe``: the MoE shape, zeros (``every`` 1) for a dense model, whatever
    MoE fields it was given beside ``experts: 0`` (an HF config's top-k stayed in the block)."""
    if not model.is_moe:
        return {"experts": 0, "top_k": 0, "shared_experts": 0, "shared_ffn_hidden": 0, "expert_ffn_hidden": 0,
                "first_dense_layers": 0, "every": 1, "moe_layers": 0}
    return {"experts": model.moe_experts, "top_k": model.moe_top_k, "shared_experts": model.moe_shared_experts,
            "shared_ffn_hidden": model.moe_shared_ffn_hidden, "expert_ffn_hidden": model.moe_expert_ffn_hidden,
            # a pattern states every layer and replaces the rule: the block gives one or the other,
            # so that it reads back as a scenario's model.moe
            **({"pattern": list(model.moe_pattern)} if model.moe_pattern else
               {"first_dense_layers": model.moe_first_dense_layers, "every": model.moe_every}),
            "moe_layers": model.num_moe_layers}


def _ordinal(n: int) -> str:
    """2nd, 3rd, 4th, 11th, 21st: how the report names every N-th layer."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def model_lines(model: ModelSpec) -> list[str]:
    """The readable report's lines on what was read (for a model read from an HF config)."""
    m = model
    attention = f"heads {m.heads}/{m.kv_heads} x {m.head_dim}"
    if m.is_mla:
        attention = f"MLA, {m.heads} heads (q_lora {m.q_lora_rank}, kv_lora {m.kv_lora_rank})"
    if m.has_local_attention:
        attention += f", {m.attention_pattern} {m.attention_window}" + (
            f" (every {_ordinal(m.global_every)} layer full)" if m.global_every else "")
    shape = (f"layers {m.layers}, hidden {m.hidden}, {attention}, ffn {m.ffn_hidden} {m.ffn_act}, "
             f"vocab {m.vocab}, seq_len {m.seq_len}")
    if m.is_moe:
        shape += (f"; MoE {m.num_moe_layers} layers x {m.moe_experts} experts (top {m.moe_top_k}"
                  + (f", {m.moe_shared_experts} shared" if m.moe_shared_experts
                     else f", shared width {m.moe_shared_ffn_hidden}" if m.moe_shared_ffn_hidden else "") + f", width {m.moe_expert_ffn_hidden})")
    mtp = m.mtp_modules_params()
    lines = [f"  shape {shape}",
             f"  params {m.main_params() / 1e9:.2f}B, active per token {m.active_params() / 1e9:.2f}B"
             + (f" ({m.active_params_without_embedding() / 1e9:.2f}B without the embedding table)"
                if m.is_moe and not m.tie_embeddings else "")
             + (f"; MTP modules {mtp / 1e9:.2f}B more" if mtp else "")
             + (f"; params include a vision tower of {m.vision_params / 1e9:.2f}B, not simulated" if m.vision_params
                else "")]
    return lines + [f"  note: {n}" for n in m.notes]
