"""What overlapping the TP collectives costs the GEMMs that hide them (Megatron --tp-comm-overlap).

Megatron-Core's ``--tp-comm-overlap`` hands the sequence-parallel all-gathers and reduce-scatters
to Transformer Engine's userbuffers, which hide them by cutting the neighbouring GEMM into pieces
or by sharing the SMs with it. The defaults (NVIDIA/TransformerEngine,
transformer_engine/pytorch/module/base.py, ``initialize_ub`` / ``get_default_config``, stored
version fecb10bd; Megatron-LM passes no config unless ``--tp-comm-overlap-cfg`` is given):

* ``ring_exchange`` for qkv_fprop, fc1_fprop, proj_dgrad and fc2_dgrad (the GEMMs that consume an
  all-gathered input): ``num_splits = tp_size``; the GEMM runs as ``tp`` consecutive GEMMs of
  ``M / tp`` rows each, one per peer's shard, while the next shard arrives by copy engine
  (``use_ce=True``, ``num_sm=1``, no SM margin). Each piece pays its own tile and wave
  quantization (clustersim.compute.gemm): a 4,096-token micro-batch under TP 8 becomes pieces of
  512 rows.
* ``pipeline`` for proj_fprop and fc2_fprop (the GEMMs whose output is reduce-scattered):
  ``num_splits = 4`` pieces of ``M / 4`` rows, the reduce-scatter kernel on ``num_sm = 16`` SMs
  with ``set_sm_margin=True`` (the GEMM is launched on the SMs left over).
* ``bulk`` for qkv_dgrad, qkv_wgrad, fc1_dgrad and fc1_wgrad (the backward all-gather of the
  saved input and reduce-scatter of the input gradient run beside them): the GEMM whole,
  ``num_sm = 16`` comm SMs, ``set_sm_margin=True``.

A GEMM launched on ``S - 16`` of ``S`` SMs takes ``S / (S - 16)`` times as long (tensor-core-bound
work spread over fewer SMs; H100: 132 SMs, x1.138). Megatron-Bridge's tuned H100 configurations
(Megatron-Bridge src/megatron/bridge/training/comm_overlap.py, e.g.
``userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192``) keep ring exchange for the same four GEMMs
and pick other SM counts per model; a scenario has no field for those, so the defaults apply.
"""

from __future__ import annotations

import math

from clustersim.compute.gemm import gemm_op, linear_gemm_op
from clustersim.compute.ops import Op
from clustersim.hardware.spec import GpuSpec

RING_EXCHANGE = frozenset({"qkv", "fc1", "attn_out_proj_dgrad", "fc2_dgrad"})   # TE methods["ring_exchange"]
PIPELINE = frozenset({"attn_out_proj", "fc2"})                                  # TE methods["pipeline"]
BULK = frozenset({"qkv_dgrad", "qkv_wgrad", "fc1_dgrad", "fc1_wgrad"})           # TE methods["bulk"]
PIPELINE_SPLITS = 4    # TE get_default_config: num_splits = 4 unless ring_exchange
COMM_SMS = 16          # TE get_default_config: num_sm = 16 unless ring_exchange (set_sm_margin=True)


def overlapped_gemm(name: str, m: int, n: int, k: int, gpu: GpuSpec, dtype: str, recipe: str, tp: int,
                    weight_share: float = 1.0) -> Op | None:
    """The GEMM ``name`` (M tokens x N x K) of one layer under userbuffers TP overlap, or None when
    the overlap does not touch it (then the plain ``linear_gemm_op`` applies)."""
    if tp <= 1:
        return None
    if name in RING_EXCHANGE:
        pieces, margin = tp, False
    elif name in PIPELINE:
        pieces, margin = PIPELINE_SPLITS, True
    elif name in BULK:
        pieces, margin = 1, True
    else:
        return None
    whole = linear_gemm_op(name, m, n, k, gpu, dtype, recipe, weight_share=weight_share)
    # the GEMM kernel alone, whole and in pieces; a low-precision recipe's cast kernels run once on
    # the local shard before the exchange (TE: fp8_buf, the all-gather buffer is already FP8), so
    # only the kernel part changes
    kernel_s = gemm_op(name, m, n, k, gpu, dtype).time_s
    pieces_s = gemm_op(name, math.ceil(m / pieces), n, k, gpu, dtype).time_s * pieces if pieces > 1 else kernel_s
    if margin and gpu.num_sms > COMM_SMS:
        pieces_s *= gpu.num_sms / (gpu.num_sms - COMM_SMS)
    return Op(name, whole.flops, whole.bytes_moved, whole.time_s + max(0.0, pieces_s - kernel_s))
