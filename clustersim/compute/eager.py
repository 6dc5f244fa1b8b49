"""Eager PyTorch element-wise ops as the kernels they launch: bytes each kernel streams.

An eager op is one kernel per torch call, each reading its inputs from HBM and writing its
output back; its time is the sum of those streams at the roofline's HBM efficiency
(clustersim.compute.roofline), each kernel at least the launch floor. The byte counts, per
element of the op's input (16-bit activations, ``a`` = 2 bytes):

* ``rmsnorm_fp32_upcast``: the reference RMSNorm (Llama's ``x.float()``, ``pow(2).mean(-1)``,
  ``x * rsqrt(... + eps)``, ``.type_as(x)``, ``* weight``): cast (read a, write 4), square (4,
  4), mean (4, per row), multiply by the row's rsqrt (4, 4), cast back (4, a), weight (a, a):
  20 + 16 = 36 bytes, 6 kernels (the per-row rsqrt is negligible).
* ``silu_mul``: ``F.silu(w1 x) * (w3 x)``: silu (a, a), mul (2a, a): 10 bytes per element of
  one operand, 2 kernels (clustersim.compute.layer's eager SwiGLU counts the same).
* ``add``: (2a, a): 6 bytes, 1 kernel.
* ``cross_entropy_fp32_upcast`` per logit, forward (torchtitan's loss:
  ``F.cross_entropy(pred.float(), labels)``): cast (a, 4), log-softmax over rows longer than
  shared memory holds in three passes (max, sum of exponentials, normalised write: read 12,
  write 4), nll (one value per row): 22 bytes, 3 kernels; backward: nll's gradient (write 4,
  zero-filled, one entry set), log-softmax backward (read gradient and output 8, write 4), cast
  back (4, a): 22 bytes, 3 kernels.

validation/micro/h100_micro_2026-11-26.json measured the first four at a Llama-8B layer's shapes
on one H100 (tests/compute/test_microbench.py, ``python benchmarks/micro_fit.py``).
"""

from __future__ import annotations

from clustersim.compute.ops import Op
from clustersim.compute.roofline import KERNEL_FLOOR_S, memory_time_s
from clustersim.hardware.spec import GpuSpec

# (bytes per element, kernels) with 16-bit activations; module docstring
EAGER_OPS: dict[str, tuple[float, int]] = {
    "rmsnorm_fp32_upcast": ((2 + 4) + (4 + 4) + 4 + (4 + 4) + (4 + 2) + (2 + 2), 6),
    "silu_mul": (2 + 2 + 4 + 2, 2),
    "add": (4 + 2, 1),
    "cross_entropy_fp32_upcast": (2 + 4 + 12 + 4, 3),
}
CROSS_ENTROPY_EAGER_BWD = (4 + 8 + 4 + 4 + 2, 3)


def eager_time_s(bytes_moved: float, kernels: int, gpu: GpuSpec) -> float:
    """``kernels`` streaming kernels moving ``bytes_moved`` in all, each at least the launch floor."""
    return max(memory_time_s(bytes_moved, gpu), kernels * KERNEL_FLOOR_S)


def eager_op(name: str, bytes_moved: float, kernels: int, gpu: GpuSpec) -> Op:
    """An op of ``kernels`` eager kernels moving ``bytes_moved`` in all (``eager_time_s``), carrying
    its kernel count for the host model (``Op.kernels``)."""
    return Op(name, 0.0, bytes_moved, eager_time_s(bytes_moved, kernels, gpu) / gpu.compute_scale, kernels=kernels)
