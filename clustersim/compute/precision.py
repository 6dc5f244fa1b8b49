"""Low-precision training: which GEMMs run in FP8 / FP4, with which scaling, and what it costs.

What runs in low precision (Transformer Engine / Megatron-Core recipes; DeepSeek-V3, arXiv
2412.19437 §3.3; NVIDIA "Pretraining Large Language Models with NVFP4", arXiv 2509.25149):

* the linear layers of every transformer block (QKV, attention out-projection, MLP / expert
  GEMMs) in forward (fprop), input-gradient (dgrad) and weight-gradient (wgrad) GEMMs;
* kept in BF16/FP32: the attention core (softmax(QK^T)V), the embedding and the output layer
  (logits), norms, the optimizer's FP32 master weights and moments, gradients, and every
  collective (TP/CP/EP activations and DP gradients travel in BF16/FP32);
* FP4 only: a share of the linear layers stays in BF16 as well, the NVFP4 recipe keeps "a few
  sensitive linear layers" (the first and last blocks, about 15% of them, arXiv 2509.25149 §4)
  in higher precision: ``FP4_BF16_LAYER_FRACTION``.

Scaling recipes (``training.fp8_recipe`` / ``training.fp4_recipe``) and the bytes of scale
factors they add per element:

* ``tensorwise`` / ``delayed``: one FP32 scale per tensor (TE Float8CurrentScaling /
  DelayedScaling): nothing per element. Hopper's default.
* ``blockwise``: one FP32 scale per 1x128 activation tile and per 128x128 weight block
  (DeepSeek-V3 §3.3.1): 4/128 bytes per activation element.
* ``mxfp8``: one E8M0 byte per 32 elements (OCP Microscaling Formats spec v1.0, 2023), native
  on Blackwell and MI355X tensor cores: 1/32.
* ``nvfp4``: FP4 E2M1 values with one E4M3 byte per 16 elements plus an FP32 tensor scale
  (arXiv 2509.25149 §2), Blackwell only: 1/16. ``mxfp4``: one E8M0 byte per 32 (OCP MX), 1/32.

Quantization kernels: every low-precision GEMM operand is cast from BF16 before the GEMM, and
the backward pass needs each tensor a second time along the other axis (TE's fused
cast-transpose on Hopper; a second, column-wise quantization for block-scaled formats). A linear
layer has three distinct operands (input X, weight W, output gradient dY) shared by its three
GEMMs, each read once in BF16 (2 bytes) and written twice in low precision:
``2 + 2 (q + scale)`` bytes per element, spread over the three GEMMs (see ``quantize_bytes``);
current scaling (``tensorwise``) and NVFP4 first read the tensor once more for its amax
(``AMAX_PASS_RECIPES``). Check: Transformer Engine's GEMM profiling tutorial on an H200 NVL
(NVIDIA/TransformerEngine/docs/examples/gemm_profiling/gemm_profiling.rst) times a hidden-4096
layer's twelve GEMMs with FP8 current scaling at 20.285 ms with the casts and 16.785 ms
pre-quantized: 3.50 ms of casts.
Its benchmark casts both operands of every GEMM (each tensor twice): 2 x 1,241.7 M elements at
2 (amax) + 2 (read) + 2 (both orientations) bytes is 14.9 GB, 3.65 ms at 85% of 4.8 TB/s (+4%);
without the amax read 2.43 ms (-30%).
"""

from __future__ import annotations

from clustersim.compute.roofline import HBM_EFFICIENCY, memory_time_s
from clustersim.errors import InputError
from clustersim.hardware.spec import GpuSpec

LOW_PRECISION = ("fp8", "fp4")
TRAINING_DTYPES = ("bf16", "fp16", "fp8", "fp4", "fp32")   # training.dtype (clustersim.scenario.sections)
FP8_RECIPES = ("tensorwise", "delayed", "blockwise", "mxfp8")
FP4_RECIPES = ("nvfp4", "mxfp4")
ELEMENT_BYTES = {"fp8": 1.0, "fp4": 0.5}  # E4M3/E5M2: 1 byte; E2M1: half a byte (OCP MX spec v1.0)
SCALE_BYTES = {  # scale-factor bytes per element (see module docstring)
    "tensorwise": 0.0, "delayed": 0.0, "blockwise": 4 / 128, "mxfp8": 1 / 32, "nvfp4": 1 / 16, "mxfp4": 1 / 32,
}
# NVFP4 pretraining keeps about 15% of the linear layers (first and last blocks) in BF16 (arXiv 2509.25149 §4).
FP4_BF16_LAYER_FRACTION = 0.15
BF16_BYTES = 2
# Recipes whose per-tensor scale needs the tensor's amax before the cast: a separate kernel reads the
# BF16 tensor once more (Transformer Engine pytorch/csrc quantizer.cpp: Float8CurrentScalingQuantizer
# and NVFP4Quantizer call nvte_compute_amax, then nvte_compute_scale_from_amax, then nvte_quantize;
# MXFP8 and the 1x128 blockwise cast compute their block scales inside the cast kernel; delayed
# scaling takes the scale from the amax history and records the amax in the cast)
AMAX_PASS_RECIPES = ("tensorwise", "nvfp4")
# HBM efficiency of the cast kernels of the microscaled formats, whose per-block amax and scale
# computation keeps them below the streaming roofline (clustersim.compute.roofline HBM_EFFICIENCY,
# which the other recipes' casts run at): Transformer Engine's GEMM profiling tutorial on a B300,
# the casts' seconds per layer (autocast less pre-quantized: MXFP8 1.822 ms, NVFP4 2.689 ms) against
# their bytes (validation/micro/te_gemm_b300_2026.csv; benchmarks/micro_fit.py --fit; FP8 current
# scaling comes out at 0.80, within 6% of the roofline's 0.85, which it keeps). MXFP4 (AMD) is not
# measured: MXFP8's (the same 32-element blocks).
CAST_HBM_EFFICIENCY = {"mxfp8": 0.69, "nvfp4": 0.59, "mxfp4": 0.69}


def default_recipe(dtype: str, gpu: GpuSpec) -> str:
    """What Megatron-Core / TE run by default: MXFP8 where the tensor cores scale blocks natively
    (TE 2.x selects MXFP8BlockScaling on Blackwell), per-tensor delayed scaling elsewhere; NVFP4 on
    NVIDIA FP4 parts, MXFP4 on AMD's (MI355X has no NVFP4)."""
    if dtype == "fp8":
        return "mxfp8" if "mxfp8" in gpu.microscaling else "delayed"
    if dtype == "fp4":
        return "nvfp4" if "nvfp4" in gpu.microscaling else "mxfp4"
    return ""


def resolve_recipe(dtype: str, fp8_recipe: str | None, fp4_recipe: str | None, gpu: GpuSpec) -> str:
    """The scaling recipe of a scenario; InputError naming the field when the GPU lacks it."""
    if dtype not in gpu.dtypes:
        # the training dtypes this GPU runs (its profile also lists tf32, a matmul mode, not a training dtype)
        have = [d for d in TRAINING_DTYPES if d in gpu.dtypes]
        raise InputError("training.dtype", dtype, f"a training dtype that {gpu.name} runs: {', '.join(have)}")
    if fp8_recipe is not None and dtype != "fp8":
        raise InputError("training.fp8_recipe", fp8_recipe, "set only with training.dtype: fp8")
    if fp4_recipe is not None and dtype != "fp4":
        raise InputError("training.fp4_recipe", fp4_recipe, "set only with training.dtype: fp4")
    field, recipe = ("training.fp8_recipe", fp8_recipe) if dtype == "fp8" else ("training.fp4_recipe", fp4_recipe)
    recipe = recipe or default_recipe(dtype, gpu)
    if recipe in ("mxfp8", "mxfp4", "nvfp4") and recipe not in gpu.microscaling:
        have = [r for r in (FP8_RECIPES if dtype == "fp8" else FP4_RECIPES)
                if r not in ("mxfp8", "mxfp4", "nvfp4") or r in gpu.microscaling]
        raise InputError(field, recipe, f"a recipe {gpu.name} runs natively: {', '.join(have) or 'none'}")
    return recipe


def is_low_precision(dtype: str) -> bool:
    return dtype in LOW_PRECISION


def compute_dtype(dtype: str) -> str:
    """The tensor-core dtype of what stays in high precision (attention core, logits): BF16 under FP8/FP4."""
    return "bf16" if dtype in LOW_PRECISION else dtype


def quantize_bytes(m: int, n: int, k: int, dtype: str, recipe: str, batch: int = 1,
                   weight_share: float = 1.0) -> float:
    """HBM bytes of the cast kernels charged to one low-precision GEMM C[M,N] = A[M,K] B[K,N].

    A linear layer's three GEMMs read 2 x (|X| + |W| + |dY|) operand elements in total, i.e.
    each distinct tensor twice; each tensor is quantized once (read BF16, write both
    orientations), so each GEMM carries half of its operands' elements at 2 + 2 (q + scale) bytes.
    ``weight_share``: the share of its B operand's casts this GEMM pays, where B is the weight (the
    forward and input-gradient GEMMs) and the framework casts the weights once per step
    (``weight_cast_share``).
    """
    if dtype not in LOW_PRECISION:
        return 0.0
    per_element = BF16_BYTES + 2 * (ELEMENT_BYTES[dtype] + SCALE_BYTES.get(recipe, 0.0))
    if recipe in AMAX_PASS_RECIPES:
        per_element += BF16_BYTES
    return batch * (m * k + k * n * weight_share) / 2 * per_element


def weight_cast_share(dtype: str, casts_weights_once: bool, num_micro_batches: int) -> float:
    """The share of a linear layer's weight casts that one micro-batch pays (the one rule).
    Megatron-Core marks each step's first micro-batch (pipeline_parallel/schedules.py
    ``forward_step``: ``model.set_is_first_microbatch()``) and Transformer Engine casts the weights
    there and reuses the cached low-precision copy (and its transpose) in the step's other
    micro-batches (``is_first_microbatch``; the copies are the persistent ``weight_copy_bytes``):
    one cast per step, spread here over its micro-batches. Frameworks without that cache (torchao's
    Float8Linear under torchtitan) cast the weights in every forward: 1. 16-bit dtypes cast nothing."""
    if dtype not in LOW_PRECISION or not casts_weights_once:
        return 1.0
    return 1.0 / max(1, num_micro_batches)


def cast_time_s(size_bytes: float, recipe: str, gpu: GpuSpec) -> float:
    """Seconds of ``size_bytes`` of cast kernels under ``recipe`` (``CAST_HBM_EFFICIENCY``; the
    streaming roofline for the other recipes)."""
    return memory_time_s(size_bytes, gpu) * HBM_EFFICIENCY / CAST_HBM_EFFICIENCY.get(recipe, HBM_EFFICIENCY)


def bf16_share(dtype: str) -> float:
    """Fraction of the linear-layer GEMMs that stay in BF16 under ``dtype``."""
    return FP4_BF16_LAYER_FRACTION if dtype == "fp4" else 0.0


def weight_copy_bytes(dtype: str, recipe: str) -> float:
    """Bytes per parameter of the low-precision weight copies held next to the BF16 weight: the
    quantized weight and its transpose / column-wise copy (TE keeps both for fprop and dgrad)."""
    if dtype not in LOW_PRECISION:
        return 0.0
    return 2 * (ELEMENT_BYTES[dtype] + SCALE_BYTES.get(recipe, 0.0))
