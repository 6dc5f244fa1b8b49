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
* ``tp_comm_overlap`` (userbuffers, Megatron --tp-comm-overlap) makes every TP collective overlappable;
  with sequence parallelism the GEMMs that hide them are cut into pieces or run on fewer SMs, as
  Transformer Engine's defaults do (clustersim.compute.tp_overlap).
* CP: ring attention (p2p), Ulysses (a2a) or both (a2a+p2p), clustersim.compute.context_parallel.
* Attention kinds: MHA / GQA here; multi-head latent attention in clustersim.compute.mla.
* MoE layers (after ``moe_first_dense_layers`` dense ones): clustersim.compute.moe (router,
  dispatch/combine over EP, expert TP, grouped expert GEMMs, shared experts).
* FP8 (Transformer Engine / DeepSeek-V3 recipes): the GEMM operands are quantized by separate
  memory-bound kernels before each FP8 GEMM (DeepSeek-V3 §3.3: activations per 1x128 tile,
  "per_token_cast"; weight-gradient GEMMs need transposed casts of both operands); the weights'
  FP8 copies are made once per step (clustersim.compute.dtypes.weight_bytes), so a forward or
  data-gradient GEMM casts its activation operand (read 16-bit, write 8-bit) and a
  weight-gradient GEMM both of its operands.
* sizes follow nccl-tests: full buffer for all_reduce, gathered total for the others.

``Op.flops`` counts matrix (tensor-core) FLOPs only; element-wise ops carry bytes.
"""

from __future__ import annotations

import functools
import math

from clustersim.compute.attention import attention_ops
from clustersim.compute.attention_standard import standard_attention_ops
from clustersim.compute.context_parallel import cp_attention
from clustersim.compute.conventions import local_kv_heads, resolve_attention
from clustersim.compute.glu_clamp import clamp_ops
from clustersim.compute.layer_context import LayerContext
from clustersim.compute.mla import mla_params_per_gpu, mla_projections_bwd, mla_projections_fwd
from clustersim.compute.moe import moe_backward, moe_forward, moe_params_per_gpu
from clustersim.compute.ops import EMPTY_PASS, CommOp, LayerCost, Op, PassCost
from clustersim.compute.precision import weight_cast_share
from clustersim.compute.roofline import memory_bound_op
from clustersim.errors import InputError
from clustersim.frameworks import DEFAULT_FRAMEWORK, megatron_family
from clustersim.hardware.spec import GpuSpec
from clustersim.parallel.layout import ParallelLayout
from clustersim.workload.model_spec import ModelSpec


def transformer_layer_cost(model: ModelSpec, layout: ParallelLayout, gpu: GpuSpec, dtype: str,
                           attention: str = "auto", moe: bool | None = None, gpus_per_node: int = 8,
                           elementwise: str = "fused", recompute: str | None = None, recipe: str = "",
                           local: bool | None = None, framework: str = DEFAULT_FRAMEWORK) -> LayerCost:
    """Forward, backward and recompute ops of one transformer layer for one micro-batch on one GPU.

    ``attention``: "flash", "standard" or "auto" (clustersim.compute.conventions.resolve_attention).
    ``moe``: a MoE layer (True) or a dense one (False); None: MoE for a MoE model.
    ``gpus_per_node``: where the EP group's ranks sit (the flex dispatcher's per-node copies).
    ``elementwise``: "fused" (Megatron / TE kernels) or "eager" (torch ops one by one, torchtitan
    without torch.compile); ``recompute``: this layer's policy (default ``layout.recompute``;
    ``full-inner``, a later layer of a checkpointed group, recomputes like ``full``);
    ``recipe``: the fp8/fp4 scaling recipe ("" = the GPU's default, clustersim.compute.precision);
    ``local``: a layer of the model's local attention span (sliding window or chunk) rather than
    full attention (None: as layer 0, ``ModelSpec.layer_kind``); ``framework``: the framework's name
    (Megatron's frameworks add the routed experts' fc2 bias expert by expert,
    clustersim.compute.expert_bias).
    """
    moe = model.is_moe if moe is None else (moe and model.is_moe)
    local = model.is_local_layer(0) if local is None else (local and model.has_local_attention)
    if elementwise not in ("fused", "eager"):
        raise InputError("elementwise", elementwise, ("fused", "eager"))
    policy = layout.recompute if recompute is None else recompute
    policy = "full" if policy == "full-inner" else policy
    bias_loop = moe and model.moe_expert_bias and megatron_family(framework)
    share = weight_cast_share(dtype, megatron_family(framework), layout.num_micro_batches)
    return _layer_cost(model, compute_layout(layout, policy), gpu, dtype, resolve_attention(attention, gpu.name),
                       moe, gpus_per_node if moe and layout.ep > 1 else 8, elementwise, recipe, local, bias_loop,
                       share)


def compute_layout(layout: ParallelLayout, recompute: str | None = None) -> ParallelLayout:
    """The fields of a layout that a layer's ops depend on (the cache key; dp, pp, batch, ZeRO
    and the schedule do not change one micro-batch's work on one GPU); ``recompute``: the
    layer's own policy (default ``layout.recompute``)."""
    recompute = layout.recompute if recompute is None else recompute
    return ParallelLayout(tp=layout.tp, cp=layout.cp, ep=layout.ep, sequence_parallel=layout.sequence_parallel,
                          micro_batch=layout.micro_batch, recompute=recompute,
                          tp_comm_overlap=layout.tp_comm_overlap, expert_tp=layout.etp, cp_comm=layout.cp_comm,
                          recompute_modules=layout.recompute_modules if recompute == "selective" else (),
                          hierarchical_cp_sizes=(layout.cp_a2a, layout.cp_p2p) if layout.cp > 1 else None)


def _norm_fwd(c: LayerContext, name: str) -> Op:
    n = c.tokens_sp * c.h
    return c.mem(name, n, n)                         # read x, write y (fp32 stats negligible)


def _norm_bwd(c: LayerContext, name: str) -> Op:
    n = c.tokens_sp * c.h
    return c.mem(name, 3 * n, 2 * n)                 # read x, dy, residual grad; write dx, summed residual grad


def _bda_fwd(c: LayerContext, name: str) -> Op:
    n = c.tokens_sp * c.h
    return c.mem(name, 2 * n, n, extra_bytes=n if c.dropout else 0)   # x + residual -> out (+ 1-byte mask)


def _bda_bwd(c: LayerContext, name: str) -> Op:
    n = c.tokens_sp * c.h
    return c.mem(name, n, n, extra_bytes=n if c.dropout else 0)       # grad through the dropout mask


def _attention(c: LayerContext, d_qk: int, d_v: int) -> tuple[list[Op | CommOp], list[Op | CommOp]]:
    """(forward, backward) ops of the attention core, with the CP exchanges around it."""
    m, b = c.model, c.layout.micro_batch
    if c.cp > 1:
        return cp_attention(c, d_qk, d_v)
    if c.attention == "flash" or m.is_mla:
        f, g = attention_ops(b, c.s_local, m.seq_len, c.heads, c.kv_heads, d_qk, c.gpu, c.dtype, c.act_b,
                             v_head_dim=d_v, pattern=c.pattern, window=c.window)
        return [f], [g]
    fs, gs = standard_attention_ops(b, c.s_local, m.seq_len, c.heads, c.d, c.gpu, c.dtype, c.act_b, c.dropout)
    return list(fs), list(gs)


def _activation_fwd(c: LayerContext, name: str, tokens: float) -> Op:
    """The activation over ``tokens`` rows of the fc1 output (GeLU, ReLU, squared ReLU; gated:
    SwiGLU, GeGLU). Fused (Megatron bias-GeLU / bias-SwiGLU / bias-GeGLU): read the fc1 output
    (gate x f), write f. Eager gated units (torchtitan
    ``w2(F.silu(w1(x)) * w3(x))``, two kernels): silu reads w1's output and writes its own, mul
    reads both operands and writes the product - 3f read, 2f written."""
    f = tokens * c.ffn
    if c.eager and c.gate == 2:
        return c.mem(name, 3 * f, 2 * f)
    return c.mem(name, f * c.gate, f)


def _activation_bwd(c: LayerContext, name: str, tokens: float) -> Op:
    """Fused: read the output gradient and the saved fc1 output, write its gradient. Eager
    SwiGLU: mul's backward reads the gradient and both saved operands and writes two gradients,
    silu's backward reads one of them and w1's output and writes w1's gradient (5f read, 3f written)."""
    f = tokens * c.ffn
    if c.eager and c.gate == 2:
        return c.mem(name, 5 * f, 3 * f)
    return c.mem(name, f * (c.gate + 1), f * c.gate)


def _rope(c: LayerContext, name: str) -> list[Op]:
    """RoPE on Q and K of Llama-style models. Fused (TE / Megatron fused RoPE): read and write each
    element. Eager (torchtitan apply_rotary_emb: ``view_as_complex(x.float())``, complex multiply,
    ``type_as``): cast up (read a, write 4 bytes), multiply (read 4, write 4), cast down (read 4,
    write a) - 2a + 16 bytes per element; the backward runs the same chain."""
    if not c.rope:
        return []
    n = c.tokens * (c.heads + c.kv_heads) * c.d
    per = 2 * c.act_b + 16 if c.eager else 2 * c.act_b
    return [memory_bound_op(name, n * per, c.gpu)]


def _qk_norm(c: LayerContext, name: str, backward: bool = False) -> list[Op]:
    """Per-head RMSNorm of Q and K before RoPE (Qwen3; Megatron --qk-layernorm, TE RMSNorm on the
    [tokens, heads, head_dim] view): forward reads and writes each element, backward reads the
    input and the output gradient and writes the input gradient (the rstd per row is fp32,
    negligible beside them)."""
    if not c.model.qk_norm or c.model.is_mla:
        return []
    n = c.tokens * (c.heads + c.kv_heads) * c.d
    return [c.mem(name, 2 * n, n) if backward else c.mem(name, n, n)]


def _sandwich_fwd(c: LayerContext, name: str) -> list[Op]:
    """Gemma 2/3's norm on a block's output before the residual add (``sandwich_norm``)."""
    return [_norm_fwd(c, name)] if c.model.sandwich_norm else []


def _sandwich_bwd(c: LayerContext, name: str) -> list[Op]:
    if not c.model.sandwich_norm:
        return []
    n = c.tokens_sp * c.h
    return [c.mem(name, 2 * n, n)]                   # read x, dy; write dx (the residual is added at the bda)


def _mlp_fwd(c: LayerContext) -> list[Op | CommOp]:
    """fc1, the activation (after the clamp of its halves, clustersim.compute.glu_clamp: Megatron's
    dense MLP runs it unfused, no cat) and fc2."""
    t = c.tokens
    return [c.gemm("fc1", t, c.ffn * c.gate, c.h), *clamp_ops(c, "activation_clamp", t, c.ffn, cat=False),
            _activation_fwd(c, "activation", t), c.gemm("fc2", t, c.h, c.ffn)]


def _mlp_bwd(c: LayerContext) -> list[Op | CommOp]:
    t = c.tokens
    return [c.gemm("fc2_dgrad", t, c.ffn, c.h), c.wgemm("fc2_wgrad", c.h, c.ffn, t),
            _activation_bwd(c, "activation_bwd", t),
            *clamp_ops(c, "activation_clamp_bwd", t, c.ffn, cat=False, backward=True)]


def _tp_in_bwd(c: LayerContext, prefix: str, dgrad: Op, wgrad: Op) -> list[Op | CommOp]:
    """Backward of a column-parallel GEMM whose forward input came through f (identity / all_gather)."""
    if c.tp == 1:
        return [dgrad, wgrad]
    if c.sp:
        return [c.tp_comm(f"{prefix}_input_all_gather", "all_gather", overlappable=True), dgrad,
                c.tp_comm(f"{prefix}_dgrad_reduce_scatter", "reduce_scatter", overlappable=True), wgrad]
    return [dgrad, c.tp_comm(f"{prefix}_dgrad_all_reduce", "all_reduce", overlappable=True), wgrad]


def _tp_out_fwd(c: LayerContext, name: str) -> list[CommOp]:
    if c.tp == 1:
        return []
    return [c.tp_comm(name, "reduce_scatter" if c.sp else "all_reduce")]


def _tp_out_bwd(c: LayerContext, name: str) -> list[CommOp]:
    """Conjugate of the row-parallel output collective: identity without SP, all_gather with SP."""
    return [c.tp_comm(name, "all_gather")] if c.sp else []


def _tp_in_fwd(c: LayerContext, name: str) -> list[CommOp]:
    return [c.tp_comm(name, "all_gather")] if c.sp else []


def _attention_block(c: LayerContext) -> tuple[list[Op | CommOp], list[Op | CommOp], list[Op | CommOp]]:
    """(forward, backward, attention core forward) of the attention block from the input norm's
    output to the out-projection's TP collective."""
    t, h, m = c.tokens, c.h, c.model
    if m.is_mla:
        core_f, core_b = _attention(c, m.head_dim, m.v_head_dim)
        attn_n = c.heads * m.v_head_dim
        fwd = [*mla_projections_fwd(c), *core_f]
        bwd_in = [*core_b, *mla_projections_bwd(c)]
    else:
        d = c.d
        core_f, core_b = _attention(c, d, d)
        qkv_n = (c.heads + 2 * c.kv_heads) * d
        attn_n = c.heads * d
        fwd = [*_tp_in_fwd(c, "attn_input_all_gather"), c.gemm("qkv", t, qkv_n, h), *_qk_norm(c, "qk_norm"),
               *_rope(c, "rope"), *core_f]
        bwd_in = [*core_b, *_rope(c, "rope_bwd"), *_qk_norm(c, "qk_norm_bwd", backward=True),
                  *_tp_in_bwd(c, "qkv", c.gemm("qkv_dgrad", t, h, qkv_n), c.wgemm("qkv_wgrad", qkv_n, h, t))]
    fwd += [c.gemm("attn_out_proj", t, h, attn_n), *_tp_out_fwd(c, "attn_out_tp_reduce")]
    bwd = [*_tp_out_bwd(c, "attn_out_grad_all_gather"), c.gemm("attn_out_proj_dgrad", t, attn_n, h),
           c.wgemm("attn_out_proj_wgrad", h, attn_n, t), *bwd_in]
    return fwd, bwd, core_f


def _mlp_block(c: LayerContext, moe: bool) -> tuple[list[Op | CommOp], list[Op | CommOp]]:
    """(forward, backward) from the pre-MLP norm's output to the MLP's output collective."""
    t, h = c.tokens, c.h
    if moe:
        # the MoE layer takes the sequence-parallel shard as it is (no TP all-gather before it)
        return moe_forward(c), moe_backward(c)
    fwd = [*_tp_in_fwd(c, "mlp_input_all_gather"), *_mlp_fwd(c), *_tp_out_fwd(c, "mlp_out_tp_reduce")]
    bwd = [*_tp_out_bwd(c, "mlp_out_grad_all_gather"), *_mlp_bwd(c),
           *_tp_in_bwd(c, "fc1", c.gemm("fc1_dgrad", t, h, c.ffn * c.gate), c.wgemm("fc1_wgrad", c.ffn * c.gate, h, t))]
    return fwd, bwd


@functools.lru_cache(maxsize=4096)
def _layer_cost(model: ModelSpec, layout: ParallelLayout, gpu: GpuSpec, dtype: str, attention: str,
                moe: bool = False, gpus_per_node: int = 8, elementwise: str = "fused", recipe: str = "",
                local: bool = False, expert_bias_loop: bool = False, weight_cast_share: float = 1.0) -> LayerCost:
    c = LayerContext(model, layout, gpu, dtype, attention, gpus_per_node, elementwise, recipe, local, expert_bias_loop,
                     weight_cast_share)
    attn_fwd, attn_bwd, core_fwd = _attention_block(c)
    mlp_fwd, mlp_bwd = _mlp_block(c, moe)
    fwd: list[Op | CommOp] = [_norm_fwd(c, "input_norm"), *attn_fwd, *_sandwich_fwd(c, "post_attn_norm"),
                              _bda_fwd(c, "attn_bias_dropout_add"), _norm_fwd(c, "pre_mlp_norm"), *mlp_fwd,
                              *_sandwich_fwd(c, "post_mlp_norm"), _bda_fwd(c, "mlp_bias_dropout_add")]
    bwd: list[Op | CommOp] = [_bda_bwd(c, "mlp_bias_dropout_add_bwd"), *_sandwich_bwd(c, "post_mlp_norm_bwd"),
                              *mlp_bwd, _norm_bwd(c, "pre_mlp_norm_bwd"), _bda_bwd(c, "attn_bias_dropout_add_bwd"),
                              *_sandwich_bwd(c, "post_attn_norm_bwd"), *attn_bwd, _norm_bwd(c, "input_norm_bwd")]
    if layout.recompute == "full":
        recompute = PassCost(tuple(fwd))
    elif layout.recompute == "selective":
        # Korthikanti 2022 §5: recompute the attention core; plus Megatron's --recompute-modules
        recompute = PassCost(tuple(core_fwd) + _module_recompute(fwd, layout.recompute_modules))
    elif layout.recompute == "selective-op":
        recompute = PassCost(tuple(_selective_op_recompute(c, fwd)))
    else:
        recompute = EMPTY_PASS
    params = layer_params_per_gpu(model, layout.tp, layout.ep, moe, layout.etp)
    return LayerCost(PassCost(tuple(fwd)), PassCost(tuple(bwd)), recompute, params)


_MODULE_OPS = {   # op names each Megatron recompute module re-runs in the backward pass
    "layernorm": ("input_norm", "pre_mlp_norm"),
    "mla_up_proj": ("mla_q_up", "mla_q_proj", "mla_kv_up", "mla_rope"),
    # the activation with the clamp before it (Megatron checkpoints bias_act_func, which runs both)
    "moe_act": ("expert_activation_clamp", "expert_activation", "shared_expert_activation_clamp",
                "shared_expert_activation"),
}


def _module_recompute(fwd: list[Op | CommOp], modules: tuple[str, ...]) -> tuple[Op, ...]:
    names = {n for m in modules for n in _MODULE_OPS.get(m, ())}
    return tuple(op for op in fwd if isinstance(op, Op) and op.name in names)


def _part(op: Op, frac: float, name: str) -> Op:
    return Op(name, op.flops * frac, op.bytes_moved * frac, op.time_s * frac)


def _selective_op_recompute(c: LayerContext, fwd: list[Op | CommOp]) -> list[Op | CommOp]:
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


def layer_params_per_gpu(model: ModelSpec, tp: int, ep: int = 1, moe: bool | None = None, etp: int = 0) -> int:
    """Parameters of one layer held by one GPU: attention and dense MLP split over tp, routed
    experts over ep and etp (etp 0: tp). ``moe`` None: a MoE layer for a MoE model."""
    moe = model.is_moe if moe is None else (moe and model.is_moe)
    h = model.hidden
    if model.is_mla:
        attention = mla_params_per_gpu(model, tp)
    else:
        d = model.head_dim
        heads, kv = model.heads // tp, local_kv_heads(model, tp)
        attention = h * heads * d * 2 + 2 * h * kv * d                 # Q and O; K and V
        attention += (2 * d if model.qk_norm else 0) + (heads if model.attention_sinks else 0)
    if moe:
        dense, routed = moe_params_per_gpu(model, tp, ep, etp or tp)
        mlp = dense + routed
    else:
        mlp = model.num_mlp_matrices * h * math.ceil(model.ffn_hidden / tp)
    return attention + mlp + model.norm_params()                     # the norms, replicated


def expert_params_per_gpu(model: ModelSpec, tp: int, ep: int = 1, etp: int = 0, moe: bool | None = None) -> int:
    """Routed-expert parameters of one layer held by one GPU (0 for a dense layer): the layer's
    experts split over ep, each expert's matrices over etp. Their gradients are reduced over the
    expert-data-parallel group (tp * cp * dp / (etp * ep) ranks), not over dp * cp (Megatron-core)."""
    moe = model.is_moe if moe is None else (moe and model.is_moe)
    if not moe:
        return 0
    return moe_params_per_gpu(model, tp, ep, etp or tp)[1]
