"""Per-GPU-generation measured efficiencies that the shape models scale from.

Each number is a published microbenchmark, never a fit to a training run:

* MAMF, "maximum achievable matmul FLOPS" (stas00/ml-engineering, compute/accelerator/README.md,
  "Maximum Achievable Matmul FLOPS comparison table", measured with benchmarks/mamf-finder.py,
  mean of 100 iterations after 50 warm-up, best shape of a brute-force search):
  BF16: A100 SXM 271.2 of 312 TFLOPS at 1024x10240x5120 (torch 2.6.0+cu126);
  H100 SXM 794.5 of 989 at 2048x2048x13312 (torch 2.7.0+cu126; the table notes "H200 is the same").
  FP8 (e4m3): H100 SXM 1402.6 of 1979 at 1024x9216x14336; H200 SXM 1453.4 of 1979 at 1280x4096x12032.
  Blackwell and AMD rows of the same tables (read 2026-08 at commit 744d01e of the repository):
  BF16 B200 SXM 1745.0 at 1792x16128x3072 (torch 2.7.1+cu128); B300 SXM 1769.0 at 12288x18432x1024
  (2.9.1+cu130); GB200 1822.0 at 4096x9728x2048 (2.10.0.dev+cu130); MI300X 668.4 at 10240x15360x8192
  (2.5.1+rocm6.3, TunableOp on); MI325X 784.9 at 13312x10240x8192 (2.6.0+rocm6.2.4, TunableOp on,
  1000 W); MI355X 1565.0 at 12288x8192x8192 (2.8.0+rocm7.0.2). FP8: B200 3432.5 at 15360x4096x3072;
  B300 3353.3 at 3072x6144x7168; GB200 3615.6 at 19456x5120x1536. The fractions below divide by the
  dense peak of our GPU profile (the table's own "Theory" column uses 2300 for MI355X and 1300 for
  MI300X/MI325X where AMD's spec gives 2516.6 and 1307.4).
  The same table's A100 PCIe row: 252.9 of 312 at 2048x5120x6144 (torch 2.5.1+cu124); GH200 (the
  "900W 141GiB HBM3e version"): BF16 828.6 of 989 at 1024x15360x4096, FP8 1535.0 of 1979 at
  1024x14336x14336 (torch 2.6.0+cu126). No MAMF is published for H100 PCIe or H100 NVL: they
  take the H100 SXM fractions, flagged as unmeasured.
  No MAMF is published for H20, GB300 or any FP4 GEMM: those fall back (the FP4 GEMMs to the BF16
  fraction of their GPU) and ``ArchData.gemm_measured`` says so, so that the prediction interval
  can widen (clustersim.uncertainty).
* Flash attention: FlashAttention-2 (Dao 2023, arXiv 2307.08691, §4.1) reaches up to 73% of the
  A100's peak in the forward pass and up to 63% in the backward pass (head dim 128, long
  sequences). On Hopper the ceilings are those of cuDNN's fused attention, the kernel that
  Megatron-Core runs there: Transformer Engine picks FusedAttention over FlashAttention on
  Hopper ("Disabling FlashAttention to give FusedAttention preference on Hopper+ for performance
  reasons", transformer_engine/pytorch/attention.py get_attention_backend, TE 1.x, mid-2024).
  FlashAttention-3 (Shah et al. 2024, arXiv 2407.08608, §4.1, Figs. 5-6) measured cuDNN beside
  itself on H100 SXM5, BF16, head dim 128, at 16k tokens: 595 TFLOPS forward and 516 backward
  (FlashAttention-3 648 and 561; its headline 740 is head dim 256), i.e. 60.2% and 52.2% of 989.
  FlashAttention-3's own hdim-256 forward (740/989) and backward (about 540, 1.5-1.75x
  FlashAttention-2) remain the reference for the Blackwell and AMD ratios below.
* Sustained vs burst (MSMF / MAMF): MAMF is a short boost-clock burst; a training step is one long
  saturated run at the board's power limit, where the clock settles lower. stas00/ml-engineering
  (compute/accelerator/benchmarks/README.md, "What we measured: alone vs all-8 concurrent",
  mamf-finder-all-gpus.py, every GPU of the node busy as in training, n = 40): H200 bf16 MSMF 698.6
  vs MAMF 823.9 TFLOPS (ratio 0.848); B200 bf16 MSMF 1426.4 vs MAMF 1751.2 (0.815). Hopper now
  uses its own measured ratio instead (below, "Fitted to one H100"). No A100 measurement is published; it takes the
  mean of the two measured NVIDIA boards, 0.83. The ratio applies to tensor-core-bound kernels
  (GEMMs, flash attention), not to HBM-bound ones (the memory clock does not throttle). B300, GB200
  and GB300 take B200's ratio (same Blackwell SM, power-limited the same way; not measured); AMD
  parts take the 0.83 mean (no MSMF measurement is published for them).
* Flash attention on Blackwell: FlashAttention-4 (Zadouri, Dao et al. 2026, arXiv 2603.05451;
  Together AI blog "FlashAttention-4") reaches up to 1613 TFLOPS BF16 forward on B200 (71.7% of
  2250). No backward figure is stated beside it; we take the forward fraction times Hopper's
  backward/forward ratio (FlashAttention-3: 0.55 / 0.748 = 0.735), 52.7%. No attention measurement
  is published for AMD Instinct parts: they take Hopper's ceilings scaled by their MAMF efficiency
  relative to H100's (a kernel reaches the same share of what the GEMMs reach).
* Fitted to one H100 (Hopper: H100, H800, H200, GH200 share the SM, clocks and 700 W limit):
  the project's own microbenchmarks (validation/micro/, 2026-11-26, torch 2.11, one H100 80GB SXM)
  replace the published ceilings where they measured the same thing. ``GemmFit``: the GEMM
  shape model (clustersim.compute.gemm) with a 128x256 tile's main loop at 0.78 of the dense
  peak at burst clocks, 25 us of benchmark-harness time per synchronised call (host launch and
  synchronise, not a training cost), least squares of log time over the 33 shapes of
  h100_gemm_bf16_2026-11-26.csv (``python benchmarks/micro_fit.py --fit``; RMS 7.2%); sustained
  over burst: the 8192 x 4096 x 14336 GEMM run back to back for 25 s settles at 689.1 TFLOP/s
  (median of the 1-s windows after the first, h100_micro_2026-11-26.json) against 719.8 for the
  same kernel in the burst table (1.3615 ms less the 25 us harness time): 0.957. The same
  kernels alone at burst clocks lose 4.3%, not stas00's MSMF/MAMF 15%, whose MAMF is the best
  of a shape search (794.5 at 2048x2048x13312, where this fit gives 734) and whose MSMF (H200,
  all 8 busy) is 698.6, the level this GPU sustains alone (689): the fitted level replaces
  both for Hopper. FP8 GEMMs keep stas00's FP8 MAMF, scaled by the ratio of this fit to his
  BF16 MAMF at its shape (the same GPU-to-table relation). ``AttnFit``: causal
  ``scaled_dot_product_attention`` (cuDNN-class rates: 593 TFLOP/s forward at 8k, head dim
  128) as per-score time = matmul FLOPs at ``a`` x peak + ``beta`` (softmax: about one exp per
  score at the SFU rate, 3.9 T/s on H100 SXM, FlashAttention-3 §3.1: 0.26 ps) times a
  per-query-block fixed cost of ``blocks`` key blocks (v / (v + blocks)); fitted per direction
  to the 6 forward and 6 backward (forward+backward less forward) times, RMS 4.9% / 6.2%.
* L2 bandwidth (A100 only): 5120 bytes/clock (NVIDIA A100 Tensor Core GPU Architecture
  whitepaper, 2020: "A100 L2 cache read bandwidth 5120 Bytes/clk") at the 1410 MHz boost clock
  (same whitepaper) = 7.2 TB/s. Used to derive how much a GEMM tile loses when its data reuse is
  too small (clustersim.compute.gemm).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from clustersim.hardware.spec import GpuSpec


@dataclass(frozen=True, slots=True)
class GemmFit:
    """GEMM shape-model constants fitted to this GPU's own microbenchmark (module docstring)."""

    tile_eff: float           # a 128x256 tile's main-loop rate / dense BF16 peak, burst clocks
    bench_overhead_s: float   # per synchronised call of the microbenchmark (host side; not in training)


@dataclass(frozen=True, slots=True)
class AttnFit:
    """Flash-attention constants fitted to this GPU's own SDPA microbenchmark, per direction:
    (a: matmul rate / dense peak, beta_s: seconds per computed score, blocks: fixed cost per
    query block in key blocks), burst clocks (module docstring)."""

    fwd: tuple[float, float, float]
    bwd: tuple[float, float, float]


@dataclass(frozen=True, slots=True)
class ArchData:
    name: str
    # dtype -> (MAMF / dense peak, best shape (M, N, K) at which MAMF was measured)
    mamf: tuple[tuple[str, float, tuple[int, int, int]], ...]
    attn_fwd_frac: float      # flash-attention forward FLOP/s ceiling / dense peak
    attn_bwd_frac: float      # flash-attention backward FLOP/s ceiling / dense peak
    l2_bw_bytes_per_s: float  # 0 = unknown
    sustained_ratio: float = 0.83  # MSMF / MAMF: saturated-clock over boost-burst matmul throughput
    gemm_measured: bool = True     # False: no public MAMF for this GPU; its efficiency is borrowed
    gemm_fit: GemmFit | None = None  # fitted to this GPU's own GEMM microbenchmark (BF16)
    attn_fit: AttnFit | None = None  # fitted to this GPU's own attention microbenchmark

    def measured(self, dtype: str) -> bool:
        """Whether a GEMM in ``dtype`` runs at a measured efficiency (fp16 shares bf16's rate)."""
        if not self.gemm_measured:
            return False
        wanted = "bf16" if dtype in ("bf16", "fp16") else dtype
        return any(name == wanted for name, _, _ in self.mamf)

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
# cuDNN fused attention on H100 SXM5, BF16, head dim 128, 16k tokens: 595 forward, 516 backward TFLOPS
# (FlashAttention-3, arXiv 2407.08608, Figs. 5-6, cuDNN bars; module docstring)
_CUDNN_FWD_H100 = 595 / 989
_CUDNN_BWD_H100 = 516 / 989
# One H100 80GB SXM, 2026-11-26 (validation/micro/, module docstring; benchmarks/micro_fit.py --fit)
_HOPPER_GEMM = GemmFit(tile_eff=0.78, bench_overhead_s=25e-6)    # h100_gemm_bf16_2026-11-26.csv
_HOPPER_ATTN = AttnFit(fwd=(1.0, 0.22e-12, 7.0),                 # h100_micro_2026-11-26.json "attention"
                       bwd=(1.0, 0.42e-12, 15.0))
_HOPPER_SUSTAINED = 689.1 / 719.8   # sustained 25-s GEMM / the same shape's burst kernel (h100_micro, h100_gemm)
HOPPER_H100 = ArchData(
    name="h100",
    mamf=(("bf16", 794.5 / 989, (2048, 2048, 13312)),            # stas00 MAMF table, H100 SXM
          ("fp8", 1402.6 / 1979, (1024, 9216, 14336))),
    attn_fwd_frac=_CUDNN_FWD_H100, attn_bwd_frac=_CUDNN_BWD_H100,  # cuDNN, FlashAttention-3 Figs. 5-6
    l2_bw_bytes_per_s=0.0,
    sustained_ratio=_HOPPER_SUSTAINED,
    gemm_fit=_HOPPER_GEMM, attn_fit=_HOPPER_ATTN,
)
HOPPER_GH200 = ArchData(
    name="gh200",
    mamf=(("bf16", 828.6 / 989, (1024, 15360, 4096)),            # stas00 MAMF table, GH200 (900 W, HBM3e)
          ("fp8", 1535.0 / 1979, (1024, 14336, 14336))),         # stas00 FP8 table, GH200
    attn_fwd_frac=_CUDNN_FWD_H100, attn_bwd_frac=_CUDNN_BWD_H100,  # the same Hopper SMs as H100 SXM
    l2_bw_bytes_per_s=0.0,
    sustained_ratio=698.6 / 823.9,                               # not measured: H200's (same die, HBM3e)
)
# H100 PCIe / NVL: no public MAMF; the SXM part's fractions of their own (lower) peaks, flagged
HOPPER_H100_PCIE = replace(HOPPER_H100, name="h100-pcie", gemm_measured=False)
HOPPER_H100_NVL = replace(HOPPER_H100, name="h100-nvl", gemm_measured=False)
HOPPER_H200 = ArchData(
    name="h200",
    mamf=(("bf16", 794.5 / 989, (2048, 2048, 13312)),            # "H200 is the same" (stas00 table)
          ("fp8", 1453.4 / 1979, (1280, 4096, 12032))),          # stas00 FP8 table, H200 SXM
    attn_fwd_frac=_CUDNN_FWD_H100, attn_bwd_frac=_CUDNN_BWD_H100,  # same SMs and clocks as H100
    l2_bw_bytes_per_s=0.0,
    sustained_ratio=_HOPPER_SUSTAINED,                           # same die, clocks and 700 W limit as H100
    gemm_fit=_HOPPER_GEMM, attn_fit=_HOPPER_ATTN,
)
AMPERE_A100_PCIE = replace(AMPERE_A100, name="a100-pcie",
                           mamf=(("bf16", 252.9 / 312, (2048, 5120, 6144)),))  # stas00 MAMF table, A100 PCIe
_B200_SUSTAINED = 1426.4 / 1751.2                               # stas00 B200 MSMF / MAMF
_FA3_BWD_OVER_FWD = 0.55 / (740 / 989)                           # FlashAttention-3 backward / forward ceiling
_FA4_FWD = 1613 / 2250                                           # FlashAttention-4 §5, B200 BF16 forward
BLACKWELL_B200 = ArchData(
    name="b200",
    mamf=(("bf16", 1745.0 / 2250, (1792, 16128, 3072)),          # stas00 MAMF table, B200 SXM
          ("fp8", 3432.5 / 4500, (15360, 4096, 3072))),
    attn_fwd_frac=_FA4_FWD, attn_bwd_frac=_FA4_FWD * _FA3_BWD_OVER_FWD,
    l2_bw_bytes_per_s=0.0,
    sustained_ratio=_B200_SUSTAINED,
)
BLACKWELL_B300 = ArchData(
    name="b300",
    mamf=(("bf16", 1769.0 / 2250, (12288, 18432, 1024)),         # stas00 MAMF table, B300 SXM
          ("fp8", 3353.3 / 4500, (3072, 6144, 7168))),
    attn_fwd_frac=_FA4_FWD, attn_bwd_frac=_FA4_FWD * _FA3_BWD_OVER_FWD,
    l2_bw_bytes_per_s=0.0,
    sustained_ratio=_B200_SUSTAINED,                             # not measured: B200's
)
BLACKWELL_GB200 = ArchData(
    name="gb200",
    mamf=(("bf16", 1822.0 / 2500, (4096, 9728, 2048)),           # stas00 MAMF table, GB200
          ("fp8", 3615.6 / 5000, (19456, 5120, 1536))),
    attn_fwd_frac=_FA4_FWD, attn_bwd_frac=_FA4_FWD * _FA3_BWD_OVER_FWD,
    l2_bw_bytes_per_s=0.0,
    sustained_ratio=_B200_SUSTAINED,                             # not measured: B200's
)
BLACKWELL_GB300 = ArchData(                                      # no MAMF published: GB200's fractions
    name="gb300", mamf=BLACKWELL_GB200.mamf,
    attn_fwd_frac=_FA4_FWD, attn_bwd_frac=_FA4_FWD * _FA3_BWD_OVER_FWD,
    l2_bw_bytes_per_s=0.0, sustained_ratio=_B200_SUSTAINED, gemm_measured=False,
)
_H100_MAMF = 794.5 / 989
_AMD_SUSTAINED = (698.6 / 823.9 + 1426.4 / 1751.2) / 2           # no AMD MSMF: mean of H200, B200


def _amd(name: str, frac: float, shape: tuple[int, int, int]) -> ArchData:
    """An Instinct part: its measured BF16 MAMF, Hopper's attention ceilings scaled by frac / H100's."""
    return ArchData(name=name, mamf=(("bf16", frac, shape),),
                    attn_fwd_frac=740 / 989 * frac / _H100_MAMF, attn_bwd_frac=0.55 * frac / _H100_MAMF,
                    l2_bw_bytes_per_s=0.0, sustained_ratio=_AMD_SUSTAINED)


CDNA3_MI300X = _amd("mi300x", 668.4 / 1307.4, (10240, 15360, 8192))   # stas00 MAMF table, MI300X
CDNA3_MI325X = _amd("mi325x", 784.9 / 1307.4, (13312, 10240, 8192))   # stas00 MAMF table, MI325X
CDNA4_MI355X = _amd("mi355x", 1565.0 / 2516.6, (12288, 8192, 8192))   # stas00 MAMF table, MI355X

# Unknown GPUs: sustained ratio 0.83 as for A100; the median BF16 MAMF efficiency of the NVIDIA rows in the stas00 table
# (A100 86.9%, GH200 83.8%, A100 PCIe 81.1%, H100 80.3%, B300 78.6%, B200 77.6%, GB200 72.9%)
# is 80.3%; attention ceilings as FlashAttention-2 on A100.
FALLBACK = ArchData(
    name="generic",
    mamf=(("bf16", 0.803, (2048, 2048, 13312)),),
    attn_fwd_frac=0.73, attn_bwd_frac=0.63,
    l2_bw_bytes_per_s=0.0,
    sustained_ratio=(698.6 / 823.9 + 1426.4 / 1751.2) / 2,
    gemm_measured=False,
)
# H20: a cut-down Hopper with no public MAMF: the median efficiency above, flagged as unmeasured
HOPPER_H20 = ArchData(name="h20", mamf=FALLBACK.mamf, attn_fwd_frac=_CUDNN_FWD_H100, attn_bwd_frac=_CUDNN_BWD_H100,
                      l2_bw_bytes_per_s=0.0, sustained_ratio=698.6 / 823.9, gemm_measured=False)

# first match wins: longer names before the names they contain (gb200 before b200, h200 before h20)
_BY_NAME = (
    ("gb300", BLACKWELL_GB300), ("gb200", BLACKWELL_GB200), ("b300", BLACKWELL_B300), ("b200", BLACKWELL_B200),
    ("mi355", CDNA4_MI355X), ("mi350", CDNA4_MI355X), ("mi325", CDNA3_MI325X), ("mi300", CDNA3_MI300X),
    ("gh200", HOPPER_GH200), ("h200", HOPPER_H200), ("h20", HOPPER_H20),
    # H800: the H100 die with fewer NVLinks (same SMs, clocks, TDP); the H100's measurement
    ("h100-pcie", HOPPER_H100_PCIE), ("h100-nvl", HOPPER_H100_NVL), ("h100", HOPPER_H100), ("h800", HOPPER_H100),
    ("a100-pcie", AMPERE_A100_PCIE), ("a100", AMPERE_A100),
)


def arch_for(gpu: GpuSpec) -> ArchData:
    """Pick the measurement set by the GPU profile's name: a name that *begins* with a shipped
    GPU's family (a100-pcie-*, a100-*, h100-pcie-*, h100-nvl-*, h100-*, h800-*, h200-*, gh200-*,
    h20-*, b200-*, b300-*, gb200-*, gb300-*, mi300*, mi325*, mi350*, mi355*), not followed by a
    further digit, as the shipped profiles and the calibrated ones (``<shipped name>-<fit name>``)
    are named; any other name gets FALLBACK. A family named anywhere else in the name does not
    count: "rtx-a1000" is no A100, "h2000" no H200."""
    name = gpu.name.lower()
    for key, arch in _BY_NAME:
        if name.startswith(key) and not name[len(key):len(key) + 1].isdigit():
            return arch
    return FALLBACK


def gemm_measured(gpu: GpuSpec, dtype: str = "bf16") -> bool:
    """Whether the GEMM efficiency of ``gpu`` in ``dtype`` comes from a published measurement
    (False for GPUs without a MAMF row, FP4, or a calibrated profile's fitted efficiency: True)."""
    if gpu.gemm_efficiency > 0:
        return True
    return arch_for(gpu).measured(dtype)
