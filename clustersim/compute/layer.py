"""One transformer layer, one micro-batch, one GPU: every op in execution order (Megatron-LM).

Token counts per GPU: ``T = b * s / cp`` tokens pass through the GEMMs of each TP rank (TP splits
the weights, not the tokens); with sequence parallelism the norms and the residual /
bias-dropout-add ops work on ``T / tp`` tokens (Korthikanti et al. 2022, arXiv 2205.05198, §4.2.2).

Communication (Shoeybi et al. 2019, arXiv 1909.08053, §3, the f / g conjugate operators;
Korthikanti et al. 2022 §4.2.2 for sequence parallelism):
* forward, no SP: an all_reduce of T x h after the attention out-projection and after the MLP
  down-projection; backward: the conjugates, an all_reduce of the input gradient of the QKV and of
  the first MLP GEMM. Megatron issues those backward all_reduces asynchronously and runs the
  weight-gradient GEMM meanwhile (LinearWithGradAccumulationAndAsyncCommunication in
  megatron/core/tensor_parallel/layers.py), so they are marked overlappable.
* with SP: all_gather before and reduce_scatter after each block (same bytes on the wire);
  backward: all_gather of the output gradient, an all_gather of the saved sharded input for the
  weight gradient (overlapped with the data-gradient GEMM) and a reduce_scatter of the input
  gradient (overlapped with the weight-gradient GEMM), as in layers.py above.
* ``tp_comm_overlap`` (userbuffers, Megatron --tp-comm-overlap) makes every TP collective overlappable.
* CP (ring attention, Transformer Engine's context-parallel attention): the K, V shards travel
  around the ring during the attention core, overlapped with the per-chunk attention; modelled as
  an all_gather of the full K, V; backward sends K, V again and reduce-scatters dK, dV.
* EP: all_to_all dispatch before and combine after the experts (Megatron-Core MoE AlltoAll token
  dispatcher); the same two in backward.
* sizes follow nccl-tests: full buffer for all_reduce, gathered total for the others.

``Op.flops`` counts matrix (tensor-core) FLOPs only; element-wise ops carry bytes.
"""

from __future__ import annotations

import functools
import math

from clustersim.compute.attention import attention_ops
from clustersim.compute.attention_standard import standard_attention_ops
from clustersim.compute.conventions import gated_factor, local_kv_heads, resolve_attention, uses_dropout
from clustersim.compute.dtypes import activation_bytes, check_dtype
from clustersim.compute.gemm import linear_gemm_op
from clustersim.compute.ops import EMPTY_PASS, CommOp, LayerCost, Op, PassCost
from clustersim.compute.roofline import memory_bound_op
from clustersim.errors import InputError
from clustersim.hardware.spec import GpuSpec
from clustersim.parallel.layout import ParallelLayout
from clustersim.workload.model_spec import ModelSpec


def transformer_layer_cost(model: ModelSpec, layout: ParallelLayout, gpu: GpuSpec, dtype: str,
                           attention: str = "auto", elementwise: str = "fused", recompute: str | None = None,
                           recipe: str = "") -> LayerCost:
    """Forward, backward and recompute ops of one transformer layer for one micro-batch on one GPU.

    ``attention``: "flash", "standard" or "auto" (clustersim.compute.conventions.resolve_attention);
    ``elementwise``: "fused" (Megatron / TE kernels) or "eager" (torch ops one by one, torchtitan
    without torch.compile); ``recompute``: this layer's policy (default ``layout.recompute``;
    ``full-inner``, a later layer of a checkpointed group, recomputes like ``full``);
    ``recipe``: the fp8/fp4 scaling recipe ("" = the GPU's default, clustersim.compute.precision).
    """
    policy = layout.recompute if recompute is None else recompute
    return _layer_cost_by_key(model, layout.tp, layout.cp, layout.ep, layout.sequence_parallel, layout.micro_batch,
                              "full" if policy == "full-inner" else policy, layout.tp_comm_overlap, gpu, dtype,
                              attention, elementwise, recipe)


@functools.lru_cache(maxsize=8192)
def _layer_cost_by_key(model: ModelSpec, tp: int, cp: int, ep: int, sp: bool, micro_batch: int, recompute: str,
                       tp_comm_overlap: bool, gpu: GpuSpec, dtype: str, attention: str,
                       elementwise: str = "fused", recipe: str = "") -> LayerCost:
    layout = ParallelLayout(tp=tp, cp=cp, ep=ep, sequence_parallel=sp, micro_batch=micro_batch, recompute=recompute,
                            tp_comm_overlap=tp_comm_overlap)
    if elementwise not in ("fused", "eager"):
        raise InputError("elementwise", elementwise, ("fused", "eager"))
    return _layer_cost(model, layout, gpu, dtype, resolve_attention(attention, gpu.name), elementwise, recipe)


class _Ctx:
    """Shapes of one layer on one GPU (a plain namespace used while building the op lists)."""

    def __init__(self, model: ModelSpec, layout: ParallelLayout, gpu: GpuSpec, dtype: str, attention: str,
                 elementwise: str = "fused", recipe: str = "") -> None:
        check_dtype(dtype)
        tp, cp = layout.tp, layout.cp
        if model.heads % tp:
            raise InputError("parallel.tp", tp, f"a divisor of model.heads ({model.heads})")
        self.model, self.layout, self.gpu, self.dtype = model, layout, gpu, dtype
        self.tp, self.cp, self.sp = tp, cp, layout.sequence_parallel and tp > 1
        self.act_b = activation_bytes(dtype)
        self.s_local = math.ceil(model.seq_len / cp)
        self.tokens = layout.micro_batch * self.s_local                          # T
        self.tokens_sp = math.ceil(self.tokens / tp) if self.sp else self.tokens  # T or T / tp
        self.h = model.hidden
        self.d = model.head_dim
        self.heads = model.heads // tp
        self.kv_heads = local_kv_heads(model, tp)
        self.ffn = math.ceil(model.ffn_hidden / tp)
        self.gate = gated_factor(model)
        self.dropout = uses_dropout(model)
        self.overlap_all_tp = layout.tp_comm_overlap
        self.attention = attention
        self.eager = elementwise == "eager"
        self.rope = model.ffn_act == "swiglu"      # Llama-style models rotate Q and K (RoPE); GPT-style learn positions
        self.recipe = recipe

    def tp_comm(self, name: str, collective: str, overlappable: bool = False) -> CommOp:
        size = self.tokens * self.h * self.act_b
        return CommOp(name, collective, size, "tp", overlappable or self.overlap_all_tp)

    def gemm(self, name: str, m: int, n: int, k: int, batch: int = 1) -> Op:
        return linear_gemm_op(name, m, n, k, self.gpu, self.dtype, self.recipe, batch)

    def mem(self, name: str, elements_read: float, elements_written: float, extra_bytes: float = 0.0) -> Op:
        return memory_bound_op(name, (elements_read + elements_written) * self.act_b + extra_bytes, self.gpu)


def _norm_fwd(c: _Ctx, name: str) -> Op:
    n = c.tokens_sp * c.h
    return c.mem(name, n, n)                         # read x, write y (fp32 stats negligible)


def _norm_bwd(c: _Ctx, name: str) -> Op:
    n = c.tokens_sp * c.h
    return c.mem(name, 3 * n, 2 * n)                 # read x, dy, residual grad; write dx, summed residual grad


def _bda_fwd(c: _Ctx, name: str) -> Op:
    n = c.tokens_sp * c.h
    return c.mem(name, 2 * n, n, extra_bytes=n if c.dropout else 0)   # x + residual -> out (+ 1-byte mask)


def _bda_bwd(c: _Ctx, name: str) -> Op:
    n = c.tokens_sp * c.h
    return c.mem(name, n, n, extra_bytes=n if c.dropout else 0)       # grad through the dropout mask


def _attention(c: _Ctx) -> tuple[list[Op | CommOp], list[Op | CommOp]]:
    """(forward, backward) ops of the attention core, with the CP ring exchange around it."""
    m, b = c.model, c.layout.micro_batch
    if c.attention == "flash":
        f, g = attention_ops(b, c.s_local, m.seq_len, c.heads, c.kv_heads, c.d, c.gpu, c.dtype, c.act_b)
        fwd: list[Op | CommOp] = [f]
        bwd: list[Op | CommOp] = [g]
    else:
        fs, gs = standard_attention_ops(b, c.s_local, m.seq_len, c.heads, c.d, c.gpu, c.dtype, c.act_b, c.dropout)
        fwd, bwd = list(fs), list(gs)
    if c.cp > 1:
        kv_size = 2 * b * m.seq_len * c.kv_heads * c.d * c.act_b
        fwd = [CommOp("cp_kv_all_gather", "all_gather", kv_size, "cp", True), *fwd]
        bwd = [CommOp("cp_kv_all_gather_bwd", "all_gather", kv_size, "cp", True), *bwd,
               CommOp("cp_dkv_reduce_scatter", "reduce_scatter", kv_size, "cp", True)]
    return fwd, bwd


def _activation_fwd(c: _Ctx, name: str, tokens: float) -> Op:
    """GeLU or SwiGLU over ``tokens`` rows of the fc1 output. Fused (Megatron bias-GeLU /
    bias-SwiGLU): read the fc1 output (gate x f), write f. Eager SwiGLU (torchtitan
    ``w2(F.silu(w1(x)) * w3(x))``, two kernels): silu reads w1's output and writes its own, mul
    reads both operands and writes the product - 3f read, 2f written."""
    f = tokens * c.ffn
    if c.eager and c.gate == 2:
        return c.mem(name, 3 * f, 2 * f)
    return c.mem(name, f * c.gate, f)


def _activation_bwd(c: _Ctx, name: str, tokens: float) -> Op:
    """Fused: read the output gradient and the saved fc1 output, write its gradient. Eager
    SwiGLU: mul's backward reads the gradient and both saved operands and writes two gradients,
    silu's backward reads one of them and w1's output and writes w1's gradient (5f read, 3f written)."""
    f = tokens * c.ffn
    if c.eager and c.gate == 2:
        return c.mem(name, 5 * f, 3 * f)
    return c.mem(name, f * (c.gate + 1), f * c.gate)


def _rope(c: _Ctx, name: str) -> list[Op]:
    """RoPE on Q and K of Llama-style models. Fused (TE / Megatron fused RoPE): read and write each
    element. Eager (torchtitan apply_rotary_emb: ``view_as_complex(x.float())``, complex multiply,
    ``type_as``): cast up (read a, write 4 bytes), multiply (read 4, write 4), cast down (read 4,
    write a) - 2a + 16 bytes per element; the backward runs the same chain."""
    if not c.rope:
        return []
    n = c.tokens * (c.heads + c.kv_heads) * c.d
    per = 2 * c.act_b + 16 if c.eager else 2 * c.act_b
    return [memory_bound_op(name, n * per, c.gpu)]


def _mlp_fwd(c: _Ctx) -> list[Op | CommOp]:
    m, t = c.model, c.tokens
    if not m.is_moe:
        return [c.gemm("fc1", t, c.ffn * c.gate, c.h), _activation_fwd(c, "activation", t),
                c.gemm("fc2", t, c.h, c.ffn)]
    ep, e = c.layout.ep, m.moe_experts
    local_experts = max(1, e // ep)
    routed = t * m.moe_top_k                                # token-expert assignments this GPU computes
    per_expert = math.ceil(routed / local_experts)
    ops: list[Op | CommOp] = [
        c.gemm("router", t, e, c.h),
        memory_bound_op("router_topk", t * e * 4 * 2, c.gpu),     # fp32 softmax + top-k over E logits
        c.mem("permute", t * c.h, routed * c.h),
    ]
    if ep > 1:
        ops.append(CommOp("ep_dispatch", "all_to_all", routed * c.h * c.act_b, "ep"))
    ops += [c.gemm("expert_fc1", per_expert, c.ffn * c.gate, c.h, batch=local_experts),
            _activation_fwd(c, "expert_activation", routed),
            c.gemm("expert_fc2", per_expert, c.h, c.ffn, batch=local_experts)]
    if ep > 1:
        ops.append(CommOp("ep_combine", "all_to_all", routed * c.h * c.act_b, "ep"))
    ops.append(c.mem("unpermute", routed * c.h, t * c.h))
    return ops


def _mlp_bwd(c: _Ctx) -> list[Op | CommOp]:
    m, t = c.model, c.tokens
    if not m.is_moe:
        return [c.gemm("fc2_dgrad", t, c.ffn, c.h), c.gemm("fc2_wgrad", c.h, c.ffn, t),
                _activation_bwd(c, "activation_bwd", t)]
    ep, e = c.layout.ep, m.moe_experts
    local_experts = max(1, e // ep)
    routed = t * m.moe_top_k
    per_expert = math.ceil(routed / local_experts)
    ops: list[Op | CommOp] = [c.mem("unpermute_bwd", t * c.h, routed * c.h)]
    if ep > 1:
        ops.append(CommOp("ep_combine_bwd", "all_to_all", routed * c.h * c.act_b, "ep"))
    ops += [c.gemm("expert_fc2_dgrad", per_expert, c.ffn, c.h, batch=local_experts),
            c.gemm("expert_fc2_wgrad", c.h, c.ffn, per_expert, batch=local_experts),
            _activation_bwd(c, "expert_activation_bwd", routed),
            c.gemm("expert_fc1_dgrad", per_expert, c.h, c.ffn * c.gate, batch=local_experts),
            c.gemm("expert_fc1_wgrad", c.ffn * c.gate, c.h, per_expert, batch=local_experts)]
    if ep > 1:
        ops.append(CommOp("ep_dispatch_bwd", "all_to_all", routed * c.h * c.act_b, "ep"))
    ops += [c.mem("permute_bwd", routed * c.h, t * c.h),
            c.gemm("router_dgrad", t, c.h, e), c.gemm("router_wgrad", e, c.h, t)]
    return ops


def _tp_in_bwd(c: _Ctx, prefix: str, dgrad: Op, wgrad: Op) -> list[Op | CommOp]:
    """Backward of a column-parallel GEMM whose forward input came through f (identity / all_gather)."""
    if c.tp == 1:
        return [dgrad, wgrad]
    if c.sp:
        return [c.tp_comm(f"{prefix}_input_all_gather", "all_gather", overlappable=True), dgrad,
                c.tp_comm(f"{prefix}_dgrad_reduce_scatter", "reduce_scatter", overlappable=True), wgrad]
    return [dgrad, c.tp_comm(f"{prefix}_dgrad_all_reduce", "all_reduce", overlappable=True), wgrad]


def _tp_out_fwd(c: _Ctx, name: str) -> list[CommOp]:
    if c.tp == 1:
        return []
    return [c.tp_comm(name, "reduce_scatter" if c.sp else "all_reduce")]


def _tp_out_bwd(c: _Ctx, name: str) -> list[CommOp]:
    """Conjugate of the row-parallel output collective: identity without SP, all_gather with SP."""
    return [c.tp_comm(name, "all_gather")] if c.sp else []


def _tp_in_fwd(c: _Ctx, name: str) -> list[CommOp]:
    return [c.tp_comm(name, "all_gather")] if c.sp else []


@functools.lru_cache(maxsize=4096)
def _layer_cost(model: ModelSpec, layout: ParallelLayout, gpu: GpuSpec, dtype: str, attention: str,
                elementwise: str = "fused", recipe: str = "") -> LayerCost:
    c = _Ctx(model, layout, gpu, dtype, attention, elementwise, recipe)
    t, h, d = c.tokens, c.h, c.d
    qkv_n = (c.heads + 2 * c.kv_heads) * d
    attn_n = c.heads * d
    attn_ops, attn_bwd_ops = _attention(c)

    fwd: list[Op | CommOp] = [_norm_fwd(c, "input_norm"), *_tp_in_fwd(c, "attn_input_all_gather"),
                              c.gemm("qkv", t, qkv_n, h), *_rope(c, "rope"), *attn_ops,
                              c.gemm("attn_out_proj", t, h, attn_n), *_tp_out_fwd(c, "attn_out_tp_reduce"),
                              _bda_fwd(c, "attn_bias_dropout_add"),
                              _norm_fwd(c, "pre_mlp_norm"), *_tp_in_fwd(c, "mlp_input_all_gather"),
                              *_mlp_fwd(c), *_tp_out_fwd(c, "mlp_out_tp_reduce"),
                              _bda_fwd(c, "mlp_bias_dropout_add")]

    mlp_bwd = _mlp_bwd(c)
    if model.is_moe:
        fc1_part: list[Op | CommOp] = mlp_bwd
        if c.tp > 1:   # the experts' input gradient still goes through the TP conjugate
            fc1_part = [*mlp_bwd, c.tp_comm("mlp_dgrad_tp_reduce", "reduce_scatter" if c.sp else "all_reduce",
                                            overlappable=False)]
    else:
        fc1_part = [*mlp_bwd, *_tp_in_bwd(c, "fc1", c.gemm("fc1_dgrad", t, h, c.ffn * c.gate),
                                          c.gemm("fc1_wgrad", c.ffn * c.gate, h, t))]
    bwd: list[Op | CommOp] = [_bda_bwd(c, "mlp_bias_dropout_add_bwd"), *_tp_out_bwd(c, "mlp_out_grad_all_gather"),
                              *fc1_part, _norm_bwd(c, "pre_mlp_norm_bwd"),
                              _bda_bwd(c, "attn_bias_dropout_add_bwd"), *_tp_out_bwd(c, "attn_out_grad_all_gather"),
                              c.gemm("attn_out_proj_dgrad", t, attn_n, h), c.gemm("attn_out_proj_wgrad", h, attn_n, t),
                              *attn_bwd_ops, *_rope(c, "rope_bwd"),
                              *_tp_in_bwd(c, "qkv", c.gemm("qkv_dgrad", t, h, qkv_n), c.gemm("qkv_wgrad", qkv_n, h, t)),
                              _norm_bwd(c, "input_norm_bwd")]

    if layout.recompute == "full":
        recompute = PassCost(tuple(fwd))
    elif layout.recompute == "selective":
        recompute = PassCost(tuple(attn_ops))    # Korthikanti 2022 §5: recompute the attention core only
    elif layout.recompute == "selective-op":
        recompute = PassCost(tuple(_selective_op_recompute(c, fwd)))
    else:
        recompute = EMPTY_PASS
    return LayerCost(PassCost(tuple(fwd)), PassCost(tuple(bwd)), recompute, layer_params_per_gpu(model, layout.tp,
                                                                                                 layout.ep))


def _part(op: Op, frac: float, name: str) -> Op:
    return Op(name, op.flops * frac, op.bytes_moved * frac, op.time_s * frac)


def _selective_op_recompute(c: _Ctx, fwd: list[Op | CommOp]) -> list[Op | CommOp]:
    """What torchtitan's per-op policy recomputes (torchtitan/distributed/activation_checkpoint.py:
    GEMM outputs are saved except every second one in execution order - wq, wk, wv, wo, w1, w3, w2
    -> wk, wo, w3 recomputed, or wk, wo, fc2 without a gate; attention kernel outputs and
    reduce-scatter outputs are saved): the element-wise ops, those GEMMs (wk as its share of the
    fused QKV GEMM, w3 as half of the fused gate/up GEMM) and the collectives other than
    reduce-scatters. MoE layers recompute their element-wise ops and the expert fc2 (every second
    GEMM)."""
    qkv_n = c.heads + 2 * c.kv_heads
    out: list[Op | CommOp] = []
    for op in fwd:
        if isinstance(op, CommOp):
            if op.collective != "reduce_scatter":
                out.append(op)
            continue
        if op.name == "attention_core" or op.name.startswith("attn_") and op.name != "attn_bias_dropout_add" \
                and op.name != "attn_out_proj":
            continue                                     # the attention kernel's outputs are saved
        if op.name == "qkv":
            out.append(_part(op, c.kv_heads / qkv_n, "wk"))
        elif op.name == "fc1":
            if c.gate == 2:
                out.append(_part(op, 0.5, "w3"))
        elif op.name in ("attn_out_proj", "fc2", "expert_fc2"):
            if op.name != "fc2" or c.gate == 1:
                out.append(op)
        elif op.name in ("router", "expert_fc1"):
            continue
        else:
            out.append(op)                               # norms, RoPE, activation, residual adds, permutes
    return out


def layer_params_per_gpu(model: ModelSpec, tp: int, ep: int = 1) -> int:
    """Parameters of one layer held by one GPU: attention and MLP split over tp, experts over ep."""
    h, d = model.hidden, model.head_dim
    heads, kv = model.heads // tp, local_kv_heads(model, tp)
    attention = h * heads * d * 2 + 2 * h * kv * d                 # Q and O; K and V
    if model.is_moe:
        mlp = expert_params_per_gpu(model, tp, ep)
    else:
        mlp = model.num_mlp_matrices * h * math.ceil(model.ffn_hidden / tp)
    router = h * model.moe_experts
    return attention + mlp + router + 4 * h                       # two norms (weight + bias), replicated


def expert_params_per_gpu(model: ModelSpec, tp: int, ep: int = 1) -> int:
    """Expert MLP parameters of one layer held by one GPU (0 for a dense model): the layer's
    experts split over ep, each expert's matrices over tp. Their gradients are reduced over the
    expert-data-parallel group (dp * cp / ep ranks), not over all dp * cp (Megatron-core MoE)."""
    if not model.is_moe:
        return 0
    experts = max(1, model.moe_experts // ep)
    return model.num_mlp_matrices * model.hidden * math.ceil(model.ffn_hidden / tp) * experts
