"""Per-GPU-generation measured efficiencies that the shape models scale from.

Each number is a published microbenchmark, never a fit to a training run:

* MAMF, "maximum achievable matmul FLOPS" (stas00/ml-engineering, compute/accelerator/README.md,
  "Maximum Achievable Matmul FLOPS comparison table", measured with benchmarks/mamf-finder.py,
  mean of 100 iterations after 50 warm-up, best shape of a brute-force search):
  BF16: A100 SXM 271.2 of 312 TFLOPS at 1024x10240x5120 (torch 2.6.0+cu126);
  H100 SXM 794.5 of 989 at 2048x2048x13312 (torch 2.7.0+cu126; the table notes "H200 is the same").
  FP8 (e4m3): H100 SXM 1402.6 of 1979 at 1024x9216x14336; H200 SXM 1453.4 of 1979 at 1280x4096x12032.
* Flash attention: FlashAttention-2 (Dao 2023, arXiv 2307.08691, §4.1) reaches up to 73% of the
  A100's peak in the forward pass and up to 63% in the backward pass (head dim 128, long
  sequences). On Hopper, FlashAttention-3 (Shah et al. 2024, arXiv 2407.08608, §4.1, Fig. 5)
  reaches up to 740 TFLOPS BF16 forward (75% of 989) and about 1.5-1.75x FlashAttention-2 in the
  backward pass, which we read as about 540 TFLOPS (55%); Megatron-Core on H100 runs cuDNN /
  TE fused attention of that class.
* Sustained vs burst (MSMF / MAMF): MAMF is a short boost-clock burst; a training step is one long
  saturated run at the board's power limit, where the clock settles lower. stas00/ml-engineering
  (compute/accelerator/benchmarks/README.md, "What we measured: alone vs all-8 concurrent",
  mamf-finder-all-gpus.py, every GPU of the node busy as in training, n = 40): H200 bf16 MSMF 698.6
  vs MAMF 823.9 TFLOPS (ratio 0.848); B200 bf16 MSMF 1426.4 vs MAMF 1751.2 (0.815). H100 has the
  same die and 700 W limit as H200, so it takes 0.848. No A100 measurement is published; it takes the
  mean of the two measured NVIDIA boards, 0.83. The ratio applies to tensor-core-bound kernels
  (GEMMs, flash attention), not to HBM-bound ones (the memory clock does not throttle).
* L2 bandwidth (A100 only): 5120 bytes/clock (NVIDIA A100 Tensor Core GPU Architecture
  whitepaper, 2020: "A100 L2 cache read bandwidth 5120 Bytes/clk") at the 1410 MHz boost clock
  (same whitepaper) = 7.2 TB/s. Used to derive how much a GEMM tile loses when its data reuse is
  too small (clustersim.compute.gemm).
"""

from __future__ import annotations

from dataclasses import dataclass

from clustersim.hardware.spec import GpuSpec


@dataclass(frozen=True, slots=True)
class ArchData:
    name: str
    # dtype -> (MAMF / dense peak, best shape (M, N, K) at which MAMF was measured)
    mamf: tuple[tuple[str, float, tuple[int, int, int]], ...]
    attn_fwd_frac: float      # flash-attention forward FLOP/s ceiling / dense peak
    attn_bwd_frac: float      # flash-attention backward FLOP/s ceiling / dense peak
    l2_bw_bytes_per_s: float  # 0 = unknown
    sustained_ratio: float = 0.83  # MSMF / MAMF: saturated-clock over boost-burst matmul throughput

    def mamf_for(self, dtype: str) -> tuple[float, tuple[int, int, int]]:
        for name, frac, shape in self.mamf:
            if name == dtype:
                return frac, shape
        # fp16 has the same tensor-core rate as bf16 on A100/H100 (datasheets); tf32/fp32/fp8 fall
        # back to the bf16 measurement when no measurement of their own is listed.
        for name, frac, shape in self.mamf:
            if name == "bf16":
                return frac, shape
        return FALLBACK.mamf[0][1], FALLBACK.mamf[0][2]


AMPERE_A100 = ArchData(
    name="a100",
    mamf=(("bf16", 271.2 / 312, (1024, 10240, 5120)),),        # stas00 MAMF table, A100 SXM
    attn_fwd_frac=0.73, attn_bwd_frac=0.63,                      # FlashAttention-2 §4.1
    l2_bw_bytes_per_s=5120 * 1.41e9,                             # A100 whitepaper
    sustained_ratio=(698.6 / 823.9 + 1426.4 / 1751.2) / 2,       # no A100 MSMF: mean of H200, B200
)
HOPPER_H100 = ArchData(
    name="h100",
    mamf=(("bf16", 794.5 / 989, (2048, 2048, 13312)),            # stas00 MAMF table, H100 SXM
          ("fp8", 1402.6 / 1979, (1024, 9216, 14336))),
    attn_fwd_frac=740 / 989, attn_bwd_frac=0.55,                 # FlashAttention-3 §4.1
    l2_bw_bytes_per_s=0.0,
    sustained_ratio=698.6 / 823.9,                               # H200 MSMF/MAMF, same die and TDP
)
HOPPER_H200 = ArchData(
    name="h200",
    mamf=(("bf16", 794.5 / 989, (2048, 2048, 13312)),            # "H200 is the same" (stas00 table)
          ("fp8", 1453.4 / 1979, (1280, 4096, 12032))),          # stas00 FP8 table, H200 SXM
    attn_fwd_frac=740 / 989, attn_bwd_frac=0.55,
    l2_bw_bytes_per_s=0.0,
    sustained_ratio=698.6 / 823.9,                               # stas00: H200, all 8 GPUs busy
)
# Unknown GPUs: sustained ratio 0.83 as for A100; the median BF16 MAMF efficiency of the NVIDIA rows in the stas00 table
# (A100 86.9%, GH200 83.8%, A100 PCIe 81.1%, H100 80.3%, B300 78.6%, B200 77.6%, GB200 72.9%)
# is 80.3%; attention ceilings as FlashAttention-2 on A100.
FALLBACK = ArchData(
    name="generic",
    mamf=(("bf16", 0.803, (2048, 2048, 13312)),),
    attn_fwd_frac=0.73, attn_bwd_frac=0.63,
    l2_bw_bytes_per_s=0.0,
    sustained_ratio=(698.6 / 823.9 + 1426.4 / 1751.2) / 2,
)


def arch_for(gpu: GpuSpec) -> ArchData:
    """Pick the measurement set by the GPU profile's name (a100-*, h100-*, h800-*, h200-*, gh200-*)."""
    name = gpu.name.lower()
    if "h200" in name or "gh200" in name:
        return HOPPER_H200
    if "h100" in name or "h800" in name:  # H800: the H100 die with fewer NVLinks (same SMs, clocks, TDP)
        return HOPPER_H100
    if "a100" in name:
        return AMPERE_A100
    return FALLBACK
