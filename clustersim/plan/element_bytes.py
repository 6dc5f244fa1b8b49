"""Bytes per element of what crosses the wire: activations between stages and gradients reduced.

Each rule is decided here once; the stage work, the data-parallel and ZeRO-3 plans and the
sweep's bounds all call it.
"""

from __future__ import annotations


def activation_bytes(dtype: str) -> int:
    """Bytes per activation element: fp32 keeps fp32; bf16, fp16 and fp8 training keep 16-bit
    activations between layers (Transformer Engine casts to fp8 only inside the GEMMs). The 16-bit
    parameters that ZeRO gathers are the same size."""
    return 4 if dtype in ("fp32", "tf32") else 2


def reduce_bytes(reduce_dtype: str, dtype: str) -> int:
    """Bytes per gradient element reduced in ``reduce_dtype`` by a job training in ``dtype``: fp32
    when either is fp32, else 16-bit."""
    return 4 if reduce_dtype == "fp32" or dtype == "fp32" else 2
