"""The MoE MLP of one layer on one GPU, forward and backward, as Megatron-Core runs it.

Per GPU, ``t`` tokens enter the MoE layer: ``T / tp`` with sequence parallelism (Megatron-Core
requires SP when TP > 1 for MoE, MoELayer.forward), where ``T = b s / cp``. Order of the
forward pass (megatron/core/transformer/moe/moe_layer.py, token_dispatcher.py
MoEAlltoAllTokenDispatcher; experts.py TEGroupedMLP):

1. ``router``: a ``t x E x h`` GEMM (kept in 16-bit under FP8: DeepSeek-V3 §3.3.1 keeps the
   gating in higher precision; Megatron ``--moe-router-dtype``), softmax/sigmoid and top-k over
   the ``E`` fp32 logits.
2. ``permute``: the ``t`` tokens are copied ``k`` times, sorted by expert.
3. ``ep_dispatch``: all-to-all over the EP group. Megatron's ``alltoall`` dispatcher sends every
   (token, expert) pair: ``t k h`` elements per rank. The ``flex`` dispatcher with DeepEP sends a
   token once per destination *node* over the NIC and forwards it over NVLink to the destination
   GPUs (DeepEP normal kernels, "asymmetric-domain bandwidth forwarding"); its bytes per rank are
   ``t x (remote nodes hit) x h`` on the NIC and ``t x (ranks hit) x h`` on NVLink
   (clustersim.compute.moe_routing), dispatched in FP8 under FP8 training (DeepSeek-V3 §3.3.2,
   DeepEP README: "FP8 dispatching and BF16 combining"; 1 byte + one fp32 scale per 128 values).
4. with expert tensor parallelism ``etp > 1``: all-gather of the received tokens over the ETP
   group (dispatch_postprocess), reduce-scatter before the combine.
5. grouped expert GEMMs (TEGroupedMLP / DeepGEMM m-grouped contiguous layout): the busiest EP
   rank holds ``t k etp x load`` token-expert pairs spread over its ``E / ep`` experts, each of
   width ``ffn_e / etp``; SwiGLU between fc1 and fc2 (with ``activation_clamp``, the clamp of its
   halves before it: clustersim.compute.glu_clamp); with ``moe_expert_bias`` under Megatron, the
   fc2 bias added expert by expert after fc2 (clustersim.compute.expert_bias).
6. ``ep_combine``: the reverse all-to-all (BF16), then ``unpermute`` sums the ``k`` weighted copies.

Shared experts (DeepSeekMoE, arXiv 2401.06066 §3.2; Megatron SharedExpertMLP) are a dense MLP of
width ``moe_shared_ffn_hidden`` (``shared * ffn_e``) split over the attention TP group, with its own SP all-gather and
reduce-scatter. Backward: the mirror image; the dispatch's gradient is a combine and the
combine's gradient a dispatch (both BF16).
"""

from __future__ import annotations

import math
from dataclasses import replace

from clustersim.compute.expert_bias import expert_bias_ops
from clustersim.compute.glu_clamp import clamp_ops
from clustersim.compute.layer_context import LayerContext
from clustersim.compute.moe_routing import load_factor, spread
from clustersim.compute.ops import CommOp, Op
from clustersim.compute.roofline import memory_bound_op

# the forward's token permutation before the dispatch: a unit that runs it dispatches (clustersim.compute.host)
DISPATCH_PERMUTE = "permute"

FP8_DISPATCH_BYTES = 1 + 4 / 128  # e4m3 value + one fp32 scale per 1x128 tile (DeepSeek-V3 §3.3.2)


def ep_placement(ep: int, etp: int, gpus_per_node: int) -> tuple[int, int]:
    """(EP ranks per node, nodes spanned) of one EP group: stride etp in block placement."""
    if etp >= gpus_per_node:
        return 1, ep
    per_node = max(1, min(ep, gpus_per_node // etp))
    return per_node, math.ceil(ep / per_node)


class _Moe:
    """Shapes of the MoE MLP on one GPU."""

    def __init__(self, c: LayerContext) -> None:
        m, lay = c.model, c.layout
        self.c = c
        self.ep, self.etp = lay.ep, lay.etp
        self.k = m.moe_top_k
        self.e = m.moe_experts
        self.local_experts = max(1, self.e // self.ep)
        self.t = c.tokens_sp if c.tp > 1 else c.tokens        # tokens entering the layer on this GPU
        self.load = load_factor(m)
        self.pairs = self.t * self.k                             # token-expert pairs this GPU sends
        self.expert_tokens = math.ceil(self.pairs * self.etp * self.load)   # pairs the busiest rank computes
        self.per_expert = max(1, math.ceil(self.expert_tokens / self.local_experts))
        self.ffn = math.ceil(m.moe_expert_ffn_hidden / self.etp)
        self.shared_ffn = math.ceil(m.moe_shared_ffn_hidden / c.tp)
        per_node, nodes = ep_placement(self.ep, self.etp, c.gpus_per_node)
        self.nodes = nodes
        self.spread = spread(m, self.ep, nodes)

    def a2a(self, name: str, fp8: bool) -> list[CommOp]:
        """One dispatch- or combine-sized exchange over the EP group (none when ep = 1)."""
        if self.ep == 1:
            return []
        c, h = self.c, self.c.h
        elem = FP8_DISPATCH_BYTES if fp8 else c.act_b
        if c.model.moe_token_dispatcher == "flex":
            remote = self.spread.nodes * (self.nodes - 1) / self.nodes
            out_b = self.t * remote * h * elem * self.load
            up_b = self.t * self.spread.ranks * h * elem * self.load
            return [CommOp(name, "deepep", self.pairs * h * elem * self.load, "ep", up_bytes=up_b, out_bytes=out_b)]
        return [CommOp(name, "all_to_all", self.pairs * h * elem * self.load, "ep")]

    def etp_comm(self, name: str, collective: str) -> list[CommOp]:
        if self.etp == 1:
            return []
        size = self.pairs * self.load * self.etp * self.c.h * self.c.act_b
        return [CommOp(name, collective, size, "etp")]

    def shared_fwd(self) -> list[Op | CommOp]:
        c = self.c
        if not self.shared_ffn:
            return []
        t = c.tokens
        ops: list[Op | CommOp] = []
        if c.sp:
            ops.append(c.tp_comm("shared_expert_input_all_gather", "all_gather"))
        ops += [c.gemm("shared_expert_fc1", t, self.shared_ffn * c.gate, c.h),
                *clamp_ops(c, "shared_expert_activation_clamp", t, self.shared_ffn, cat=False),
                c.mem("shared_expert_activation", t * self.shared_ffn * c.gate, t * self.shared_ffn),
                c.gemm("shared_expert_fc2", t, c.h, self.shared_ffn)]
        if c.tp > 1:
            ops.append(c.tp_comm("shared_expert_out_reduce", "reduce_scatter" if c.sp else "all_reduce"))
        return ops

    def shared_bwd(self) -> list[Op | CommOp]:
        c = self.c
        if not self.shared_ffn:
            return []
        t, f = c.tokens, self.shared_ffn
        ops: list[Op | CommOp] = []
        if c.sp:
            ops.append(c.tp_comm("shared_expert_out_grad_all_gather", "all_gather"))
        ops += [c.gemm("shared_expert_fc2_dgrad", t, f, c.h), c.wgemm("shared_expert_fc2_wgrad", c.h, f, t),
                c.mem("shared_expert_activation_bwd", t * f * (c.gate + 1), t * f * c.gate),
                *clamp_ops(c, "shared_expert_activation_clamp_bwd", t, f, cat=False, backward=True),
                c.gemm("shared_expert_fc1_dgrad", t, c.h, f * c.gate), c.wgemm("shared_expert_fc1_wgrad", f * c.gate, c.h, t)]
        if c.tp > 1:
            ops.append(c.tp_comm("shared_expert_dgrad_reduce", "reduce_scatter" if c.sp else "all_reduce",
                                 overlappable=True))
        return ops


def moe_forward(c: LayerContext) -> list[Op | CommOp]:
    """Forward ops of the MoE MLP (after the pre-MLP norm, before the residual add)."""
    x = _Moe(c)
    h, t, fp8 = c.h, x.t, c.dtype == "fp8"
    router_dtype = "bf16" if fp8 else c.dtype
    ops: list[Op | CommOp] = [
        c.gemm("router", t, x.e, h, dtype=router_dtype),
        memory_bound_op("router_topk", t * x.e * 4 * 2, c.gpu),        # fp32 scores: write, read for top-k
        c.mem(DISPATCH_PERMUTE, t * h, x.pairs * h, extra_bytes=x.pairs * h if fp8 else 0.0),
        *x.a2a("ep_dispatch", fp8 and c.model.moe_token_dispatcher == "flex"),
        *x.etp_comm("etp_dispatch_all_gather", "all_gather"),
    ]
    if x.local_experts > 1:
        ops.append(c.mem("permute_local", x.expert_tokens * h, x.expert_tokens * h))
    le = x.local_experts
    ops += [_grouped(c.gemm("expert_fc1", x.per_expert, x.ffn * c.gate, h, batch=le), le),
            *clamp_ops(c, "expert_activation_clamp", x.expert_tokens, x.ffn, cat=not c.eager),
            c.mem("expert_activation", x.expert_tokens * x.ffn * c.gate, x.expert_tokens * x.ffn),
            _grouped(c.gemm("expert_fc2", x.per_expert, h, x.ffn, batch=le), le),
            *expert_bias_ops(c, "expert_fc2_bias", x.expert_tokens, le)]
    if x.local_experts > 1:
        ops.append(c.mem("unpermute_local", x.expert_tokens * h, x.expert_tokens * h))
    ops += [*x.etp_comm("etp_combine_reduce_scatter", "reduce_scatter"),
            *x.a2a("ep_combine", False),
            c.mem("unpermute", x.pairs * h, t * h),
            *x.shared_fwd()]
    return ops


def moe_backward(c: LayerContext) -> list[Op | CommOp]:
    """Backward ops of the MoE MLP, in execution order."""
    x = _Moe(c)
    h, t = c.h, x.t
    router_dtype = "bf16" if c.dtype == "fp8" else c.dtype
    ops: list[Op | CommOp] = [*x.shared_bwd(),
                              c.mem("unpermute_bwd", t * h, x.pairs * h),
                              *x.a2a("ep_combine_bwd", False),
                              *x.etp_comm("etp_combine_bwd_all_gather", "all_gather")]
    if x.local_experts > 1:
        ops.append(c.mem("unpermute_local_bwd", x.expert_tokens * h, x.expert_tokens * h))
    pe, le, f = x.per_expert, x.local_experts, x.ffn
    ops += [*expert_bias_ops(c, "expert_fc2_bias_bwd", x.expert_tokens, le, backward=True),
            _grouped(c.gemm("expert_fc2_dgrad", pe, f, h, batch=le), le),
            _grouped(c.wgemm("expert_fc2_wgrad", h, f, pe, batch=le), le),
            c.mem("expert_activation_bwd", x.expert_tokens * f * (c.gate + 1), x.expert_tokens * f * c.gate),
            *clamp_ops(c, "expert_activation_clamp_bwd", x.expert_tokens, f, cat=not c.eager, backward=True),
            _grouped(c.gemm("expert_fc1_dgrad", pe, h, f * c.gate, batch=le), le),
            _grouped(c.wgemm("expert_fc1_wgrad", f * c.gate, h, pe, batch=le), le)]
    if x.local_experts > 1:
        ops.append(c.mem("permute_local_bwd", x.expert_tokens * h, x.expert_tokens * h))
    ops += [*x.etp_comm("etp_dispatch_bwd_reduce_scatter", "reduce_scatter"),
            *x.a2a("ep_dispatch_bwd", False),
            c.mem("permute_bwd", x.pairs * h, t * h),
            c.gemm("router_dgrad", t, h, x.e, dtype=router_dtype),
            c.wgemm("router_wgrad", x.e, h, t, dtype=router_dtype)]
    return ops


def _grouped(op: Op, experts: int) -> Op:
    """A grouped expert GEMM as the host issues it: TEGroupedMLP's GroupedLinear launches one
    cuBLAS GEMM per local expert (transformer_engine/pytorch/cpp_extensions/gemm.py
    ``general_grouped_gemm`` -> ``te_general_grouped_gemm``, a loop over the GEMMs on several streams)."""
    return replace(op, kernels=max(1, experts))


def moe_params_per_gpu(model, tp: int, ep: int, etp: int) -> tuple[int, int]:
    """(dense, expert) parameters of one MoE MLP on one GPU: the router (replicated) and the
    shared experts (split over tp) are dense; the routed experts split over ep and etp."""
    shared = model.num_mlp_matrices * model.hidden * math.ceil(model.moe_shared_ffn_hidden / tp)
    router = model.hidden * model.moe_experts
    routed = max(1, model.moe_experts // ep) * model.num_mlp_matrices * model.hidden \
        * math.ceil(model.moe_expert_ffn_hidden / etp)
    return shared + router, routed
