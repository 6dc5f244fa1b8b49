"""Bytes per element for each training dtype, as Megatron-LM / Transformer Engine store them."""

from __future__ import annotations

from clustersim.errors import InputError

TRAINING_DTYPES = ("bf16", "fp16", "fp8", "fp32")


def check_dtype(dtype: str) -> None:
    if dtype not in TRAINING_DTYPES:
        raise InputError("training.dtype", dtype, TRAINING_DTYPES)


def activation_bytes(dtype: str) -> int:
    """Bytes of one stored activation / communicated element.

    fp8 training (Transformer Engine) keeps activations and TP communication in bf16 and casts
    GEMM inputs to fp8 on the fly (TE docs, "Using FP8 with Transformer Engine": only the GEMM
    operands are fp8), so fp8 stores 2 bytes like bf16.
    """
    check_dtype(dtype)
    return 4 if dtype == "fp32" else 2


def gemm_operand_bytes(dtype: str) -> int:
    """Bytes per GEMM operand element read by the tensor cores."""
    check_dtype(dtype)
    return {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}[dtype]


def weight_bytes(dtype: str) -> int:
    """Bytes per model weight held for the forward pass.

    bf16/fp16: 2 (the fp32 master copy is optimizer state). fp8: TE keeps the bf16 weight and an
    fp8 copy (plus its transpose for the backward GEMM) -> 2 + 1 + 1 = 4 bytes (TE docs, FP8
    weights cached per micro-batch group). fp32: 4.
    """
    check_dtype(dtype)
    return {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 4}[dtype]
