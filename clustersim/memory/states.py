"""Model states per GPU: weights, gradients, optimizer states, with ZeRO / FSDP sharding.

Bytes per parameter come from the framework (clustersim/data/frameworks.yaml, each with its
source): Megatron-Core keeps a bf16 parameter buffer (2), fp32 main gradients (4) and fp32
master weights + Adam m, v (12) - "18 bytes, or 6 + 12/dp with the distributed optimizer"
(megatron/training/theoretical_memory_usage.py); torchtitan's FSDP2 keeps the sharded parameter
itself in fp32 (4; it is the master), fp32 gradient shards (4) and AdamW's m, v (8); DeepSpeed
ZeRO 2 + 2 + 12 (Rajbhandari et al. 2020, arXiv 1910.02054, §3.1, K = 12); DeepSpeed's BF16_Optimizer
2 + (4 + 2) + 12: its fp32 gradient buffer and the bf16 ``.grad`` it keeps from one backward to the next
(``FrameworkSpec.keeps_lp_grads``: bf16_optimizer.py ``update_hp_grads(clear_lp_grads=False)``, the
.grad freed only by ``clear_lp_grads`` when the next backward starts). fp32 training keeps
4 + 4 + 8 (no master copy). fp8 training under Megatron/TE adds an fp8 copy and its transpose
(clustersim.compute.dtypes.weight_bytes: 2 + 1 + 1), fp4 (NVFP4) two 4-bit copies with their
scales (2 + 2 x (0.5 + 1/16) = 3.125); fp4 ran at the bf16 weight's 2 bytes until 2026-11-27.

ZeRO (same paper, Fig. 1): stage 1 shards the optimizer states over the data-parallel ranks,
stage 2 also the gradients, stage 3 also the weights. Expert parameters of an MoE layer are
sharded over the expert-data-parallel group (dp * cp / ep ranks, Megatron-Core); the others over
dp * cp (HSDP: over dp * cp / hsdp_replicas, the shard group; the replicas hold copies).
"""

from __future__ import annotations

from clustersim.compute.dtypes import grad_held_bytes, weight_bytes
from clustersim.compute.optimizer import fewer_moment_bytes
from clustersim.frameworks import FrameworkSpec

# Megatron-Core's states when no framework is given (see module docstring)
GRAD_BYTES_PER_PARAM = 4
ADAM_MIXED_BYTES_PER_PARAM = 12
ADAM_FP32_BYTES_PER_PARAM = 8


def bytes_per_param(dtype: str, framework: FrameworkSpec | None = None,
                    reduce_dtype: str | None = None, accum_dtype: str | None = None) -> tuple[int, int, int]:
    """(weight, gradient, optimizer) bytes per parameter before sharding; ``reduce_dtype``: the
    data-parallel reduction's (``frameworks.grad_reduce_dtype``), whose bytes the gradients take
    where the framework accumulates in it (``compute.dtypes.grad_held_bytes``: Megatron's main_grad
    with --grad-reduce-in-bf16); None: the framework's ``grad_bytes``. ``accum_dtype``: the dtype
    DeepSpeed's ZeRO-3 holds its gradient partitions in (``frameworks.grad_accum_dtype``), whose
    bytes the gradients take where given (``grad_held_bytes``)."""
    if dtype == "fp32":
        return 4, 4, ADAM_FP32_BYTES_PER_PARAM
    if framework is None:
        return weight_bytes(dtype), GRAD_BYTES_PER_PARAM, ADAM_MIXED_BYTES_PER_PARAM
    w = framework.param_bytes
    if dtype in ("fp8", "fp4") and framework.param_bytes == 2:   # TE keeps low-precision copies beside it
        w = weight_bytes(dtype)
    grads = (framework.grad_bytes if reduce_dtype is None
             else grad_held_bytes(framework, reduce_dtype, dtype, accum_dtype))
    if framework.keeps_lp_grads:   # the 16-bit .grad beside the fp32 buffer, in the parameter's dtype
        grads += framework.param_bytes
    return w, grads, framework.optimizer_bytes


def state_bytes(params: float, dp: int, zero_stage: int, dtype: str,
                framework: FrameworkSpec | None = None, moment_bytes: int = 4,
                moments: int = 2, reduce_dtype: str | None = None,
                accum_dtype: str | None = None) -> tuple[float, float, float]:
    """(weights, gradients, optimizer states) in bytes for ``params`` parameters sharded over ``dp``.
    ``moment_bytes`` 2: Adam's moments kept in BF16 (DeepSeek-V3 §3.3.3; Megatron
    ``--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16``). ``moments``
    1: SGD with momentum keeps one fp32 buffer where Adam keeps m and v (torch.optim.SGD
    ``momentum_buffer``; the master copy stays): 4 bytes fewer per parameter. ``reduce_dtype``,
    ``accum_dtype``: as ``bytes_per_param``."""
    wb, gb, ob = bytes_per_param(dtype, framework, reduce_dtype, accum_dtype)
    ob -= fewer_moment_bytes(moments, moment_bytes if dtype != "fp32" else 4)   # fp32 training keeps fp32 moments
    w, g, o = params * wb, params * gb, params * ob
    return (w / dp if zero_stage >= 3 else w,
            g / dp if zero_stage >= 2 else g,
            o / dp if zero_stage >= 1 else o)
