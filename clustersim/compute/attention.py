"""Flash-attention core (softmax(Q K^T) V fused, no s x s matrix in HBM), forward and backward.

FLOPs (FlashAttention-2, Dao 2023, arXiv 2307.08691, §4.1): the forward pass does two GEMMs per
head, Q K^T and P V, i.e. 4 x s_q x s_k x head_dim FLOPs; the backward pass does five (recompute
S = Q K^T, dV, dP, dQ, dK), "2.5 times" the forward FLOPs (same section).

Causal masking: the kernel skips key blocks entirely above the diagonal and computes the blocks
on it in full. With square blocks of B = 128 rows (FlashAttention-2's forward block size for
head dim 128) and n = s_k / B blocks per row, (n + 1) / (2 n) of the s_q x s_k scores are
computed, "about half". With context parallelism each rank holds s / cp queries and sees all
s keys over the ring, with Megatron's load-balanced chunking giving every rank the same share.

Time: FLOPs / (peak x ceiling x ramp). The ceiling is the best FLOP/s fraction the paper reports
(clustersim.compute.arch). The ramp models the per-query-block fixed cost (load Q, final
rescale, write O and the log-sum-exp), about one key block's work: a query block that visits
n_visit key blocks runs at n_visit / (n_visit + 1) of the ceiling, normalised to the long
sequence (16k) where the papers measured the ceiling.

Where the GPU has its own fitted attention microbenchmark (``ArchData.attn_fit``, Hopper:
validation/micro/h100_micro_2026-11-26.json) the time is built from it instead: every computed
score costs its matmul FLOPs (2 (d_qk + d_v) forward, 2.5x that backward) at ``a`` x peak plus
``beta`` seconds of softmax (about one exp per score on the special-function units), and each
query block pays a fixed cost of ``blocks`` key blocks: x (v + blocks) / v for v key blocks
visited. At 2k tokens and head dim 128 that makes the forward 40% slower per FLOP than at 8k,
as measured (376 vs 593 TFLOP/s), where the papers' ramp gave 9%.

Local layers (sliding window, chunked attention; clustersim.compute.attention_span): the kernel
computes the tiles inside the layer's span only, each in full, and a query block visits that
many key blocks, so both the FLOPs and the ramp follow ``attention_span.block_fraction``.
"""

from __future__ import annotations

import math

from clustersim.compute.arch import ArchData, arch_for
from clustersim.compute.attention_span import block_fraction
from clustersim.compute.ops import Op
from clustersim.compute.precision import compute_dtype
from clustersim.compute.roofline import KERNEL_FLOOR_S, memory_time_s
from clustersim.hardware.spec import GpuSpec

BLOCK = 128          # FlashAttention-2 block size for head dim 128 (FA2 §3.3 / its launch config)
BWD_FLOP_RATIO = 2.5  # FlashAttention-2 §4.1: backward FLOPs = 2.5 x forward
REF_SEQ = 16384       # sequence length at which the papers' ceilings were measured


def _causal_fraction(s_k: int) -> float:
    n = max(1, math.ceil(s_k / BLOCK))
    return (n + 1) / (2 * n)


def _visits(s: int, causal: bool) -> float:
    n = max(1, math.ceil(s / BLOCK))
    return (n + 1) / 2 if causal else n


def _ramp(s_k: int, causal: bool, visits: float | None = None) -> float:
    """``visits``: mean key blocks per query block when not those of full attention (local layers)."""
    v, v_ref = (_visits(s_k, causal) if visits is None else visits), _visits(REF_SEQ, causal)
    return min(1.0, (v / (v + 1)) / (v_ref / (v_ref + 1)))


def _local(s_k: int, causal: bool, pattern: str, window: int) -> tuple[float, float] | None:
    """(computed fraction, visits) of a causal local layer whose span is shorter than the keys."""
    if pattern == "full" or not causal or window <= 0 or window >= s_k:
        return None
    return block_fraction(s_k, pattern, window, BLOCK)


def attention_fwd_flops(batch: int, s_q: int, s_k: int, heads: int, head_dim: int, causal: bool = True,
                        v_head_dim: int = 0, pattern: str = "full", window: int = 0) -> float:
    """Q K^T (``head_dim`` deep) and P V (``v_head_dim`` wide, default ``head_dim``): 2 s_q s_k
    (d_qk + d_v) per head, the papers' 4 s_q s_k d when both are d, times the share of the score
    tiles the kernel computes (causal; a local ``pattern`` of span ``window``)."""
    local = _local(s_k, causal, pattern, window)
    frac = local[0] if local else (_causal_fraction(s_k) if causal else 1.0)
    dv = v_head_dim or head_dim
    return 2.0 * batch * s_q * s_k * heads * (head_dim + dv) * frac


def attention_ops(batch: int, s_q: int, s_k: int, heads: int, kv_heads: int, head_dim: int,
                  gpu: GpuSpec, dtype: str, act_bytes: int, causal: bool = True, v_head_dim: int = 0,
                  name: str = "attention_core", pattern: str = "full", window: int = 0) -> tuple[Op, Op]:
    """(forward, backward) flash-attention ops for ``heads`` query heads on this GPU.
    ``v_head_dim`` (MLA: 128 next to a 192-deep query/key head) defaults to ``head_dim``;
    ``pattern`` / ``window``: a local layer's span (clustersim.compute.attention_span)."""
    arch = arch_for(gpu)
    peak = gpu.peak(compute_dtype(dtype))  # TE runs attention in bf16 under fp8/fp4 recipes
    local = _local(s_k, causal, pattern, window)
    ramp = _ramp(s_k, causal, local[1] if local else None)
    dv = v_head_dim or head_dim
    fwd_flops = attention_fwd_flops(batch, s_q, s_k, heads, head_dim, causal, dv, pattern, window)
    bwd_flops = BWD_FLOP_RATIO * fwd_flops
    if arch.attn_fit is not None:
        return _fitted_ops(arch, batch, s_q, s_k, heads, kv_heads, head_dim, dv, gpu, dtype, act_bytes, causal,
                           name, fwd_flops, bwd_flops, peak, local)
    q_bytes = batch * s_q * heads * head_dim * act_bytes
    o_bytes = batch * s_q * heads * dv * act_bytes
    kv_bytes = batch * s_k * kv_heads * (head_dim + dv) * act_bytes
    lse_bytes = batch * s_q * heads * 4                    # fp32 log-sum-exp per query row
    fwd_bytes = q_bytes + kv_bytes + o_bytes + lse_bytes   # read Q, K, V; write O, lse
    bwd_bytes = q_bytes + 2 * o_bytes + kv_bytes + lse_bytes + q_bytes + kv_bytes  # read Q, O, dO, K, V, lse; write dQ, dK, dV
    # The papers' ceilings are short benchmarks: scale by the sustained (MSMF / MAMF) clock ratio as for
    # GEMMs; a calibrated profile instead scales them by its GEMM efficiency over the sustained MAMF.
    sustained = arch.mamf_for(compute_dtype(dtype))[0] * arch.sustained_ratio
    scale = gpu.gemm_efficiency / sustained if gpu.gemm_efficiency > 0 else arch.sustained_ratio
    eff_fwd = arch.attn_fwd_frac * ramp * scale * gpu.attention_scale
    eff_bwd = arch.attn_bwd_frac * ramp * scale * gpu.attention_scale
    fwd_t = max(fwd_flops / (peak * eff_fwd), memory_time_s(fwd_bytes, gpu), KERNEL_FLOOR_S) / gpu.compute_scale
    bwd_t = max(bwd_flops / (peak * eff_bwd), memory_time_s(bwd_bytes, gpu), KERNEL_FLOOR_S) / gpu.compute_scale
    return (Op(name, fwd_flops, fwd_bytes, fwd_t),
            Op(f"{name}_bwd", bwd_flops, bwd_bytes, bwd_t))


def fitted_times_s(arch: ArchData, batch: int, s_q: int, s_k: int, heads: int, head_dim: int, v_head_dim: int,
                   peak: float, causal: bool = True, local: tuple[float, float] | None = None) -> tuple[float, float]:
    """(forward, backward) kernel seconds at burst clocks from the GPU's fitted microbenchmark
    constants (module docstring); ``arch.attn_fit`` must be set. ``local``: a local layer's
    (computed fraction, visits) (``_local``), which replace full attention's."""
    fit = arch.attn_fit
    assert fit is not None
    frac = local[0] if local else (_causal_fraction(s_k) if causal else 1.0)
    scores = batch * heads * s_q * s_k * frac
    visits = local[1] if local else _visits(s_k, causal)
    per_score = 2.0 * (head_dim + v_head_dim)
    # no attention kernel outruns the GPU's best GEMM (MAMF, burst clocks): the fit, measured at head
    # dims 64-128, would extrapolate its matmul part to the dense peak at wide heads (MFU over 100%)
    ceiling = arch.mamf_for("bf16")[0]
    out = []
    for mult, (a, beta_s, blocks) in ((1.0, fit.fwd), (BWD_FLOP_RATIO, fit.bwd)):
        fitted = scores * (mult * per_score / (peak * a) + beta_s) * (visits + blocks) / visits
        out.append(max(fitted, scores * mult * per_score / (peak * ceiling)))
    return out[0], out[1]


def _fitted_ops(arch: ArchData, batch: int, s_q: int, s_k: int, heads: int, kv_heads: int, head_dim: int, dv: int,
                gpu: GpuSpec, dtype: str, act_bytes: int, causal: bool, name: str, fwd_flops: float,
                bwd_flops: float, peak: float, local: tuple[float, float] | None = None) -> tuple[Op, Op]:
    """The ops from the fitted constants: burst time / the sustained ratio (a calibrated profile:
    x its GEMM level over the fitted one), times its attention and compute scales."""
    fwd_s, bwd_s = fitted_times_s(arch, batch, s_q, s_k, heads, head_dim, dv, peak, causal, local)
    fit = arch.gemm_fit
    level = fit.tile_eff if fit is not None else arch.mamf_for(compute_dtype(dtype))[0]
    sustained = gpu.gemm_efficiency / level if gpu.gemm_efficiency > 0 else arch.sustained_ratio
    speed = sustained * gpu.attention_scale
    q_bytes = batch * s_q * heads * head_dim * act_bytes
    o_bytes = batch * s_q * heads * dv * act_bytes
    kv_bytes = batch * s_k * kv_heads * (head_dim + dv) * act_bytes
    lse_bytes = batch * s_q * heads * 4
    fwd_bytes = q_bytes + kv_bytes + o_bytes + lse_bytes
    bwd_bytes = q_bytes + 2 * o_bytes + kv_bytes + lse_bytes + q_bytes + kv_bytes
    fwd_t = max(fwd_s / speed, memory_time_s(fwd_bytes, gpu), KERNEL_FLOOR_S) / gpu.compute_scale
    bwd_t = max(bwd_s / speed, memory_time_s(bwd_bytes, gpu), KERNEL_FLOOR_S) / gpu.compute_scale
    return Op(name, fwd_flops, fwd_bytes, fwd_t), Op(f"{name}_bwd", bwd_flops, bwd_bytes, bwd_t)
