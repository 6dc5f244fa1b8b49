"""Model states per GPU: weights, gradients, optimizer states, with ZeRO sharding.

* Weights: the training dtype's bytes per parameter (clustersim.compute.dtypes.weight_bytes).
* Gradients: Megatron-LM accumulates and reduces gradients in fp32 "main_grad" buffers
  (--accumulate-allreduce-grads-in-fp32, the default with bf16 in Megatron-LM's arguments.py;
  megatron/core/distributed/param_and_grad_buffer.py): 4 bytes per parameter.
* Optimizer (mixed-precision Adam): fp32 master weight, momentum and variance, 12 bytes per
  parameter (ZeRO, Rajbhandari et al. 2020, arXiv 1910.02054, §3.1, K = 12); fp32 training has no
  master copy: 8 bytes.
* ZeRO (same paper, Fig. 1): stage 1 shards the optimizer states over dp, stage 2 also the
  gradients, stage 3 also the weights. Expert parameters of an MoE layer are sharded over the
  expert-data-parallel group (dp * cp / ep ranks, Megatron-Core); other parameters over dp.
"""

from __future__ import annotations

from clustersim.compute.dtypes import weight_bytes

GRAD_BYTES_PER_PARAM = 4
ADAM_MIXED_BYTES_PER_PARAM = 12
ADAM_FP32_BYTES_PER_PARAM = 8


def state_bytes(params: float, dp: int, zero_stage: int, dtype: str, moment_bytes: int = 4
                ) -> tuple[float, float, float]:
    """(weights, gradients, optimizer states) in bytes for ``params`` parameters sharded over ``dp``.
    ``moment_bytes`` 2: Adam's moments kept in BF16 (DeepSeek-V3 §3.3.3; Megatron
    ``--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16``)."""
    w = params * weight_bytes(dtype)
    g = params * GRAD_BYTES_PER_PARAM
    per = ADAM_FP32_BYTES_PER_PARAM if dtype == "fp32" else ADAM_MIXED_BYTES_PER_PARAM
    o = params * (per - 2 * (4 - moment_bytes))
    return (w / dp if zero_stage >= 3 else w,
            g / dp if zero_stage >= 2 else g,
            o / dp if zero_stage >= 1 else o)
