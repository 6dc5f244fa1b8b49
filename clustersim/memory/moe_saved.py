"""Saved activations of one layer of a MoE or MLA model (one micro-batch, one GPU).

clustersim.memory.saved counts dense GPT/Llama layers tensor by tensor; a MoE layer's experts
(fine-grained width ``expert_ffn_hidden``, the busiest expert rank's load, expert TP, shared
experts) and MLA's latents are counted here, term by term (Korthikanti et al. 2022, arXiv
2205.05198, Table 2, extended):

* MoE layers: per GPU, the permuted token copies and expert activations of the busiest expert
  rank (``_moe_bytes``, Megatron-Core MoELayer with the alltoall dispatcher);
* MLA: its latents and per-head Q, K, V (``_mla_parts``, DeepSeek-V2 arXiv 2405.04434 §2.1.2);
* FP8 training keeps the inputs of the linear layers in FP8 for the weight-gradient GEMM
  (Transformer Engine saves the quantized input; Megatron-Core MoE README, "FP8 Training":
  "stores linear layer inputs in FP8 instead of BF16"; DeepSeek-V3 §3.3.3): 1 byte for those terms;
* TP without SP (Korthikanti eq. 2): the norm inputs, the QKV and fc1 inputs and the masks stay
  replicated, the rest is divided by t; with SP (eq. 4) everything is divided by t; CP: s -> s / cp;
* Megatron's ``--recompute-modules`` (``parallel.recompute_modules``) drop more: "layernorm" the
  norms' outputs, "mla_up_proj" the MLA queries, keys and values (rebuilt from the saved
  latents), "moe_act" the experts' fc2 inputs (rebuilt from the SwiGLU inputs);
* full recompute: only the layer input, 2 sbh (/t with SP) (Korthikanti §4.1 "2sbhL").

torchtitan's per-op policy (``selective-op``) is counted as ``selective`` for these layers.
"""

from __future__ import annotations

import math
from dataclasses import replace

from clustersim.compute.conventions import activation_saved_widths, uses_dropout
from clustersim.compute.dtypes import activation_bytes, gemm_operand_bytes
from clustersim.compute.moe_routing import load_factor
from clustersim.parallel.layout import ParallelLayout
from clustersim.workload.model_spec import ModelSpec


def _moe_bytes(model: ModelSpec, layout: ParallelLayout, a_b: int, lin_b: int) -> float:
    """Bytes one GPU keeps for a MoE MLP (Megatron-Core MoELayer with the alltoall dispatcher):
    the fp32 router probabilities of its ``t`` tokens, the permuted tokens each expert GEMM reads
    (``t k etp x load`` on the busiest rank, clustersim.compute.moe), the SwiGLU input (gate and
    up, ``f_e / etp`` wide) and the fc2 input; shared experts as a dense MLP of width
    ``moe_shared_ffn_hidden / tp`` on the TP-gathered tokens plus their gathered input."""
    tp, etp = layout.tp, layout.etp
    tokens = layout.micro_batch * math.ceil(model.seq_len / layout.cp)
    t = math.ceil(tokens / tp) if tp > 1 else tokens
    pairs = t * model.moe_top_k * etp * load_factor(model)
    f = math.ceil(model.moe_expert_ffn_hidden / etp)
    kept = activation_saved_widths(model)   # 2 for SwiGLU/GeGLU (gate and up), 1 GeLU, 0 ReLU
    routed = pairs * ((model.hidden + f) * lin_b + f * kept * a_b) + t * model.moe_experts * 4
    shared_f = math.ceil(model.moe_shared_ffn_hidden / tp)
    shared = tokens * shared_f * (kept * a_b + lin_b) if shared_f else 0.0
    return float(routed + shared)


def _mla_parts(model: ModelSpec, tokens: int, a_b: int, lin_b: int) -> tuple[float, float]:
    """MLA (clustersim.compute.mla): the latents before and after their norms (replicated over
    TP like the layer input: each rank holds the gathered latents unless SP keeps the shard), and
    per head Q and K (d_qk), V and the attention output (d_v) and the fp32 log-sum-exp."""
    latent = model.q_lora_rank + model.kv_lora_rank + model.qk_rope_head_dim
    replicated = tokens * latent * (a_b + lin_b)
    n = model.heads
    sharded = tokens * n * ((2 * model.head_dim + 2 * model.v_head_dim) * a_b - model.v_head_dim * (a_b - lin_b)) \
        + tokens * n * 4
    return float(replicated), float(sharded)


def _parts(model: ModelSpec, layout: ParallelLayout, dtype: str, attention_impl: str = "flash",
           moe: bool | None = None) -> tuple[float, float, float]:
    """(replicated-across-TP bytes, TP-sharded bytes, per-GPU bytes) of one layer, one
    micro-batch, no recompute. ``moe``: a MoE layer (None: MoE for a MoE model).

    ``attention`` "standard" (unfused) keeps Korthikanti's s^2 terms: softmax output (2 bytes),
    dropout mask (1) and dropout output (2) per score, 5 a s^2 b (2 a s^2 b without dropout); they
    are dropped by selective recompute. "flash" keeps the fp32 log-sum-exp instead.
    """
    moe = model.is_moe if moe is None else (moe and model.is_moe)
    a_b = activation_bytes(dtype)
    lin_b = gemm_operand_bytes(dtype) if dtype == "fp8" else a_b   # linear-layer inputs saved in FP8
    tokens = layout.micro_batch * math.ceil(model.seq_len / layout.cp)    # s b / cp
    h, f = model.hidden, model.ffn_hidden
    mask = 1 if uses_dropout(model) else 0
    # replicated: 2 LN inputs (a_b each), QKV input and fc1 input (linear inputs) and the 2 dropout masks
    replicated = tokens * h * (2 * a_b + 2 * lin_b + mask * 2)
    if model.sandwich_norm:           # the inputs of the two norms before the residual adds (Gemma 2/3)
        replicated += tokens * h * 2 * a_b
    if model.is_mla:
        rep, attention = _mla_parts(model, tokens, a_b, lin_b)
        replicated += rep
    else:
        kv_ratio = model.kv_hidden / h
        q_ratio = 1 if model.q_width == h else model.q_width / h
        # sharded: Q, K, V, out-projection input (a linear input), log-sum-exp (fp32 per head and token)
        attention = tokens * h * a_b * (q_ratio + 2 * kv_ratio) + tokens * model.q_width * lin_b
        if model.qk_norm:             # the Q and K norms' input and an fp32 rstd per head and token
            attention += tokens * (model.q_width + model.kv_hidden) * a_b + tokens * (model.heads + model.kv_heads) * 4
        if attention_impl == "flash" or layout.cp > 1:
            attention += tokens * model.heads * 4
        elif layout.recompute != "selective":
            scores = tokens * model.seq_len * model.heads              # b a (s / cp) s
            attention += scores * (a_b + (1 + a_b if uses_dropout(model) else 0))
    per_gpu = 0.0
    if moe:
        mlp = 0.0
        per_gpu = _moe_bytes(model, layout, a_b, lin_b)
    else:
        mlp = tokens * f * (a_b * activation_saved_widths(model) + lin_b)
    modules = layout.recompute_modules if layout.recompute == "selective" else ()
    if "layernorm" in modules:        # the norms' outputs (inputs of QKV / down-projections and of the MLP)
        replicated -= tokens * h * 2 * lin_b
    if "mla_up_proj" in modules and model.is_mla:   # Q, K, V come back from the saved latents
        attention -= tokens * model.heads * (2 * model.head_dim + model.v_head_dim) * a_b
    if "moe_act" in modules and moe:  # the experts' fc2 inputs come back from the saved SwiGLU inputs
        tp, etp = layout.tp, layout.etp
        t = math.ceil(tokens / tp) if tp > 1 else tokens
        per_gpu -= t * model.moe_top_k * etp * load_factor(model) * math.ceil(model.moe_expert_ffn_hidden / etp) * lin_b
        per_gpu -= tokens * math.ceil(model.moe_shared_experts * model.moe_expert_ffn_hidden / tp) * lin_b
    return float(replicated), float(attention + mlp), per_gpu


def _layer_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str, attention: str = "flash",
                 moe: bool | None = None) -> float:
    """Bytes one layer keeps for the backward pass of one micro-batch on one GPU (``attention``:
    the resolved implementation, "flash" or "standard"; ``moe``: the layer's kind)."""
    t = layout.tp
    sp = layout.sequence_parallel and t > 1
    if layout.recompute == "full":
        tokens = layout.micro_batch * math.ceil(model.seq_len / layout.cp)
        return tokens * model.hidden * activation_bytes(dtype) / (t if sp else 1)
    replicated, sharded, per_gpu = _parts(model, layout, dtype, attention, moe)
    return replicated / (t if sp else 1) + sharded / t + per_gpu


def moe_mla_layer_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str, attention: str = "flash",
                        moe: bool | None = None, policy: str | None = None) -> float:
    """Bytes one layer of a MoE or MLA model keeps for its backward (``policy``: the layer's
    recompute policy, default ``layout.recompute``; ``full-inner`` keeps nothing)."""
    policy = layout.recompute if policy is None else policy
    if policy == "full-inner":
        return 0.0
    policy = {"selective-op": "selective"}.get(policy, policy)
    if policy != layout.recompute:
        layout = replace(layout, recompute=policy)
    return _layer_bytes(model, layout, dtype, attention, moe)


def uses_moe_mla_bytes(model: ModelSpec) -> bool:
    """MoE and MLA models take their layers' saved bytes from this module."""
    return model.is_moe or model.is_mla
