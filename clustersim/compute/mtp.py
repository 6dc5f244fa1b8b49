"""Multi-token prediction modules (DeepSeek-V3, arXiv 2412.19437 §2.2; Megatron ``--mtp-num-layers``).

Module ``k`` predicts token ``i + k + 1``: it embeds the shifted tokens with the shared embedding,
RMS-normalises them and the previous depth's hidden states, projects their concatenation
``2h -> h`` (``M_k``), runs one transformer layer, and computes logits and the cross-entropy with
the shared output head. Each module therefore costs one more layer, a ``T x h x 2h`` GEMM and one
more pass through the output head, the last on the loss's stage where a pipeline layout puts the
modules on an earlier one (docs/parallel.md); its parameters are the layer, the
projection and the two norms (the embedding and the head are shared; a pipelined model keeps a
copy of the embedding on the last stage, counted here).
"""

from __future__ import annotations

import math

from clustersim.compute.dtypes import activation_bytes
from clustersim.compute.gemm import gemm_op
from clustersim.compute.layer import transformer_layer_cost
from clustersim.compute.ops import LayerCost, Op, PassCost
from clustersim.compute.roofline import memory_bound_op
from clustersim.hardware.spec import GpuSpec
from clustersim.parallel.layout import ParallelLayout
from clustersim.workload.model_spec import ModelSpec


def mtp_cost(model: ModelSpec, layout: ParallelLayout, gpu: GpuSpec, dtype: str, attention: str,
             gpus_per_node: int, emb: LayerCost, out: LayerCost, head: bool = True) -> tuple[LayerCost, ...]:
    """One LayerCost per MTP module (an empty tuple without MTP). ``head``: with its pass through the
    output head, as on the loss's stage; false where a pipeline layout puts the modules on an
    earlier stage, which sends their hidden states on with the main ones and leaves the head's
    passes to the loss's stage (Megatron-Core's standalone MTP: gpt_model.py computes the MTP
    logits and losses in the post-process of the last stage; :func:`mtp_head_cost`)."""
    if not model.mtp_layers:
        return ()
    layer = transformer_layer_cost(model, layout, gpu, dtype, attention=attention, gpus_per_node=gpus_per_node)
    t = layout.micro_batch * math.ceil(model.seq_len / layout.cp)
    h, a_b = model.hidden, activation_bytes(dtype)
    proj_n = math.ceil(h / layout.tp)
    gemm_dtype = "bf16" if dtype == "fp8" else dtype
    pre = (memory_bound_op("mtp_embed_and_norms", t * h * a_b * 5, gpu),      # lookup, two RMSNorms, concat
           gemm_op("mtp_projection", t, proj_n, 2 * h, gpu, gemm_dtype))
    pre_bwd = (gemm_op("mtp_projection_dgrad", t, 2 * h, proj_n, gpu, gemm_dtype),
               Op("mtp_projection_wgrad", 2.0 * t * 2 * h * proj_n, 0.0,
                  gemm_op("mtp_projection_wgrad", proj_n, 2 * h, t, gpu, gemm_dtype).time_s, wgrad=True),
               memory_bound_op("mtp_norms_bwd", t * h * a_b * 6, gpu))
    head_fwd, head_bwd = (out.forward.ops, out.backward.ops) if head else ((), ())
    fwd = PassCost((*pre, *emb.forward.ops, *layer.forward.ops, *head_fwd))
    bwd = PassCost((*head_bwd, *layer.backward.ops, *emb.backward.ops, *pre_bwd))
    params = layer.params + model.mtp_extra_params(layout.tp) + emb.params
    return tuple(LayerCost(fwd, bwd, layer.recompute, params) for _ in range(model.mtp_layers))


def mtp_head_cost(model: ModelSpec, out: LayerCost) -> tuple[LayerCost, ...]:
    """The output head's pass for each MTP module's hidden states on the loss's stage, where the
    modules run on an earlier stage (``mtp_cost`` with ``head`` false): the head's work, no
    parameters of its own (the output layer is the stage's)."""
    return tuple(LayerCost(out.forward, out.backward, out.recompute, 0) for _ in range(model.mtp_layers))
