"""The optimizer step: mixed-precision Adam, memory bound.

Per parameter the fused Adam kernel (Megatron-LM with apex/TE FusedAdam, multi_tensor_apply)
reads the fp32 main gradient (4 B), the fp32 master weight (4), Adam's m and v (4 + 4) and writes
master, m, v (12) and the bf16/fp16 model weight (2): 30 bytes. The gradient-norm for clipping
reads the fp32 gradient once more (4) and zeroing the gradient buffer for the next step writes it
(4): 38 bytes per parameter. (Byte counts: ZeRO, Rajbhandari et al. 2020, arXiv 1910.02054, §3.1:
fp32 parameter, momentum and variance, K = 12 bytes, plus the fp32 gradient that Megatron keeps.)
fp32 training has no separate master copy and no low-precision copy: 4 + 4 + 8 read, 12 written,
+ 8 for norm and zeroing = 36 bytes.

Each moment is read and written once at its own dtype's bytes (``moment_saving_bytes``): Adam's
m and v kept in bf16 (``training.adam_moments: bf16``, Megatron ``--use-precision-aware-optimizer
--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16``: TransformerEngine's FusedAdam holds ``exp_avg`` and
``exp_avg_sq`` as bf16 tensors that its multi_tensor_adam kernel reads and writes,
transformer_engine/pytorch/optimizers/fused_adam.py; DeepSeek-V3, arXiv 2412.19437, §3.3.3)
stream 2 x 2 x 2 = 8 bytes where fp32 ones stream 16: 38 - 8 = 30 bytes per parameter; SGD's one
fp32 momentum 8: 38 - 8 = 30 too.

With ZeRO stage >= 1 (Megatron's distributed optimizer) each rank updates only its shard of the
states: the dense ones over the data-parallel (x context-parallel) group, the experts' over the
expert-data-parallel group (the memory report's groups).

The fused optimizer kernels (``multi_tensor_apply`` over lists of parameters) stream their bytes
at ``OPTIMIZER_HBM_EFFICIENCY`` of the HBM peak, below the 0.85 of plain element-wise kernels:
torch's fused AdamW over 1e9 fp32 parameters took 11.25 ms on one H100 SXM
(validation/micro/h100_micro_2026-11-26.json ``adamw_fused``), reading parameter, gradient, m and
v and writing parameter, m and v, 28 bytes per parameter: 2.49 TB/s of 3.35, 0.743.

Outside the optimizer kernel a framework may stream the rank's whole gradient buffer (not its
1/dp shard: Megatron's distributed optimizer keeps the full fp32 buffer that the reduce-scatter
reads) once more per step: ``FrameworkSpec.grad_buffer_bytes_per_param`` bytes per parameter
(Megatron-Core: zeroing, the NaN check and the 1/dp scaling before each bucket's reduce-scatter,
16 B; sources in clustersim/data/frameworks.yaml), memory bound like the step itself.
"""

from __future__ import annotations

from clustersim.compute.roofline import HBM_EFFICIENCY, KERNEL_FLOOR_S, memory_time_s
from clustersim.hardware.spec import GpuSpec
from clustersim.parallel.layout import ParallelLayout

ADAM_MIXED_BYTES_PER_PARAM = 38
ADAM_FP32_BYTES_PER_PARAM = 36
GRAD_ZEROING_BYTES_PER_PARAM = 4   # zeroing the fp32 gradient for the next step: one 4-byte write
ADAMW_FUSED_BYTES_PER_PARAM = 28   # torch fused AdamW, fp32: read p, g, m, v; write p, m, v (the measurement)
# fused AdamW, 1e9 fp32 params, 11.2468 ms on an H100 SXM (3.35 TB/s): module docstring
OPTIMIZER_HBM_EFFICIENCY = ADAMW_FUSED_BYTES_PER_PARAM * 1e9 / 11.246812e-3 / 3350e9


def optimizer_step_time_s(shard_params: int, layout: ParallelLayout, gpu: GpuSpec,
                          dtype: str = "bf16", buffer_zeroed: bool = False) -> float:
    """Time of one Adam step over the ``shard_params`` parameters whose states this GPU steps
    (ZeRO's shard: clustersim.memory.report.state_shard_params). ``buffer_zeroed``: the
    framework's own pass over the whole gradient buffer zeroes it (``grad_buffer_time_s``; every
    framework with such a pass zeroes there: clustersim/data/frameworks.yaml), so the Adam bytes
    leave out the zeroing (it was counted twice)."""
    per_param = ADAM_FP32_BYTES_PER_PARAM if dtype == "fp32" else ADAM_MIXED_BYTES_PER_PARAM
    per_param -= GRAD_ZEROING_BYTES_PER_PARAM if buffer_zeroed else 0
    saving = moment_saving_bytes(layout.optimizer_moments, layout.adam_moment_bytes)
    return adam_kernel_s(shard_params * (per_param - saving), gpu)


def fewer_moment_bytes(moments: int, moment_bytes: int = 4) -> int:
    """Optimizer-state bytes per parameter that ``moments`` moments of ``moment_bytes`` bytes each
    hold fewer than Adam's two fp32 ones (SGD with momentum, one fp32: 4; Adam with bf16 m and v:
    4; fp32 Adam: 0). The one rule for the states the memory report holds
    (clustersim.memory.states), the checkpoint saves and the optimizer step streams
    (``moment_saving_bytes``)."""
    return (2 - moments) * 4 + moments * (4 - moment_bytes)


def moment_saving_bytes(moments: int, moment_bytes: int = 4) -> int:
    """Bytes per parameter an optimizer step with ``moments`` moments of ``moment_bytes`` bytes each
    streams fewer than Adam's two fp32 ones (module docstring): each moment is read and written
    once, so twice ``fewer_moment_bytes`` (SGD with momentum: 16 - 8 = 8; Adam with bf16 m and v:
    16 - 2 x 2 x 2 = 8; fp32 Adam: 0). The one rule for the GPU's fused step and the host's
    (clustersim.plan.host_offload)."""
    return 2 * fewer_moment_bytes(moments, moment_bytes)


def adam_kernel_s(size_bytes: float, gpu: GpuSpec) -> float:
    """The fused optimizer kernels streaming ``size_bytes`` at OPTIMIZER_HBM_EFFICIENCY (module
    docstring), relative to the roofline's element-wise efficiency (so that a calibrated
    profile's ``hbm_efficiency`` scales it too)."""
    streamed = memory_time_s(size_bytes, gpu) * HBM_EFFICIENCY / OPTIMIZER_HBM_EFFICIENCY
    return max(streamed, KERNEL_FLOOR_S) / gpu.compute_scale


def _pass_s(size_bytes: int, gpu: GpuSpec) -> float:
    """One memory-bound pass over ``size_bytes`` (at least one kernel's floor)."""
    return max(memory_time_s(size_bytes, gpu), KERNEL_FLOOR_S) / gpu.compute_scale


def grad_buffer_time_s(params_per_gpu: int, bytes_per_param: int, gpu: GpuSpec) -> float:
    """The framework's passes over the rank's whole gradient buffer in one step (module docstring)."""
    if bytes_per_param <= 0 or params_per_gpu <= 0:
        return 0.0
    return _pass_s(params_per_gpu * bytes_per_param, gpu)
