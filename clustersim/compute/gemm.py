"""GEMM time with a shape-dependent achievable efficiency.

``efficiency = MAMF/peak x q(M, N, K) / q(M*, N*, K*)`` where MAMF is the maximum achievable
matmul FLOP/s measured at the best shape (M*, N*, K*) (clustersim.compute.arch) and q is the
fraction of the tensor cores' time that does useful work for a shape, from three effects:

1. **Tile quantization** (NVIDIA, "Matrix Multiplication Background User's Guide", §"Tile
   quantization"): the output is computed in tiles (cuBLAS picks among 256x128, 128x256, 128x128,
   256x64, 64x256, 128x64, 64x128, 64x64); a dimension that is not a multiple of the tile wastes the
   padded part.
2. **Wave quantization** (same guide, §"Wave quantization"): tiles run in waves of one tile per SM
   (108 SMs on A100, 132 on H100); a partial last wave leaves SMs idle.
   Larger tiles reuse more data; smaller ones may become bound by L2 bandwidth (same guide,
   "larger tiles ... more efficient"). A tile of tm x tn does 2 tm tn FLOPs per (tm + tn) x bytes
   loaded per k step; if that arithmetic intensity is below peak / L2 bandwidth the tile runs at
   the ratio. Where the L2 bandwidth is not published we assume that 128x128 tiles saturate.
   The library picks the tile with the best product (cuBLAS heuristics aim at exactly that).
3. **Small-K ramp**: each tile's main loop is preceded by a prologue that fills the software
   pipeline and followed by an epilogue that writes C, so a tile spends K / (K + K0) of its time
   in the main loop. K0 = 256 (four 64-deep k-tiles: a 4-stage pipeline fill plus the epilogue)
   is fitted to the H100 microbenchmark (validation/micro/h100_gemm_bf16_2026-11-26.csv: at K =
   2,048 the shapes run 20-30% below the same M, N at K = 8,192; ``benchmarks/micro_fit.py
   --fit``, clustersim.compute.arch "Fitted to one H100"); it was 128 (two k-tiles) before.

The level q is scaled to: where the GPU has its own fitted GEMM microbenchmark
(``ArchData.gemm_fit``, Hopper) ``efficiency = tile_eff x q``; elsewhere the normalisation by q at
the MAMF shape makes the model reproduce the measured MAMF exactly at that shape and caps it at
MAMF. The result is then scaled by the GPU's sustained ratio (clustersim.compute.arch): a
training step keeps the tensor cores saturated at the power limit for seconds, where the clock
sits below the boost clock of a short burst. Thin GEMMs are additionally limited by HBM
bandwidth (roofline: bytes of A, B and C once each). A calibrated profile
(``gpu.gemm_efficiency > 0``) replaces the shape model by that fixed fraction.
"""

from __future__ import annotations

import functools
import math

from clustersim.compute import precision
from clustersim.compute.arch import arch_for
from clustersim.compute.dtypes import gemm_operand_bytes
from clustersim.compute.ops import Op
from clustersim.compute.roofline import KERNEL_FLOOR_S, memory_time_s
from clustersim.hardware.spec import GpuSpec

# cuBLAS/CUTLASS output tile sizes (Matrix Multiplication Background User's Guide, tile quantization)
TILES = ((256, 128), (128, 256), (128, 128), (256, 64), (64, 256), (128, 64), (64, 128), (64, 64))
K_PROLOGUE = 256  # pipeline fill + epilogue in K-elements, fitted to the H100 GEMM table (module docstring)


def _tile_reuse_eff(tm: int, tn: int, operand_bytes: float, peak: float, l2_bw: float) -> float:
    intensity = 2 * tm * tn / ((tm + tn) * operand_bytes)   # FLOP per byte loaded from L2
    # FLOP per byte the SM needs to stay tensor-bound; unknown L2 bandwidth: assume 128x128 tiles saturate
    required = peak / l2_bw if l2_bw > 0 else 2 * 128 * 128 / (256 * operand_bytes)
    return min(1.0, intensity / required)


def _quantization(m: int, n: int, k: int, batch: int, num_sms: int, operand_bytes: float,
                  peak: float, l2_bw: float) -> float:
    """q(M, N, K): best over tiles of useful fraction x wave fraction x reuse, times the K ramp."""
    best = 0.0
    sms = max(1, num_sms)
    for tm, tn in TILES:
        tiles_m, tiles_n = math.ceil(m / tm), math.ceil(n / tn)
        tile_util = (m * n) / (tiles_m * tm * tiles_n * tn)
        tiles = tiles_m * tiles_n * batch
        wave_util = tiles / (math.ceil(tiles / sms) * sms)
        eff = tile_util * wave_util * _tile_reuse_eff(tm, tn, operand_bytes, peak, l2_bw)
        best = max(best, eff)
    return best * k / (k + K_PROLOGUE)


@functools.lru_cache(maxsize=65536)
def gemm_efficiency(m: int, n: int, k: int, gpu: GpuSpec, dtype: str, batch: int = 1) -> float:
    """Sustained achievable fraction of the dense ``dtype`` peak for a (batch of) M x N x K GEMM."""
    if gpu.gemm_efficiency > 0:
        return gpu.gemm_efficiency
    return burst_efficiency(m, n, k, gpu, dtype, batch) * arch_for(gpu).sustained_ratio * gpu.gemm_scale


@functools.lru_cache(maxsize=65536)
def burst_efficiency(m: int, n: int, k: int, gpu: GpuSpec, dtype: str, batch: int = 1) -> float:
    """The shape model at burst clocks (a short benchmark's kernel, before the sustained ratio)."""
    arch = arch_for(gpu)
    frac, (ms, ns, ks) = arch.mamf_for(dtype)
    ob = gemm_operand_bytes(dtype)
    peak = gpu.peak(dtype)
    q = _quantization(m, n, k, batch, gpu.num_sms, ob, peak, arch.l2_bw_bytes_per_s)
    fit = arch.gemm_fit
    if fit is not None and dtype in ("bf16", "fp16"):
        return fit.tile_eff * q
    q_ref = _quantization(ms, ns, ks, 1, gpu.num_sms, ob, peak, arch.l2_bw_bytes_per_s)
    if fit is not None:   # another dtype on a fitted GPU: the table's MAMF as this GPU measured the BF16 one
        bf, (bm, bn, bk) = arch.mamf_for("bf16")
        b_peak = gpu.peak("bf16")
        frac *= fit.tile_eff * _quantization(bm, bn, bk, 1, gpu.num_sms, gemm_operand_bytes("bf16"), b_peak,
                                             arch.l2_bw_bytes_per_s) / bf
    return min(frac, frac * q / q_ref)


@functools.lru_cache(maxsize=65536)
def gemm_op(name: str, m: int, n: int, k: int, gpu: GpuSpec, dtype: str, batch: int = 1) -> Op:
    """C[M,N] = A[M,K] B[K,N] (``batch`` independent ones): FLOPs, bytes and time."""
    m, n, k = max(1, int(m)), max(1, int(n)), max(1, int(k))
    flops = 2.0 * m * n * k * batch
    ob = gemm_operand_bytes(dtype)
    out_bytes = 4 if dtype == "fp32" else 2   # C is written in bf16/fp16 (fp32 for fp32 training)
    bytes_moved = float(batch * ((m * k + k * n) * ob + m * n * out_bytes))
    compute_s = flops / (gpu.peak(dtype) * gemm_efficiency(m, n, k, gpu, dtype, batch))
    return Op(name, flops, bytes_moved,
              max(compute_s, memory_time_s(bytes_moved, gpu), KERNEL_FLOOR_S) / gpu.compute_scale)


@functools.lru_cache(maxsize=65536)
def linear_gemm_op(name: str, m: int, n: int, k: int, gpu: GpuSpec, dtype: str, recipe: str = "",
                   batch: int = 1, weight_share: float = 1.0) -> Op:
    """A GEMM of a transformer linear layer under the training dtype's recipe.

    bf16/fp16/fp32: ``gemm_op``. fp8/fp4 (clustersim.compute.precision): the GEMM at the
    low-precision peak and efficiency, plus its share of the cast kernels (HBM-bound, 85% of
    bandwidth); under fp4 the share of layers kept in BF16 runs at the BF16 rate (time-weighted).
    """
    if not precision.is_low_precision(dtype):
        return gemm_op(name, m, n, k, gpu, dtype, batch)
    recipe = recipe or precision.default_recipe(dtype, gpu)
    low = gemm_op(name, m, n, k, gpu, dtype, batch)
    share = precision.bf16_share(dtype)
    q_bytes = precision.quantize_bytes(m, n, k, dtype, recipe, batch, weight_share)
    time_s = low.time_s + precision.cast_time_s(q_bytes, recipe, gpu) / gpu.compute_scale
    bytes_moved = low.bytes_moved + q_bytes
    if share > 0:
        high = gemm_op(name, m, n, k, gpu, "bf16", batch)
        time_s = (1 - share) * time_s + share * high.time_s
        bytes_moved = (1 - share) * bytes_moved + share * high.bytes_moved
    return Op(name, low.flops, bytes_moved, time_s)
