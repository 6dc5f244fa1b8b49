"""Activation memory per layer and micro-batch, and the stage ends (embedding, logits and loss).

Per layer the bytes are the sum of ``clustersim.memory.saved.layer_saved`` (tensor by tensor,
Korthikanti et al. 2022, arXiv 2205.05198, Table 2, extended op by op; see that module). With
fused GPU kernels and no recompute a GPT layer keeps Korthikanti's ``sbh(34 + 5as/h)`` plus the
norms' fp32 statistics (8 bytes per token for each LayerNorm); flash attention replaces the
``5as^2b`` scores by the fp32 log-sum-exp ``4asb``; TP without SP keeps the norm inputs and
outputs and the masks whole (eq. 2), SP splits everything (eq. 4); CP divides the tokens.

The recompute policies of the layers a rank holds come from ``clustersim.memory.policies``;
``rank_activation_bytes`` sums them, ``working_bytes`` is what the backward of one layer (or
one checkpointed group) adds on top for a moment: the recomputed tensors and the gradients.

Stage ends (Korthikanti §4.3; the loss per framework, clustersim/data/frameworks.yaml):
* first stage: the embedding output's dropout mask (GPT-style models);
* last stage: the final norm's input and statistics, the logits GEMM's input, and what the
  cross-entropy keeps per logit of the GPU's vocabulary shard (``loss_saved_bytes_per_logit``,
  fp32 softmax or log-softmax); while the loss runs, the bf16 logits and the fp32 copies it makes
  are alive at once (``loss_peak_bytes_per_logit``): the difference is a transient.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from clustersim.compute.conventions import gated_factor, norm_statistics, uses_dropout
from clustersim.compute.dtypes import activation_bytes
from clustersim.frameworks import FrameworkSpec
from clustersim.memory.buffers import grad_cast_bytes
from clustersim.memory.moe_saved import moe_mla_layer_bytes, uses_moe_mla_bytes
from clustersim.memory.policies import RankPolicies
from clustersim.memory.saved import (
    GPU_FUSED,
    Kernels,
    recompute_working_bytes,
    saved_bytes,
    weight_gradient_operands,
)
from clustersim.parallel.layout import ParallelLayout
from clustersim.workload.model_spec import ModelSpec

# Megatron-Core's loss as the default when no framework is given (clustersim/data/frameworks.yaml)
DEFAULT_LOSS_SAVED = 4
DEFAULT_LOSS_PEAK = 6


def gpu_kernels(attention: str = "flash", elementwise: str = "fused") -> Kernels:
    """The kernels a GPU runs: bool dropout masks, fp32 norm statistics, fused RMSNorm (TE,
    apex, or torch's CUDA ``_fused_rms_norm``); ``elementwise`` fused | eager for SwiGLU."""
    return Kernels(attention=attention, elementwise=elementwise)


def _tokens(model: ModelSpec, layout: ParallelLayout) -> tuple[int, float]:
    """(T, tokens of whole-tensor ops): T = b s / cp; / tp under sequence parallelism."""
    t = layout.micro_batch * math.ceil(model.seq_len / layout.cp)
    sp = layout.sequence_parallel and layout.tp > 1
    return t, (t / layout.tp if sp else float(t))


def layer_activation_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str, attention: str = "flash",
                           kernels: Kernels | None = None, policy: str | None = None,
                           moe: bool | None = None) -> float:
    """Bytes one layer keeps for the backward pass of one micro-batch on one GPU (policy:
    ``layout.recompute`` unless given; ``full-inner`` keeps nothing). MoE and MLA models:
    clustersim.memory.moe_saved (``moe``: the layer's kind, None: MoE for a MoE model)."""
    if policy == "full-inner":
        return 0.0
    if uses_moe_mla_bytes(model):
        return moe_mla_layer_bytes(model, layout, dtype, kernels.attention if kernels else attention, moe, policy)
    k = kernels or gpu_kernels(attention)
    return saved_bytes(model, layout, dtype, k, policy)


def weight_gradient_share(model: ModelSpec, layout: ParallelLayout, dtype: str, kernels: Kernels | None = None,
                          policy: str | None = None) -> float:
    """The part of one micro-batch's activation a layer still holds after its input-gradient pass
    (B) until its weight-gradient pass (W), as a fraction of what its forward keeps
    (``layer_activation_bytes``, policy ``layout.recompute`` unless given): the weight-gradient
    GEMMs' inputs and output gradients (``saved.weight_gradient_operands``). A zero-bubble rank's
    memory then grows by 1 per F, falls by ``1 - share`` per B and by ``share`` per W (it exceeds
    1 where recompute keeps less than W reads: B rebuilds it). One value per layer, as the paper's
    schedule takes one (34 h + 5 a s, -32 h); MoE and MLA layers, whose operands are not listed,
    and a layer that keeps nothing: 1 (held whole from F to W)."""
    held = sum(s.bytes for s in weight_gradient_operands(model, layout, dtype))
    kept = layer_activation_bytes(model, layout, dtype, kernels=kernels, policy=policy)
    if not held or kept <= 0:
        return 1.0
    return held / kept


def backward_working_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str) -> float:
    """Gradients alive during one layer's backward: the output and residual gradients (whole
    tensors, split by SP) and the MLP's intermediate gradients (fc2 input, fc1 output; split by tp)."""
    a = activation_bytes(dtype)
    t, repl = _tokens(model, layout)
    if model.is_moe:   # the routed experts' intermediate gradients (width expert_ffn_hidden / etp)
        f = math.ceil(model.moe_expert_ffn_hidden / layout.etp)
    else:
        f = math.ceil(model.ffn_hidden / layout.tp)
    width = f * (gated_factor(model) + 1) * (model.moe_top_k if model.is_moe else 1)
    return a * (2 * repl * model.hidden + t * width)


def working_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str, kernels: Kernels,
                  policies: RankPolicies) -> float:
    """What the backward of the rank's most demanding layer adds for a moment: its recomputed
    tensors (the whole checkpointed group for Megatron's uniform method) and its gradients."""
    worst = 0.0
    for p, _ in policies.counts:
        if p in ("none", "full-inner"):
            continue
        group = policies.group_layers if p == "full" else 1
        if uses_moe_mla_bytes(model):   # as saved.recompute_working_bytes, with moe_saved's counts
            whole = moe_mla_layer_bytes(model, layout, dtype, kernels.attention, None, "none")
            kept = moe_mla_layer_bytes(model, layout, dtype, kernels.attention, None, p)
            worst = max(worst, max(0.0, whole * group - kept) if p == "full" else max(0.0, whole - kept))
            continue
        worst = max(worst, recompute_working_bytes(model, layout, dtype, kernels, p, group))
    return worst + backward_working_bytes(model, layout, dtype)


def recompute_working_bytes_for(model: ModelSpec, layout: ParallelLayout, dtype: str,
                                attention: str = "flash") -> float:
    """Former API: a full-recompute layer's working set (0 for other policies)."""
    if layout.recompute != "full":
        return 0.0
    return recompute_working_bytes(model, layout, dtype, gpu_kernels(attention), "full")


def embedding_activation_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str,
                               kernels: Kernels = GPU_FUSED) -> float:
    """First stage: the embedding output's dropout mask (Korthikanti §4.3, 'sbh/t' with SP)."""
    if not uses_dropout(model):
        return 0.0
    _, repl = _tokens(model, layout)
    return repl * model.hidden * kernels.mask_bytes


def _logits(model: ModelSpec, layout: ParallelLayout) -> float:
    t, _ = _tokens(model, layout)
    return float(t * math.ceil(model.vocab / layout.tp))


def output_activation_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str,
                            framework: FrameworkSpec | None = None, kernels: Kernels = GPU_FUSED) -> float:
    """Last stage: final-norm input and statistics, the logits GEMM input (SP keeps it split and
    re-gathers it in the backward) and what the cross-entropy keeps per logit."""
    a = activation_bytes(dtype)
    _, repl = _tokens(model, layout)
    stats = norm_statistics(model) * kernels.stat_bytes * repl
    saved = framework.loss_saved_bytes_per_logit if framework else DEFAULT_LOSS_SAVED
    return 2 * repl * model.hidden * a + stats + saved * _logits(model, layout)


def loss_transient_bytes(model: ModelSpec, layout: ParallelLayout, framework: FrameworkSpec | None = None) -> float:
    """Last stage: logits and copies alive while the loss runs, beyond what it keeps."""
    saved = framework.loss_saved_bytes_per_logit if framework else DEFAULT_LOSS_SAVED
    peak = framework.loss_peak_bytes_per_logit if framework else DEFAULT_LOSS_PEAK
    return max(0, peak - saved) * _logits(model, layout)


@dataclass(frozen=True, slots=True)
class LayerUnits:
    """Per micro-batch bytes that a stage's activations are made of (one GPU)."""

    per_policy: tuple[tuple[str, float], ...]   # one layer's saved bytes, per recompute policy present
    working: float                              # ``working_bytes`` of the stage's layers
    embedding: float                            # first stage
    output: float                               # last stage (with the MTP modules' output-head passes)
    loss: float                                 # last stage: ``loss_transient_bytes``
    mtp: float = 0.0                            # the MTP modules' layers, on their stage (the last by default)
    # the fp32 copy of a layer's / the vocabulary shard's largest gradient after a backward
    # (clustersim.memory.buffers.grad_cast_bytes; 0 unless the framework keeps its 16-bit .grad)
    grad_cast: float = 0.0
    vocab_grad_cast: float = 0.0


def layer_units(model: ModelSpec, layout: ParallelLayout, dtype: str, framework: FrameworkSpec | None,
                kernels: Kernels, policies: RankPolicies, moe_share: float | None = None) -> LayerUnits:
    """``moe_share``: the MoE layers' share of the rank's layers (a MoE model's dense first
    layers keep less; None: all MoE for a MoE model). The last stage's output part includes the
    multi-token-prediction modules' passes of the output head; ``mtp`` their layers, on the stage
    that runs them (the last, or where a pipeline layout puts them: docs/parallel.md)."""
    def per_layer(p: str) -> float:
        if not model.is_moe or moe_share is None or moe_share >= 1.0:
            return layer_activation_bytes(model, layout, dtype, kernels=kernels, policy=p)
        moe_b = layer_activation_bytes(model, layout, dtype, kernels=kernels, policy=p, moe=True) if moe_share else 0.0
        dense_b = layer_activation_bytes(model, layout, dtype, kernels=kernels, policy=p, moe=False)
        return moe_share * moe_b + (1.0 - moe_share) * dense_b

    per = tuple((p, per_layer(p)) for p, _ in policies.counts)
    output = output_activation_bytes(model, layout, dtype, framework, kernels) * (1 + model.mtp_layers)
    mtp = model.mtp_layers * layer_activation_bytes(model, layout, dtype, kernels=kernels) if model.mtp_layers else 0.0
    return LayerUnits(per, working_bytes(model, layout, dtype, kernels, policies),
                      embedding_activation_bytes(model, layout, dtype, kernels),
                      output, loss_transient_bytes(model, layout, framework), mtp,
                      *grad_cast_bytes(model, layout, framework))


def combine(units: LayerUnits, policies: RankPolicies, stage_layers: int, in_flight: float, first: bool,
            last: bool, ends: tuple[float, float], backward_buffers: float,
            mtp_in_flight: float | None = None) -> tuple[float, float]:
    """(activations in flight, transient) of one GPU of a stage: the layers' bytes times the
    micro-batches in flight, the stage ends' times their own chunks' in flight; the transient is
    the larger of the loss's logits copies (last stage, end of a forward) and what a backward adds
    (the recomputed layer, its gradients and ``backward_buffers``, ZeRO-3 gradients in flight). A
    stage with no layer (the split left it only the embedding and/or the loss) has no layer
    backward: its transient is the loss's logits copies when it holds the loss. Where the framework
    keeps its 16-bit .grad (DeepSpeed BF16_Optimizer), the fp32 copy of the largest gradient that
    follows each backward (``units.grad_cast``; the vocabulary shard's on a stage holding the
    embedding) counts where it exceeds the backward's set plus the activations of the micro-batch
    that backward has just released."""
    per = dict(units.per_policy)
    one = sum(n * per[p] for p, n in policies.counts)   # one micro-batch's layers
    act = one * in_flight
    if first:
        act += units.embedding * ends[0]
    # the MTP modules' layers times their chunk's micro-batches in flight (None: with the output, on the last stage)
    if mtp_in_flight is None:
        if last:
            act += (units.output + units.mtp) * ends[1]
    else:
        if last:
            act += units.output * ends[1]
        act += units.mtp * mtp_in_flight
    transient = 0.0
    if stage_layers and in_flight:
        transient = units.working + backward_buffers
        if last:
            transient = max(transient, units.loss)
    elif not stage_layers and last and ends[1]:
        transient = units.loss
    cast = max(units.grad_cast, units.vocab_grad_cast if first or last else 0.0)
    if cast and in_flight:
        transient = max(transient, cast - one)
    return act, transient


__all__ = ["LayerUnits", "combine", "layer_units", "backward_working_bytes", "embedding_activation_bytes", "gpu_kernels", "layer_activation_bytes",
           "loss_transient_bytes", "output_activation_bytes", "weight_gradient_share", "working_bytes"]
