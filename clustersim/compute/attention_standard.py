"""Unfused ("standard") attention core as Megatron-LM ran it before flash attention (2019-2022).

Per head group on a TP rank (Shoeybi et al. 2019; Korthikanti et al. 2022 §4.1 lists the stored
tensors): Q K^T as a batched GEMM (``baddbmm``, b x a/t batches of s x s x d), the fused
scale-mask-softmax kernel (megatron/fused_kernels, scaled_upper_triang_masked_softmax: reads and
writes the s x s scores in 16 bit), attention dropout (writes the output and a 1-byte mask), and
P V as a batched GEMM (s x d x s). All s^2 scores are computed (masking happens in the softmax),
so the FLOPs are the full 4 b s^2 h / t. Backward: dP = dO V^T and dV = P^T dO, dropout and
softmax backward (element-wise over s^2), dQ = dS K and dK = dS^T Q.
"""

from __future__ import annotations

from clustersim.compute.gemm import gemm_op
from clustersim.compute.ops import Op
from clustersim.compute.precision import compute_dtype
from clustersim.compute.roofline import memory_bound_op
from clustersim.hardware.spec import GpuSpec


def standard_attention_ops(batch: int, s_q: int, s_k: int, heads: int, head_dim: int, gpu: GpuSpec, dtype: str,
                           act_bytes: int, dropout: bool) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """(forward ops, backward ops) of the unfused attention core for ``heads`` heads on this GPU."""
    dtype = compute_dtype(dtype)                  # the attention core stays in BF16 under FP8/FP4
    bh = batch * heads
    scores = bh * s_q * s_k                       # elements of the score matrix
    a = act_bytes
    fwd = [gemm_op("attn_scores_qk", s_q, s_k, head_dim, gpu, dtype, batch=bh),
           memory_bound_op("attn_softmax", scores * 2 * a, gpu)]
    if dropout:
        fwd.append(memory_bound_op("attn_dropout", scores * (2 * a + 1), gpu))
    fwd.append(gemm_op("attn_values_pv", s_q, head_dim, s_k, gpu, dtype, batch=bh))
    bwd = [gemm_op("attn_values_dgrad_dp", s_q, s_k, head_dim, gpu, dtype, batch=bh),
           gemm_op("attn_values_wgrad_dv", s_k, head_dim, s_q, gpu, dtype, batch=bh)]
    if dropout:
        bwd.append(memory_bound_op("attn_dropout_bwd", scores * (2 * a + 1), gpu))
    bwd += [memory_bound_op("attn_softmax_bwd", scores * 3 * a, gpu),
            gemm_op("attn_scores_dgrad_dq", s_q, head_dim, s_k, gpu, dtype, batch=bh),
            gemm_op("attn_scores_dgrad_dk", s_k, head_dim, s_q, gpu, dtype, batch=bh)]
    return tuple(fwd), tuple(bwd)
