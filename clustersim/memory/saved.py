"""What one transformer layer keeps for its backward pass, tensor by tensor (one micro-batch, one GPU).

``layer_saved(model, layout, dtype, kernels, policy)`` lists every tensor the forward leaves
alive for the backward, as the implementation keeps it; ``layer_activation_bytes`` in
activations.py is its sum. The list follows Korthikanti et al. 2022 (arXiv 2205.05198, §4.1,
Table 2: ``sbh(34 + 5as/h)`` for a GPT layer with fused kernels) and extends it op by op:

* norms (x2): the input and the statistics (LayerNorm: mean and rstd, RMSNorm: rstd, per token),
  then the normalised output, which the next GEMM keeps as its input. torch's composite
  ``rms_norm`` (the CPU path of aten/src/ATen/native/layer_norm.cpp rms_norm_composite) instead
  keeps an fp32 copy of the input and the fp32 normalised tensor (8 bytes per element) besides
  its output; on CUDA ``nn.RMSNorm`` runs the fused ``_fused_rms_norm`` kernel (input + rstd).
* attention: Q, K, V after RoPE (K, V ``kv_hidden`` wide for GQA, over the TP group; with fewer KV
  heads than tp ranks each rank keeps the one it computes); flash attention keeps its
  output O (also the out-projection's input, one tensor) and the fp32 log-sum-exp per head and
  token (FlashAttention-2, Dao 2023, arXiv 2307.08691, Algorithm 1-2: O and L are saved; torch's
  ``_scaled_dot_product_flash_attention`` returns (out, logsumexp, ...)); the unfused core keeps
  the softmax output, the dropout mask and the dropout output per score and the contiguous
  context as the out-projection's input (Korthikanti: ``5as^2b`` + ``2sbh``).
* Q and K norms (``qk_norm``, Qwen3): their input and an rstd per head and token; sandwich norms
  (Gemma 2/3) as the other norms.
* MLP: GeLU keeps its input and its output (the fc2 input), squared ReLU the ReLU output and its
  square, ReLU its output only (clustersim.compute.conventions); fused SwiGLU or GeGLU keeps the fc1 output
  (gate and up, 2f) and its output (f) (megatron/core/fusions/fused_bias_swiglu.py); eager
  SwiGLU ``w2(silu(w1 x) * w3 x)`` keeps w1's output, silu's output, w3's output and the product
  (4f; torchtitan FeedForward). MoE: the routed copies per top-k and the router probabilities.
* dropout masks (GPT-style models): 1 byte per element on CUDA (bool mask of native_dropout,
  aten/src/ATen/native/cuda/Dropout.cu), the activation dtype on CPU (Dropout.cpp multiplies by
  a noise tensor of the input's dtype).

Tensor parallelism (Korthikanti eq. 2/4): the norm inputs and outputs and the masks are whole on
every TP rank unless sequence parallelism splits them; the rest is split over tp. CP: tokens / cp.

Policies (per layer): ``none``; ``selective`` (Megatron, Korthikanti §5: the attention core is
recomputed from Q, K, V, so its internals - scores or the log-sum-exp - are dropped; Q, K, V stay
as the checkpoint's inputs, O as the out-projection's input); ``selective-op`` (torchtitan's
per-op policy, torchtitan/distributed/activation_checkpoint.py: keep the layer input, the
outputs of the GEMMs except every second one in execution order, and the attention kernel's
outputs O and log-sum-exp; everything else is recomputed); ``full`` (only the layer input).
``validation/saved_tensors.py`` counts what torch keeps for real blocks on CPU and
tests/memory/test_saved_tensors.py holds this list to those counts (within 2%).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from clustersim.compute.conventions import (
    activation_saved_widths,
    gated_factor,
    local_kv_heads,
    norm_statistics,
    uses_dropout,
)
from clustersim.compute.dtypes import activation_bytes
from clustersim.parallel.layout import ParallelLayout
from clustersim.workload.model_spec import ModelSpec

POLICIES = ("none", "selective", "selective-op", "full")


@dataclass(frozen=True, slots=True)
class Kernels:
    """How the kernels that run a layer keep their tensors.

    ``attention`` flash | standard; ``elementwise`` fused | eager (SwiGLU kept as 3f or 4f);
    ``norm`` fused | composite (torch's composite RMSNorm with fp32 copies, what CPU runs);
    ``mask_bytes`` per dropout-mask element; ``stat_bytes`` per norm statistic and token.
    """

    attention: str = "flash"
    elementwise: str = "fused"
    norm: str = "fused"
    mask_bytes: int = 1     # bool mask (CUDA native_dropout)
    stat_bytes: int = 4     # fp32 mean / rstd (CUDA layer_norm and _fused_rms_norm kernels)
    # a sliding window given to torch SDPA as a boolean attn_mask: the CPU flash kernel keeps it as an
    # additive s x s mask in the activation dtype (measured, validation/saved_tensors.py); flash kernels
    # with a window_size argument (FlashAttention-2, cuDNN through TE) keep no mask
    dense_window_mask: bool = False


GPU_FUSED = Kernels()


def cpu_kernels(dtype: str, attention: str = "flash", elementwise: str = "eager") -> Kernels:
    """What torch runs on CPU: composite RMSNorm, masks and LayerNorm statistics in the activation
    dtype (aten/src/ATen/native/layer_norm.cpp layer_norm_cpu: mean/rstd in the input's dtype)."""
    a = activation_bytes(dtype)
    return Kernels(attention=attention, elementwise=elementwise, norm="composite", mask_bytes=a, stat_bytes=a,
                   dense_window_mask=True)


@dataclass(frozen=True, slots=True)
class Saved:
    """One tensor kept for the backward: the op that keeps it, what it is, its bytes on one GPU."""

    op: str
    tensor: str
    bytes: float


class _Shape:
    """Per-GPU sizes of one layer and micro-batch."""

    def __init__(self, model: ModelSpec, layout: ParallelLayout, dtype: str) -> None:
        self.a = activation_bytes(dtype)
        self.tp = layout.tp
        self.sp = layout.sequence_parallel and layout.tp > 1
        self.tokens = layout.micro_batch * math.ceil(model.seq_len / layout.cp)     # T = b s / cp
        self.repl = self.tokens / self.tp if self.sp else float(self.tokens)         # tokens of whole-tensor ops
        self.h, self.f = model.hidden, model.ffn_hidden
        self.q = model.q_width                                    # heads * head_dim (= h unless stated)
        self.heads, self.seq = model.heads, model.seq_len
        self.dropout = uses_dropout(model)
        self.gate = gated_factor(model)
        self.norm_stats = norm_statistics(model)                  # LayerNorm (GPT) | RMSNorm (Llama)
        self.qk_norm = model.qk_norm and not model.is_mla
        # key/value width and heads summed over the TP group as its ranks hold them: a KV head
        # replicated over tp / kv_heads ranks (kv_heads < tp) is held, and saved, by each of them,
        # as the QKV GEMM computes it (clustersim.compute.conventions.local_kv_heads)
        self.kv_heads = local_kv_heads(model, layout.tp) * layout.tp
        self.kv = self.kv_heads * (model.kv_hidden // model.kv_heads)
        self.sandwich = model.sandwich_norm
        self.window_mask = model.attention_pattern == "sliding" and model.is_local_layer(0) \
            and model.attention_window < model.seq_len


def _norm(c: _Shape, k: Kernels, op: str) -> list[Saved]:
    n = c.repl * c.h
    if k.norm == "composite" and c.norm_stats == 1:
        return [Saved(op, "fp32 copy of the input", 4 * n), Saved(op, "fp32 normalised input", 4 * n),
                Saved(op, "rstd (fp32, per token)", 4 * c.repl)]
    return [Saved(op, "input", c.a * n), Saved(op, "statistics (per token)", c.norm_stats * k.stat_bytes * c.repl)]


def _qk_norm(c: _Shape, k: Kernels) -> list[Saved]:
    """Per-head RMSNorm of Q and K (``qk_norm``): its input (the QKV GEMM's Q and K) and one rstd
    per head and token; torch's composite RMSNorm (CPU) keeps fp32 copies as ``_norm`` does."""
    if not c.qk_norm:
        return []
    t = c.tokens / c.tp
    n = t * (c.q + c.kv)
    rows = t * (c.heads + c.kv_heads)
    if k.norm == "composite":
        return [Saved("qk_norm", "fp32 copy of Q and K", 4 * n), Saved("qk_norm", "fp32 normalised Q and K", 4 * n),
                Saved("qk_norm", "rstd (fp32, per head and token)", 4 * rows)]
    return [Saved("qk_norm", "input = Q and K before the norm", c.a * n),
            Saved("qk_norm", "rstd (per head and token)", k.stat_bytes * rows)]


def _attention_core(c: _Shape, k: Kernels, policy: str) -> list[Saved]:
    t = c.tokens / c.tp
    out = [Saved("attention", "Q, K, V", c.a * t * (c.q + 2 * c.kv))]
    if k.attention == "flash":
        out.append(Saved("attn_out_proj", "input = attention output O", c.a * t * c.q))
        if policy != "selective":
            out.append(Saved("attention", "log-sum-exp (fp32, per head and token)", 4 * c.heads * c.tokens / c.tp))
            if c.window_mask and k.dense_window_mask:
                out.append(Saved("attention", "additive window mask (s x s, CPU SDPA)", c.a * c.seq * c.seq))
        return out
    if policy != "selective":
        scores = c.heads * c.tokens * c.seq / c.tp                  # b a (s / cp) s on one TP rank
        out.append(Saved("attention", "softmax output (per score)", c.a * scores))
        if c.dropout:
            out += [Saved("attention", "dropout mask (per score)", k.mask_bytes * scores),
                    Saved("attention", "dropout output (per score)", c.a * scores)]
    out.append(Saved("attn_out_proj", "input (contiguous context)", c.a * t * c.q))
    return out


def _mlp(c: _Shape, k: Kernels, model: ModelSpec) -> list[Saved]:
    t = c.tokens / c.tp
    if model.is_moe:
        routed = t * model.moe_top_k
        return [Saved("moe", "routed tokens (permuted fc1 inputs)", c.a * routed * c.h),
                Saved("moe", "expert fc1 outputs", c.a * routed * c.f * c.gate),
                Saved("moe", "expert fc2 inputs", c.a * routed * c.f),
                Saved("moe", "router probabilities (fp32)", 4 * t * model.moe_experts)]
    act = model.ffn_act
    if c.gate == 1:
        kept = activation_saved_widths(model)   # GeLU its input, squared ReLU the ReLU output, ReLU nothing
        what = {"gelu": "input = fc1 output", "squared-relu": "ReLU output (the square's input)"}.get(act, "")
        return [Saved("activation", what, c.a * t * c.f)] * kept + [Saved("fc2", "input", c.a * t * c.f)]
    unit = "silu" if act == "swiglu" else "gelu"
    if k.elementwise == "eager":
        return [Saved(unit, "input = w1 output", c.a * t * c.f), Saved("mul", f"{unit} output", c.a * t * c.f),
                Saved("mul", "w3 output", c.a * t * c.f), Saved("fc2", "input = product", c.a * t * c.f)]
    return [Saved(act, "input = fc1 output (gate, up)", 2 * c.a * t * c.f), Saved("fc2", "input", c.a * t * c.f)]


def _selective_op(c: _Shape, model: ModelSpec) -> list[Saved]:
    """torchtitan's per-op policy: GEMM outputs in execution order, every second one recomputed;
    the attention kernel's outputs; the layer input (the checkpoint's input)."""
    t = c.tokens / c.tp
    gemms = [("wq", t * c.q), ("wk", t * c.kv), ("wv", t * c.kv),
             ("wo", float(c.tokens) * c.h)]                        # row-parallel: a full T x h partial sum
    if model.is_moe:
        routed = t * model.moe_top_k
        gemms += [("router", c.tokens * model.moe_experts * 1.0), ("expert_fc1", routed * c.f * c.gate),
                  ("expert_fc2", routed * c.h)]
    elif c.gate == 2:
        gemms += [("w1", t * c.f), ("w3", t * c.f), ("w2", float(c.tokens) * c.h)]
    else:
        gemms += [("fc1", t * c.f), ("fc2", float(c.tokens) * c.h)]
    out = [Saved("layer", "input (checkpoint input)", c.a * c.repl * c.h)]
    out += [Saved(name, "output", c.a * n) for i, (name, n) in enumerate(gemms) if i % 2 == 0]
    out += [Saved("attention", "output O", c.a * t * c.q),
            Saved("attention", "log-sum-exp (fp32, per head and token)", 4 * c.heads * c.tokens / c.tp)]
    if c.sp:   # the reduce-scatter outputs after wo and w2 (torchtitan's save list names reduce_scatter_tensor)
        out += [Saved("wo", "reduce-scatter output", c.a * c.repl * c.h),
                Saved("w2", "reduce-scatter output", c.a * c.repl * c.h)]
    return out


def layer_saved(model: ModelSpec, layout: ParallelLayout, dtype: str, kernels: Kernels = GPU_FUSED,
                policy: str | None = None) -> tuple[Saved, ...]:
    """Tensors one layer keeps for its backward (one micro-batch, one GPU). ``policy`` defaults to
    ``layout.recompute``."""
    policy = layout.recompute if policy is None else policy
    if policy not in POLICIES:
        from clustersim.errors import InputError
        raise InputError("parallel.recompute", policy, POLICIES)
    c = _Shape(model, layout, dtype)
    if policy == "full":
        return (Saved("layer", "input (checkpoint input)", c.a * c.repl * c.h),)
    if policy == "selective-op":
        return tuple(_selective_op(c, model))
    mask = [Saved("bias_dropout_add", "dropout mask", kernels.mask_bytes * c.repl * c.h)] if c.dropout else []
    post_attn = _norm(c, kernels, "post_attn_norm") if c.sandwich else []
    post_mlp = _norm(c, kernels, "post_mlp_norm") if c.sandwich else []
    # Megatron's --recompute-modules layernorm (parallel.recompute_modules, with selective): the norms'
    # outputs, the QKV and fc1 inputs, are rebuilt in the backward, not kept (as the MoE path drops them:
    # clustersim.memory.moe_saved; the dense path kept them and charged only the recompute's time)
    norm_out = "layernorm" not in (layout.recompute_modules if policy == "selective" else ())
    qkv_in = [Saved("qkv", "input = norm output", c.a * c.repl * c.h)] if norm_out else []
    fc1_in = [Saved("fc1", "input = norm output", c.a * c.repl * c.h)] if norm_out else []
    out = [*_norm(c, kernels, "input_norm"), *qkv_in,
           *_qk_norm(c, kernels), *_attention_core(c, kernels, policy), *post_attn, *mask,
           *_norm(c, kernels, "pre_mlp_norm"), *fc1_in,
           *_mlp(c, kernels, model), *post_mlp, *mask]
    return tuple(out)


def weight_gradient_operands(model: ModelSpec, layout: ParallelLayout, dtype: str) -> tuple[Saved, ...]:
    """What one dense layer holds between its input-gradient pass (B) and its weight-gradient
    pass (W) when the weight gradients are deferred (zero-bubble schedules; clustersim.plan.stage_work
    splits the backward the same way: W is the ``Op.wgrad`` GEMMs): each of the four GEMMs' weight
    gradient ``dW = X^T dY`` reads the GEMM's input ``X`` and its output gradient ``dY``, so both stay
    until W; B frees the rest (norms, attention internals, masks, the activation's input). GPT with
    unfused attention, no TP: inputs 2 + 2 + 2 + 8 sbh, output gradients 6 + 2 + 8 + 2 sbh, the
    Zero Bubble paper's ``w_mem = -32 h`` (per s b, zb_schedules.py on the ``arxiv`` branch at
    f68d3879, ``get_zero_bubble_forward_backward_func``). Column-parallel GEMMs (QKV, fc1) keep
    their input as the forward saves it (split under SP) and a 1/tp-wide output gradient;
    row-parallel ones (out-projection, fc2) a 1/tp-wide input and the whole ``T x h`` output
    gradient. MoE and MLA layers (clustersim.memory.moe_saved) are not listed: empty."""
    if model.is_moe or model.is_mla:
        return ()
    c = _Shape(model, layout, dtype)
    t = c.tokens / c.tp
    return (Saved("qkv", "input = norm output", c.a * c.repl * c.h),
            Saved("qkv", "output gradient (Q, K, V)", c.a * t * (c.q + 2 * c.kv)),
            Saved("attn_out_proj", "input = attention output", c.a * t * c.q),
            Saved("attn_out_proj", "output gradient", c.a * c.tokens * c.h),
            Saved("fc1", "input = norm output", c.a * c.repl * c.h),
            Saved("fc1", "output gradient", c.a * t * c.f * c.gate),
            Saved("fc2", "input", c.a * t * c.f),
            Saved("fc2", "output gradient", c.a * c.tokens * c.h))


def saved_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str, kernels: Kernels = GPU_FUSED,
                policy: str | None = None) -> float:
    return sum(s.bytes for s in layer_saved(model, layout, dtype, kernels, policy))


def recompute_working_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str, kernels: Kernels,
                            policy: str, group_layers: int = 1) -> float:
    """Bytes a recomputed layer (or group of ``group_layers`` layers, Megatron's uniform method)
    rebuilds during its backward on top of what it kept: the whole layer for ``full``, the
    recomputed rest for the selective policies."""
    if policy == "none":
        return 0.0
    whole = saved_bytes(model, layout, dtype, kernels, "none")
    kept = saved_bytes(model, layout, dtype, kernels, policy)
    return max(0.0, whole * group_layers - kept) if policy == "full" else max(0.0, whole - kept)


__all__ = ["GPU_FUSED", "POLICIES", "Kernels", "Saved", "cpu_kernels", "layer_saved", "recompute_working_bytes",
           "saved_bytes", "weight_gradient_operands"]
