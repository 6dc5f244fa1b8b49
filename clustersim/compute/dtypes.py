"""Bytes per element for each training dtype, as Megatron-LM / Transformer Engine store them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clustersim.errors import InputError

if TYPE_CHECKING:
    from clustersim.frameworks import FrameworkSpec

TRAINING_DTYPES = ("bf16", "fp16", "fp8", "fp4", "fp32")


def check_dtype(dtype: str) -> None:
    if dtype not in TRAINING_DTYPES:
        raise InputError("training.dtype", dtype, TRAINING_DTYPES)


def activation_bytes(dtype: str) -> int:
    """Bytes of one stored activation / communicated element.

    fp8 and fp4 training (Transformer Engine) keep activations and TP communication in bf16 and
    cast GEMM inputs on the fly (TE docs, "Using FP8 with Transformer Engine": only the GEMM
    operands are low precision), so they store 2 bytes like bf16.
    """
    check_dtype(dtype)
    return 4 if dtype == "fp32" else 2


def reduce_bytes(reduce_dtype: str, dtype: str) -> int:
    """Bytes per gradient element reduced in ``reduce_dtype`` by a job training in ``dtype``: fp32
    when either is fp32, else 16-bit (Megatron-Core ``grad_reduce_in_fp32``, DeepSpeed
    ``communication_data_type``: the reduction runs in the gradient buffer's dtype)."""
    return 4 if reduce_dtype == "fp32" or dtype == "fp32" else 2


def grad_held_bytes(framework: FrameworkSpec, reduce_dtype: str, dtype: str, accum_dtype: str | None = None) -> int:
    """Bytes per gradient element of the framework's accumulated gradient buffer: those of
    ``accum_dtype`` where it is given (``frameworks.grad_accum_dtype``: DeepSpeed ZeRO-3's gradient
    partitions in ``data_types.grad_accum_dtype``, stage3.py ``grad_partitions_flat_buffer``); else the reduction's
    (``reduce_bytes``) where the framework holds it in that dtype
    (``grads_in_reduce_dtype``: Megatron-Core, megatron/core/distributed/distributed_data_parallel.py
    ``grad_dtype = torch.float if self.ddp_config.grad_reduce_in_fp32 else param.dtype``, with
    ``grad_reduce_in_fp32 = args.accumulate_allreduce_grads_in_fp32``, which
    megatron/training/arguments.py validate_args turns off with ``--grad-reduce-in-bf16`` and forces
    on for --bf16 only: an --fp16 job without the flag holds fp16 main grads); else
    its ``grad_bytes`` (torchtitan's FSDP2 casts the reduced shard back to the fp32 parameter's
    dtype, DeepSpeed keeps its 16-bit or fp32 accumulation buffer and casts for the reduction)."""
    if accum_dtype is not None:
        return reduce_bytes(accum_dtype, dtype)
    return reduce_bytes(reduce_dtype, dtype) if framework.grads_in_reduce_dtype else framework.grad_bytes


def gemm_operand_bytes(dtype: str) -> float:
    """Bytes per GEMM operand element read by the tensor cores (fp4 E2M1: half a byte)."""
    check_dtype(dtype)
    return {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "fp4": 0.5}[dtype]


def weight_bytes(dtype: str) -> float:
    """Bytes per model weight held for the forward pass.

    bf16/fp16: 2 (the fp32 master copy is optimizer state). fp8: TE keeps the bf16 weight and an
    fp8 copy (plus its transpose for the backward GEMM) -> 2 + 1 + 1 = 4 bytes (TE docs, FP8
    weights cached per micro-batch group). fp4 (NVFP4): the bf16 weight and two 4-bit copies
    with one E4M3 scale per 16 values -> 2 + 2 x (0.5 + 1/16) = 3.125 bytes
    (clustersim.compute.precision.weight_copy_bytes). fp32: 4.
    """
    check_dtype(dtype)
    return {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 4, "fp4": 3.125}[dtype]
