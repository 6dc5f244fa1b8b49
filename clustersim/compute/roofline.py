"""Memory-bound kernels on the roofline, with a launch floor.

Constants:
* ``HBM_EFFICIENCY`` = 0.85: fraction of the datasheet HBM bandwidth that streaming element-wise
  kernels reach. STREAM-style copy/triad kernels reach about 85-92% of peak on A100 and H100
  (BabelStream, Deakin et al., results on A100-SXM 80GB ~1.8 TB/s of 2.04; H100 SXM ~3.0 TB/s of
  3.35); framework kernels (layer norm, fused bias-dropout-add) sit at the low end, so we take 0.85.
* ``KERNEL_FLOOR_S`` = 4 us: no kernel finishes faster than its launch and tail: CUDA kernel
  launch latency is a few microseconds (NVIDIA CUDA C++ Best Practices Guide, "Kernel launch
  overhead"; measured ~2-5 us on A100/H100 with PyTorch eager), so tiny ops cost at least this.
"""

from __future__ import annotations

from clustersim.compute.ops import Op
from clustersim.hardware.spec import GpuSpec

HBM_EFFICIENCY = 0.85
KERNEL_FLOOR_S = 4e-6


def memory_time_s(bytes_moved: float, gpu: GpuSpec) -> float:
    """Streaming ``bytes_moved`` at HBM_EFFICIENCY of the datasheet bandwidth (or the fraction a
    calibrated profile measured, GpuSpec.hbm_efficiency)."""
    return bytes_moved / (gpu.hbm_bw_bytes_per_s * (gpu.hbm_efficiency or HBM_EFFICIENCY))


def memory_bound_op(name: str, bytes_moved: float, gpu: GpuSpec, flops: float = 0.0) -> Op:
    """An element-wise / reduction kernel: time = max(bytes / achievable HBM bw, vector FLOPs, floor)."""
    vector = flops / gpu.vector_flops_per_s if gpu.vector_flops_per_s > 0 else 0.0
    return Op(name, flops, bytes_moved,
              max(memory_time_s(bytes_moved, gpu), vector, KERNEL_FLOOR_S) / gpu.compute_scale)
