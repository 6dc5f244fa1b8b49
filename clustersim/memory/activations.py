"""Activation memory per layer and micro-batch, after Korthikanti et al. 2022 (arXiv 2205.05198).

Korthikanti §4.1, Table 2: one GPT layer stores ``s b h (34 + 5 a s / h)`` bytes in 16-bit
precision without parallelism. Term by term (bytes, 16-bit activations, 1-byte dropout masks):

* attention block 11 sbh + 5 a s^2 b: LN output / QKV input 2, Q and K 4, V 2, out-projection
  input 2, dropout mask 1; softmax output 2 a s^2 b, its dropout mask a s^2 b, dropout output 2 a s^2 b
* MLP 19 sbh: fc1 input 2, GELU input 8 (4h wide), fc2 input 8, dropout mask 1
* two layer norms' inputs: 4 sbh

Adaptations (each stated, each derived):
* Flash attention keeps no s x s matrix: the 5 a s^2 b term becomes the fp32 log-sum-exp,
  4 a s b bytes (FlashAttention-2 §3.1 saves only O and logsumexp for the backward pass).
* GQA: K and V are kv_hidden wide: 2 sbh x kv_hidden/h each.
* MLP of width f, gated (SwiGLU) or not: fc1 output (activation input) 2 s b f x gate and the fc2
  input 2 s b f (gate = 2 for SwiGLU); MoE layers: per GPU, the permuted token copies and expert
  activations of the busiest expert rank (``_moe_bytes``); MLA: its latents and per-head Q, K, V.
* Dropout masks only where the model uses dropout (clustersim.compute.conventions).
* FP8 training keeps the inputs of the linear layers in FP8 for the weight-gradient GEMM
  (Transformer Engine saves the quantized input; Megatron-Core MoE README, "FP8 Training":
  "50% activation reduction: stores linear layer inputs in FP8 instead of BF16"; DeepSeek-V3
  §3.3.3 caches the activations of the linear operators in FP8): 1 byte for those terms.
* TP without SP (Korthikanti eq. 2): the LN inputs, the QKV and fc1 inputs and the masks (10 sbh
  for GPT) stay replicated, the rest is divided by t; with SP (eq. 4) everything is divided by t.
* CP: every term is per token, so s -> s / cp.
* Selective recompute (Korthikanti §5) drops the attention core's s^2 terms - with flash attention
  there are none, so it stores the same as no recompute. Megatron's ``--recompute-modules``
  (``parallel.recompute_modules``) drop more: "layernorm" the norms' outputs, "mla_up_proj" the
  MLA queries, keys and values (rebuilt from the saved latents), "moe_act" the experts' fc2
  inputs (rebuilt from the SwiGLU inputs) - the ops they re-run are the layer's recompute pass.
* Full recompute: only the layer input, 2 sbh (/t with SP), per layer (Korthikanti §4.1 "2sbhL");
  the layer being recomputed needs its full activations once (``recompute_working_bytes``).
"""

from __future__ import annotations

import math

from clustersim.compute.conventions import gated_factor, uses_dropout
from clustersim.compute.dtypes import activation_bytes, gemm_operand_bytes
from clustersim.compute.routing import load_factor
from clustersim.parallel.layout import ParallelLayout
from clustersim.workload.model_spec import ModelSpec


def _moe_bytes(model: ModelSpec, layout: ParallelLayout, a_b: int, lin_b: int) -> float:
    """Bytes one GPU keeps for a MoE MLP (Megatron-Core MoELayer with the alltoall dispatcher):
    the fp32 router probabilities of its ``t`` tokens, the permuted tokens each expert GEMM reads
    (``t k etp x load`` on the busiest rank, clustersim.compute.moe), the SwiGLU input (gate and
    up, ``f_e / etp`` wide) and the fc2 input; shared experts as a dense MLP of width
    ``shared f_e / tp`` on the TP-gathered tokens plus their gathered input."""
    tp, etp = layout.tp, layout.etp
    tokens = layout.micro_batch * math.ceil(model.seq_len / layout.cp)
    t = math.ceil(tokens / tp) if tp > 1 else tokens
    pairs = t * model.moe_top_k * etp * load_factor(model)
    f = math.ceil(model.moe_expert_ffn_hidden / etp)
    routed = pairs * ((model.hidden + f) * lin_b + f * gated_factor(model) * a_b) + t * model.moe_experts * 4
    shared_f = math.ceil(model.moe_shared_experts * model.moe_expert_ffn_hidden / tp)
    shared = tokens * shared_f * (gated_factor(model) * a_b + lin_b) if shared_f else 0.0
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
    if model.is_mla:
        rep, attention = _mla_parts(model, tokens, a_b, lin_b)
        replicated += rep
    else:
        kv_ratio = model.kv_hidden / h
        # sharded: Q, K, V, out-projection input (a linear input), log-sum-exp (fp32 per head and token)
        attention = tokens * h * a_b * (1 + 2 * kv_ratio) + tokens * h * lin_b
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
        mlp = tokens * f * (a_b * gated_factor(model) + lin_b)
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


def layer_activation_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str, attention: str = "flash",
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


def recompute_working_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str, attention: str = "flash") -> float:
    """Full recompute: the one layer being recomputed holds its full activations during its backward."""
    if layout.recompute != "full":
        return 0.0
    replicated, sharded, per_gpu = _parts(model, layout, dtype, attention)
    sp = layout.sequence_parallel and layout.tp > 1
    return replicated / (layout.tp if sp else 1) + sharded / layout.tp + per_gpu


def embedding_activation_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str) -> float:
    """First stage: the embedding output's dropout mask (Korthikanti §4.3, 'sbh/t' with SP)."""
    if not uses_dropout(model):
        return 0.0
    tokens = layout.micro_batch * math.ceil(model.seq_len / layout.cp)
    sp = layout.sequence_parallel and layout.tp > 1
    return tokens * model.hidden / (layout.tp if sp else 1)


def output_activation_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str) -> float:
    """Last stage: final-norm input, the logits GEMM input and the fp32 logits / softmax kept by the
    cross-entropy for its backward (Korthikanti §4.3: '4 s b v / t' for the fp32 logits;
    Megatron's vocab_parallel_cross_entropy saves exp_logits / sum in fp32)."""
    a_b = activation_bytes(dtype)
    tokens = layout.micro_batch * math.ceil(model.seq_len / layout.cp)
    t = layout.tp
    sp = layout.sequence_parallel and t > 1
    norm_in = tokens * model.hidden * a_b / (t if sp else 1)
    gemm_in = tokens * model.hidden * a_b / (t if sp else 1)   # SP saves the sharded input, re-gathers in bwd
    logits = tokens * math.ceil(model.vocab / t) * 4
    return norm_in + gemm_in + logits
