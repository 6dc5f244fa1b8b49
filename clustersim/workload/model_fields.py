"""The scenario's ``model:`` fields (after a preset or an HF config has been merged in) -> ModelSpec.

Field names are the scenario's (docs/compute.md, "Model fields"); each check names the field, the
value and what is allowed (exit 2):

* ``head_dim`` (query width ``heads x head_dim``, key/value width ``kv_heads x head_dim``);
  without it ``hidden`` must be a multiple of ``heads`` and ``head_dim = hidden / heads``.
  ``query_width``, when stated, must equal ``heads x head_dim``; it gives ``head_dim`` when that is
  left out, which an HF config never leaves (the reader states hidden / heads), so beside one it is
  a check only. MLA models take their head widths from the MLA fields.
* ``attention_pattern`` full | sliding | chunked, ``attention_window`` (tokens, >= 1; a window
  alone means ``sliding``), ``global_every`` (>= 2: every N-th layer attends over the whole
  sequence; only with a local pattern).
* ``moe.every`` (>= 1: every N-th layer after the dense ones is MoE; some layer must be).
* ``moe.pattern`` (one entry per layer, 1: MoE, 0: dense; some layer must be MoE): any per-layer
  layout; ``first_dense_layers`` and ``every`` beside it must give the same layers or be left at
  0 and 1. A pattern the first_dense/every rule states is stored as the rule
  (``model_spec.moe_layer_fields``), so the two spellings are one model.
* ``moe.shared_ffn_hidden`` (the shared experts' total width, Megatron's
  ``--moe-shared-expert-intermediate-size``): with ``moe.shared_experts`` also given, it must equal
  ``shared_experts x expert width``.
* ``activation_clamp`` (a number >= 0; 0 = no clamp): the value at which a gated activation's
  halves are clamped (gpt-oss's ``swiglu_limit``); only with a gated ``ffn_act`` (swiglu, geglu).
* ``moe.expert_bias`` (true / false): biases on the routed experts' linear layers; only for a MoE model.
"""

from __future__ import annotations

import math
from typing import Any

from clustersim.errors import InputError
from clustersim.workload.model_spec import GATED_ACTS, ModelSpec, moe_layer_fields, moe_rule


def _attention_fields(fields: dict[str, Any]) -> dict[str, Any]:
    heads, hidden = fields["heads"], fields["hidden"]
    mla = fields.get("attention") == "mla"
    head_dim = fields.get("head_dim")
    width = fields.get("query_width")
    if mla and head_dim is not None:
        raise InputError("model.head_dim", head_dim, "left out for attention: mla (its heads are "
                         "qk_nope_head_dim + qk_rope_head_dim wide)")
    if mla and width is not None:
        raise InputError("model.query_width", width, "left out for attention: mla (its query width is model.heads x "
                         "(qk_nope_head_dim + qk_rope_head_dim))")
    if mla and fields.get("attention_sinks"):
        raise InputError("model.attention_sinks", True, "false for attention: mla (sinks are modelled for the "
                         "standard attention of gpt-oss)")
    if head_dim is None and width is not None and not mla:
        if width % heads:
            raise InputError("model.query_width", width, f"model.heads x model.head_dim, a multiple of model.heads ({heads})")
        head_dim = width // heads
    if head_dim is None and not mla and hidden % heads:
        raise InputError("model.hidden", hidden, f"a multiple of model.heads ({heads}), or give model.head_dim")
    if width is not None and not mla and width != heads * (head_dim or hidden // heads):
        d = head_dim or hidden // heads
        raise InputError("model.query_width", width, f"model.heads x model.head_dim = {heads} x {d} = {heads * d}")
    pattern = fields.get("attention_pattern")
    window = fields.get("attention_window")
    if pattern is None:
        pattern = "sliding" if window else "full"
    if pattern != "full" and not window:
        raise InputError("model.attention_window", window,
                         f"a window of at least 1 token for attention_pattern {pattern}")
    if pattern == "full" and window:
        raise InputError("model.attention_pattern", pattern, "sliding or chunked when model.attention_window is given")
    every = fields.get("global_every") or 0
    if every and pattern == "full":
        raise InputError("model.global_every", every, "left out unless attention_pattern is sliding or chunked")
    if every == 1:
        raise InputError("model.global_every", every, "0 (every layer local) or 2.. (every N-th layer global)")
    return {"head_dim": head_dim or 0, "attention_pattern": pattern, "attention_window": window or 0,
            "global_every": every}


def _shared_ffn(moe: dict[str, Any], fields: dict[str, Any]) -> int:
    """The shared experts' total width when ``moe.shared_ffn_hidden`` states it (0: shared_experts x
    the expert width); with ``moe.shared_experts`` as well the two must agree."""
    width = moe.get("shared_ffn_hidden") or 0
    count = moe.get("shared_experts") or 0
    expert = moe.get("expert_ffn_hidden") or fields.get("ffn_hidden") or 4 * fields["hidden"]
    if width and count and width != count * expert:
        raise InputError("model.moe.shared_ffn_hidden", width, f"model.moe.shared_experts x the expert width = {count} "
                         f"x {expert} = {count * expert}, or set model.moe.shared_experts to 0 (the width alone "
                         "sets the shared experts)")
    return int(width)


def _activation_clamp(fields: dict[str, Any]) -> float:
    """``activation_clamp`` as a float (0.0 when left out): a finite number >= 0, and above 0 only
    for a gated activation (the clamp bounds the gate and linear halves of a GLU's input)."""
    value = fields.get("activation_clamp")
    if value is None:
        return 0.0
    allowed = "a number >= 0 (0: no clamp; gpt-oss: 7.0, its swiglu_limit)"
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise InputError("model.activation_clamp", value, allowed)
    act = fields.get("ffn_act") or "gelu"
    if value and act not in GATED_ACTS:
        raise InputError("model.activation_clamp", value, f"0 for ffn_act {act}: a clamp bounds the halves of a "
                         "gated activation (swiglu, geglu)")
    return float(value)


def _moe_layers(moe: dict[str, Any], layers: int) -> tuple[int, int, tuple[int, ...]]:
    """(first_dense_layers, every, pattern) of the ``model.moe`` fields: an explicit ``pattern``
    checked against ``layers`` and the rule's fields beside it, and stored as the rule where the
    rule states it (pattern then ())."""
    first, every = moe.get("first_dense_layers") or 0, moe.get("every") or 1
    pattern = moe.get("pattern")
    if pattern is None:
        return first, every, ()
    pattern = tuple(int(x) for x in pattern)
    if len(pattern) != layers:
        raise InputError("model.moe.pattern", f"{len(pattern)} entries", f"one entry per layer: {layers} (model.layers), "
                         "each 1 (MoE) or 0 (dense)")
    if not any(pattern):
        raise InputError("model.moe.pattern", "no 1", "at least one MoE layer (1); a dense model leaves out model.moe")
    if (first, every) != (0, 1) and pattern != tuple(int(moe_rule(i, first, every)) for i in range(layers)):
        field, value = ("model.moe.first_dense_layers", first) if first else ("model.moe.every", every)
        raise InputError(field, value, "0 for first_dense_layers and 1 for every (or left out) when model.moe.pattern "
                         "is given: the pattern states every layer, and these give other layers")
    rule = moe_layer_fields(pattern) or {}
    if "pattern" not in rule:
        return int(rule.get("first_dense_layers", 0)), int(rule.get("every", 1)), ()
    return pattern.index(1), 1, pattern


def model_from_fields(name: str, fields: dict[str, Any], notes: tuple[str, ...] = ()) -> ModelSpec:
    """The ModelSpec of a scenario's resolved ``model:`` fields (preset, HF config and explicit
    fields merged; the moe section as a dict or a pydantic section); ``notes``: how they were read."""
    moe = fields.get("moe") or {}
    if hasattr(moe, "model_dump"):
        moe = moe.model_dump()
    if moe.get("pattern") is not None and not moe.get("experts"):   # a dense model has no MoE layer to place
        raise InputError("model.moe.pattern", list(moe["pattern"]), "left out unless model.moe.experts is set")
    first_dense, every, pattern = _moe_layers(moe, fields["layers"])
    model = ModelSpec(
        name=name,
        layers=fields["layers"], hidden=fields["hidden"], heads=fields["heads"], vocab=fields["vocab"],
        seq_len=fields["seq_len"], kv_heads=fields.get("kv_heads") or 0, ffn_hidden=fields.get("ffn_hidden") or 0,
        ffn_act=fields.get("ffn_act") or "gelu", moe_experts=moe.get("experts", 0) or 0,
        moe_top_k=moe.get("top_k", 0) or 0, tie_embeddings=bool(fields.get("tie_embeddings") or False),
        moe_shared_experts=moe.get("shared_experts") or 0,
        moe_shared_ffn_hidden=_shared_ffn(moe, fields),
        moe_expert_ffn_hidden=moe.get("expert_ffn_hidden") or 0,
        moe_first_dense_layers=first_dense, moe_pattern=pattern,
        moe_capacity_factor=float(moe.get("capacity_factor") or 0.0),
        moe_imbalance=float(moe.get("imbalance") or 1.0),
        moe_pad_to_capacity=bool(moe.get("pad_to_capacity") or False),
        moe_router_num_groups=moe.get("router_num_groups") or 0,
        moe_router_group_topk=moe.get("router_group_topk") or 0,
        moe_token_dispatcher=moe.get("token_dispatcher") or "alltoall",
        attention=fields.get("attention") or "",
        q_lora_rank=fields.get("q_lora_rank") or 0, kv_lora_rank=fields.get("kv_lora_rank") or 0,
        qk_rope_head_dim=fields.get("qk_rope_head_dim") or 0, qk_nope_head_dim=fields.get("qk_nope_head_dim") or 0,
        v_head_dim=fields.get("v_head_dim") or 0, mtp_layers=fields.get("mtp_layers") or 0,
        qk_norm=bool(fields.get("qk_norm") or False), attention_sinks=bool(fields.get("attention_sinks") or False),
        sandwich_norm=bool(fields.get("sandwich_norm") or False), moe_every=every, notes=notes,
        dropout=None if fields.get("dropout") is None else bool(fields["dropout"]),
        vision_params=fields.get("vision_params") or 0,
        activation_clamp=_activation_clamp(fields), moe_expert_bias=bool(moe.get("expert_bias") or False),
        **_attention_fields(fields),
    )
    if model.moe_pad_to_capacity and not model.moe_capacity_factor:
        raise InputError("model.moe.pad_to_capacity", True, "false unless model.moe.capacity_factor is set (the "
                         "padding fills each expert up to its capacity; Megatron refuses it without one)")
    if not model.is_moe and model.moe_expert_bias:
        raise InputError("model.moe.expert_bias", True, "false unless model.moe.experts is set (it marks biases on "
                         "the routed experts)")
    if not model.is_moe and every > 1:   # a dense model has no MoE layer to space out
        raise InputError("model.moe.every", every, "left out unless model.moe.experts is set")
    if model.global_every > model.layers:   # no layer would be global: the pattern is then all local
        raise InputError("model.global_every", model.global_every, f"2..{model.layers} (model.layers), or 0 for "
                         "every layer local")
    if model.is_moe and every > 1 and not model.num_moe_layers:
        raise InputError("model.moe.every", every, f"1..{model.layers - model.moe_first_dense_layers} "
                         "(some layer after moe.first_dense_layers must be a MoE layer)")
    return model
