"""Shapes of one transformer layer on one GPU, shared by the modules that build its ops.

``LayerContext`` holds the per-GPU sizes of one layer and micro-batch (tokens with and without
sequence parallelism, local heads, MLP width) and the helpers that make its GEMM, memory-bound and
TP-collective ops. clustersim.compute.layer builds one and hands it to the attention, MoE, MLA and
context-parallel modules, which all import it from here (no module imports layer.py back).
"""

from __future__ import annotations

import math
from dataclasses import replace

from clustersim.compute.attention_span import layer_span
from clustersim.compute.conventions import gated_factor, local_kv_heads, uses_dropout, uses_rope
from clustersim.compute.dtypes import activation_bytes, check_dtype
from clustersim.compute.gemm import linear_gemm_op
from clustersim.compute.ops import CommOp, Op
from clustersim.compute.roofline import memory_bound_op
from clustersim.compute.tp_overlap import overlapped_gemm
from clustersim.errors import InputError
from clustersim.hardware.spec import GpuSpec
from clustersim.parallel.layout import ParallelLayout
from clustersim.workload.model_spec import ModelSpec


class LayerContext:
    """Shapes of one layer on one GPU (a plain namespace used while building the op lists)."""

    def __init__(self, model: ModelSpec, layout: ParallelLayout, gpu: GpuSpec, dtype: str, attention: str,
                 gpus_per_node: int = 8, elementwise: str = "fused", recipe: str = "", local: bool = False,
                 expert_bias_loop: bool = False, weight_cast_share: float = 1.0) -> None:
        check_dtype(dtype)
        tp, cp = layout.tp, layout.cp
        if model.heads % tp:
            raise InputError("parallel.tp", tp, f"a divisor of model.heads ({model.heads})")
        self.gpus_per_node = gpus_per_node
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
        # Transformer Engine userbuffers (needs sequence parallelism): the GEMMs beside the TP comm
        # are cut into pieces or share their SMs (clustersim.compute.tp_overlap)
        self.ub_overlap = layout.tp_comm_overlap and self.sp
        self.attention = attention
        self.eager = elementwise == "eager"
        self.rope = uses_rope(model)   # Llama-style RoPE on Q and K (MLA: its own; clustersim.compute.conventions)
        self.recipe = recipe
        # the attention span of this layer: full causal, or the model's sliding window / chunk
        self.pattern, self.window = layer_span(model, local)
        # the routed experts' fc2 bias added expert by expert (Megatron; clustersim.compute.expert_bias)
        self.expert_bias_loop = expert_bias_loop
        # the share of the weights' low-precision casts one micro-batch pays (precision.weight_cast_share)
        self.weight_cast_share = weight_cast_share

    def tp_comm(self, name: str, collective: str, overlappable: bool = False) -> CommOp:
        size = self.tokens * self.h * self.act_b
        return CommOp(name, collective, size, "tp", overlappable or self.overlap_all_tp)

    def gemm(self, name: str, m: int, n: int, k: int, batch: int = 1, dtype: str | None = None,
             wgrad: bool = False) -> Op:
        """A GEMM of a linear layer under the dtype's recipe (``linear_gemm_op``: low-precision
        rate plus its cast kernels); ``dtype`` overrides the training dtype (the router in BF16)."""
        op = None
        # the B operand of a forward or input-gradient GEMM is the weight; a wgrad GEMM's are activations
        share = 1.0 if wgrad else self.weight_cast_share
        if self.ub_overlap and batch == 1 and dtype is None:   # userbuffers split / SM share (tp_overlap.py)
            op = overlapped_gemm(name, m, n, k, self.gpu, self.dtype, self.recipe, self.tp, share)
        if op is None:
            op = linear_gemm_op(name, m, n, k, self.gpu, dtype or self.dtype, self.recipe, batch, share)
        return replace(op, wgrad=True) if wgrad else op

    def wgemm(self, name: str, m: int, n: int, k: int, batch: int = 1, dtype: str | None = None) -> Op:
        """A weight-gradient GEMM (``Op.wgrad``: a zero-bubble schedule's W action)."""
        return self.gemm(name, m, n, k, batch, dtype, wgrad=True)

    def mem(self, name: str, elements_read: float, elements_written: float, extra_bytes: float = 0.0) -> Op:
        return memory_bound_op(name, (elements_read + elements_written) * self.act_b + extra_bytes, self.gpu)
