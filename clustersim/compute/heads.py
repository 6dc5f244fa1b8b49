"""The input embedding (first pipeline stage) and the output head: final norm, logits, loss (last stage).

Megatron-LM's VocabParallelEmbedding splits the table over TP by vocabulary rows; each rank looks
up its rows (zeros elsewhere) and the partial embeddings are summed by an all_reduce, or a
reduce_scatter with sequence parallelism (megatron/core/tensor_parallel/layers.py). The embedding
backward is a scatter-add of the output gradient into the rank's rows of the fp32 main gradient.

The output layer is a column-parallel GEMM over the vocabulary (logits T x V/tp per rank) followed
by Megatron's vocab-parallel cross-entropy (megatron/core/tensor_parallel/cross_entropy.py): the
logits are cast to fp32, and the max, the sum of exponentials and the target logit are
all_reduced over TP (three fp32 vectors of T); the backward writes softmax - one_hot in place.
"""

from __future__ import annotations

import functools
import math

from clustersim.compute.conventions import uses_dropout
from clustersim.compute.dtypes import activation_bytes, check_dtype
from clustersim.compute.eager import CROSS_ENTROPY_EAGER_BWD, EAGER_OPS, eager_op
from clustersim.compute.gemm import gemm_op
from clustersim.compute.ops import EMPTY_PASS, CommOp, LayerCost, Op, PassCost
from clustersim.compute.precision import compute_dtype
from clustersim.compute.roofline import memory_bound_op
from clustersim.hardware.spec import GpuSpec
from clustersim.parallel.layout import ParallelLayout
from clustersim.workload.model_spec import ModelSpec


def _tokens(model: ModelSpec, layout: ParallelLayout) -> tuple[int, int, bool]:
    sp = layout.sequence_parallel and layout.tp > 1
    t = layout.micro_batch * math.ceil(model.seq_len / layout.cp)
    return t, (math.ceil(t / layout.tp) if sp else t), sp


def embedding_cost(model: ModelSpec, layout: ParallelLayout, gpu: GpuSpec, dtype: str) -> LayerCost:
    """Input embedding lookup for one micro-batch on one GPU of the first stage."""
    return _embedding_cost(model, *_key(layout), gpu, dtype)


def output_cost(model: ModelSpec, layout: ParallelLayout, gpu: GpuSpec, dtype: str,
                elementwise: str = "fused") -> LayerCost:
    """Final norm, logits GEMM and cross-entropy for one micro-batch on one GPU of the last stage.

    ``elementwise``: "fused" prices Megatron's vocab-parallel cross-entropy; "eager" the
    framework's ``F.cross_entropy`` over fp32-upcast logits (torchtitan; clustersim.compute.eager).

    ``params``: the V/tp x h output matrix plus the final norm. With tied embeddings and pp = 1 the
    matrix is the embedding's own, which the caller must not count twice (with pp > 1 Megatron
    keeps a copy on the last stage and all-reduces its gradient with the first).
    """
    return _output_cost(model, *_key(layout), gpu, dtype, elementwise == "eager")


def _key(layout: ParallelLayout) -> tuple[int, int, bool, int, bool]:
    return layout.tp, layout.cp, layout.sequence_parallel, layout.micro_batch, layout.tp_comm_overlap


def _layout(tp: int, cp: int, sp: bool, micro_batch: int, tp_comm_overlap: bool) -> ParallelLayout:
    return ParallelLayout(tp=tp, cp=cp, sequence_parallel=sp, micro_batch=micro_batch, tp_comm_overlap=tp_comm_overlap)


@functools.lru_cache(maxsize=2048)
def _embedding_cost(model: ModelSpec, tp_: int, cp: int, sp_: bool, micro_batch: int, overlap: bool, gpu: GpuSpec,
                    dtype: str) -> LayerCost:
    layout = _layout(tp_, cp, sp_, micro_batch, overlap)
    check_dtype(dtype)
    act_b = activation_bytes(dtype)
    t, t_sp, sp = _tokens(model, layout)
    h, tp = model.hidden, layout.tp
    fwd: list[Op | CommOp] = [memory_bound_op("embedding_lookup", t * h * act_b * 2 + t * 8, gpu)]
    if tp > 1:
        fwd.append(CommOp("embedding_tp_reduce", "reduce_scatter" if sp else "all_reduce", t * h * act_b, "tp",
                          layout.tp_comm_overlap))
    if uses_dropout(model):
        fwd.append(memory_bound_op("embedding_dropout", t_sp * h * (2 * act_b + 1), gpu))
    bwd: list[Op | CommOp] = []
    if uses_dropout(model):
        bwd.append(memory_bound_op("embedding_dropout_bwd", t_sp * h * (2 * act_b + 1), gpu))
    if sp:
        bwd.append(CommOp("embedding_grad_all_gather", "all_gather", t * h * act_b, "tp", layout.tp_comm_overlap))
    # scatter-add into the fp32 main gradient: read dY, read-modify-write the touched fp32 rows
    bwd.append(memory_bound_op("embedding_grad_scatter_add", t * h * (act_b + 8) + t * 8, gpu))
    params = math.ceil(model.vocab / tp) * h
    return LayerCost(PassCost(tuple(fwd)), PassCost(tuple(bwd)), EMPTY_PASS, params)


@functools.lru_cache(maxsize=2048)
def _output_cost(model: ModelSpec, tp_: int, cp: int, sp_: bool, micro_batch: int, overlap: bool, gpu: GpuSpec,
                 dtype: str, eager: bool = False) -> LayerCost:
    layout = _layout(tp_, cp, sp_, micro_batch, overlap)
    check_dtype(dtype)
    act_b = activation_bytes(dtype)
    t, t_sp, sp = _tokens(model, layout)
    h, tp = model.hidden, layout.tp
    v = math.ceil(model.vocab / tp)
    logits = t * v
    fwd: list[Op | CommOp] = [memory_bound_op("final_norm", t_sp * h * act_b * 2, gpu)]
    if sp:
        fwd.append(CommOp("output_input_all_gather", "all_gather", t * h * act_b, "tp", layout.tp_comm_overlap))
    hp = compute_dtype(dtype)  # the output layer stays in BF16 under FP8/FP4 (clustersim.compute.precision)
    fwd.append(gemm_op("logits", t, v, h, gpu, hp))
    if eager:   # F.cross_entropy(logits.float(), labels) kernel by kernel (clustersim.compute.eager)
        per, kernels = EAGER_OPS["cross_entropy_fp32_upcast"]
        fwd.append(eager_op("cross_entropy", logits * per, kernels, gpu))
        per, kernels = CROSS_ENTROPY_EAGER_BWD
        ce_bwd = eager_op("cross_entropy_bwd", logits * per, kernels, gpu)
    else:
        # unfused vocab-parallel cross-entropy, per logit: cast to fp32 (read act_b, write 4), max (read 4),
        # subtract max in place (r+w 8), exp (r+w 8), sum (read 4), divide in place, kept for backward (r+w 8)
        fwd.append(memory_bound_op("cross_entropy", logits * (act_b + 4 + 4 + 8 + 8 + 4 + 8), gpu))
        # the saved fp32 softmax becomes the gradient in place (one_hot touches one entry per token),
        # scaled by the loss gradient (r+w 8), cast back for the GEMM (read 4, write act_b)
        ce_bwd = memory_bound_op("cross_entropy_bwd", logits * (8 + 4 + act_b), gpu)
    if tp > 1:
        for what in ("max", "sum_exp", "target_logit"):
            fwd.append(CommOp(f"cross_entropy_{what}_all_reduce", "all_reduce", t * 4, "tp"))
    bwd: list[Op | CommOp] = [ce_bwd, gemm_op("logits_dgrad", t, h, v, gpu, hp)]
    wgrad = gemm_op("logits_wgrad", v, h, t, gpu, hp)
    if tp > 1:
        if sp:
            bwd += [CommOp("output_input_all_gather_bwd", "all_gather", t * h * act_b, "tp", True),
                    CommOp("output_dgrad_reduce_scatter", "reduce_scatter", t * h * act_b, "tp", True), wgrad]
        else:
            bwd += [CommOp("output_dgrad_all_reduce", "all_reduce", t * h * act_b, "tp", True), wgrad]
    else:
        bwd.append(wgrad)
    bwd.append(memory_bound_op("final_norm_bwd", t_sp * h * act_b * 5, gpu))
    params = v * h + model.norm_width_params()
    return LayerCost(PassCost(tuple(fwd)), PassCost(tuple(bwd)), EMPTY_PASS, params)
