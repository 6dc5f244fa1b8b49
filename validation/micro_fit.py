"""The kernel models against the H100 microbenchmarks of validation/micro/ (rows and fits).

Every row is (what, measured, model, error). The GEMM and attention figures are burst-clock
kernels: the model's burst efficiency (clustersim.compute.gemm.burst_efficiency, the fitted
attention constants) before the sustained ratio a training step runs at; a GEMM call of the
table also pays the harness's time per synchronised call (``GemmFit.bench_overhead_s``). The
sustained GEMM, the eager ops and the optimizer are compared with what a training step uses.
``fit_gemm`` and ``fit_attention`` re-run the least-squares fits whose constants sit in
clustersim/compute/arch.py (benchmarks/micro_fit.py --fit).
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from clustersim.compute import gemm, precision
from clustersim.compute.arch import ArchData, AttnFit, arch_for
from clustersim.compute.attention import fitted_times_s
from clustersim.compute.eager import EAGER_OPS, eager_time_s
from clustersim.compute.optimizer import ADAMW_FUSED_BYTES_PER_PARAM, adam_kernel_s
from clustersim.compute.roofline import HBM_EFFICIENCY, memory_time_s
from clustersim.hardware.load import load_gpu
from clustersim.hardware.spec import GpuSpec

MICRO_DIR = Path(__file__).resolve().parent / "micro"
GEMM_CSV = MICRO_DIR / "h100_gemm_bf16_2026-11-26.csv"
MICRO_JSON = MICRO_DIR / "h100_micro_2026-11-26.json"
GPU = "h100-sxm-80gb"
# Transformer Engine's GEMM profiling tutorial on a B300 (CUDA events, no harness time per call)
TE_B300_CSV = MICRO_DIR / "te_gemm_b300_2026.csv"
B300 = "b300-sxm-288gb"
TE_LAYER = ((4096, 12288), (4096, 4096), (4096, 16384), (16384, 4096))  # its layer's linears, (in, out)
TE_DTYPE = {"bf16": "bf16", "fp8_current": "fp8", "mxfp8": "fp8", "nvfp4": "fp4"}
# the JSON counts these bytes per element (16-bit in and out; the loss: bf16 read, fp32 written and read)
COUNTED_BYTES = {"rmsnorm_eager": 4, "silu_mul": 6, "add": 6, "cross_entropy_fp32_upcast": 10}
MODEL_OP = {"rmsnorm_eager": "rmsnorm_fp32_upcast", "silu_mul": "silu_mul", "add": "add",
            "cross_entropy_fp32_upcast": "cross_entropy_fp32_upcast"}


@dataclass(frozen=True)
class Row:
    what: str
    measured: float
    model: float
    unit: str

    @property
    def error(self) -> float:
        """Model over measured time, minus 1 (rates are inverted so that + means too slow)."""
        if self.unit.endswith("/s"):
            return self.measured / self.model - 1
        return self.model / self.measured - 1


def _h100() -> GpuSpec:
    return load_gpu(GPU)


def gemm_table() -> list[tuple[int, int, int, float]]:
    """(M, K, N, median seconds) of the burst GEMM table."""
    with GEMM_CSV.open() as f:
        return [(int(r["M"]), int(r["K"]), int(r["N"]), float(r["median_s"])) for r in csv.DictReader(f)]


def micro() -> dict:
    return json.loads(MICRO_JSON.read_text())


def gemm_call_s(m: int, k: int, n: int, gpu: GpuSpec) -> float:
    """One synchronised call of the table: the burst kernel plus the harness's time per call."""
    fit = arch_for(gpu).gemm_fit
    assert fit is not None
    return fit.bench_overhead_s + 2.0 * m * n * k / (gpu.peak("bf16") * gemm.burst_efficiency(m, n, k, gpu, "bf16"))


def gemm_rows() -> list[Row]:
    gpu = _h100()
    rows = []
    for m, k, n, t in gemm_table():
        flops = 2.0 * m * n * k
        rows.append(Row(f"{m} x {k} x {n}", flops / t / 1e12, flops / gemm_call_s(m, k, n, gpu) / 1e12, "TFLOP/s"))
    return rows


def sustained_row() -> Row:
    """The 25-s GEMM: median of its 1-s windows after the first against the model's training rate."""
    gpu = _h100()
    s = micro()["sustained_gemm"]
    measured = statistics.median(w["tflops"] for w in s["windows"][1:])
    model = gemm.gemm_efficiency(s["M"], s["N"], s["K"], gpu, "bf16") * gpu.peak("bf16") / 1e12
    return Row(f"sustained {s['M']} x {s['K']} x {s['N']}", measured, model, "TFLOP/s")


def _attn_flops(p: dict) -> float:
    """The JSON's convention: 4 b h s^2 d, halved for causal."""
    return 4.0 * p["batch"] * p["heads"] * p["seq"] ** 2 * p["head_dim"] / 2


def attention_rows(arch: ArchData | None = None) -> list[Row]:
    gpu = _h100()
    arch = arch or arch_for(gpu)
    rows = []
    for p in micro()["attention"]:
        fwd_s, bwd_s = fitted_times_s(arch, p["batch"], p["seq"], p["seq"], p["heads"], p["head_dim"], p["head_dim"],
                                      gpu.peak("bf16"))
        flops = _attn_flops(p)
        tag = f"b{p['batch']} h{p['heads']} s{p['seq']} d{p['head_dim']}"
        rows.append(Row(f"{tag} fwd", flops / p["fwd_s"] / 1e12, flops / fwd_s / 1e12, "TFLOP/s"))
        rows.append(Row(f"{tag} bwd", 2.5 * flops / (p["fwd_bwd_s"] - p["fwd_s"]) / 1e12, 2.5 * flops / bwd_s / 1e12,
                        "TFLOP/s"))
    return rows


def eager_rows() -> list[Row]:
    gpu = _h100()
    rows = []
    for name, r in micro()["eager_ops"].items():
        per, kernels = EAGER_OPS[MODEL_OP[name]]
        elements = r["bytes"] / COUNTED_BYTES[name]
        rows.append(Row(name, r["time_s"] * 1e6, eager_time_s(elements * per, kernels, gpu) * 1e6, "us"))
    return rows


def adamw_row() -> Row:
    gpu = _h100()
    r = micro()["adamw_fused"]
    return Row(f"fused AdamW, {r['params']:.0e} fp32 params", r["time_s"] * 1e3,
               adam_kernel_s(r["params"] * ADAMW_FUSED_BYTES_PER_PARAM, gpu) * 1e3, "ms")


def te_b300_table() -> list[dict[str, str]]:
    with TE_B300_CSV.open() as f:
        return list(csv.DictReader(f))


def te_gemms(r: dict[str, str]) -> list[tuple[int, int, int]]:
    """(M, N, K) of the GEMMs one figure of the TE table times: one shape, or the four linears of
    its layer in one pass (fprop C[M,out] = X W, dgrad C[M,in], wgrad C[in,out] over M tokens)."""
    m = int(r["M"])
    if r["pass"] == "fprop":
        return [(m, int(r["N"]), int(r["K"]))]
    kind = r["pass"].removesuffix("_sum")
    return [{"fprop": (m, o, i), "dgrad": (m, i, o), "wgrad": (i, o, m)}[kind] for i, o in TE_LAYER]


def te_kernel_s(gemms: list[tuple[int, int, int]], gpu: GpuSpec, dtype: str) -> float:
    """Burst kernel seconds of ``gemms`` in the shape model."""
    peak = gpu.peak(dtype)
    return sum(2.0 * m * n * k / (peak * gemm.burst_efficiency(m, n, k, gpu, dtype)) for m, n, k in gemms)


def _te_kernel_figures() -> list[dict[str, str]]:
    """The kernel-only figures (BF16 needs no quantization: its autocast figures are kernels too)."""
    return [r for r in te_b300_table() if r["precision"] == "bf16" or r["table"] == "prequant"]


def te_b300_rows() -> list[Row]:
    gpu = load_gpu(B300)
    rows = []
    for r in _te_kernel_figures():
        gemms = te_gemms(r)
        flops = sum(2.0 * m * n * k for m, n, k in gemms)
        what = f"{r['precision']} {r['table']} {r['pass']}" + (f" {r['M']}x{r['K']}x{r['N']}" if r["pass"] == "fprop" else "")
        rows.append(Row(what, flops / (float(r["time_ms"]) * 1e-3) / 1e12,
                        flops / te_kernel_s(gemms, gpu, TE_DTYPE[r["precision"]]) / 1e12, "TFLOP/s"))
    return rows


def fit_blackwell() -> dict[str, tuple[float, float]]:
    """Per GEMM dtype, (level, RMS log error): the factor by which the TE table's kernel times sit
    below the shape model, minimising the RMS log error (time is 1 / level: the optimum is the
    geometric mean of model / measured). Not applied (docs/compute.md, "Blackwell at training
    shapes": it conflicts with the published Blackwell runs of large models)."""
    gpu = load_gpu(B300)
    logs: dict[str, list[float]] = {}
    for r in _te_kernel_figures():
        dtype = TE_DTYPE[r["precision"]]
        model_s = te_kernel_s(te_gemms(r), gpu, dtype)
        logs.setdefault(dtype, []).append(math.log(model_s / (float(r["time_ms"]) * 1e-3)))
    out = {}
    for dtype, xs in logs.items():
        mean = statistics.fmean(xs)
        out[dtype] = (math.exp(mean), math.sqrt(statistics.fmean((x - mean) ** 2 for x in xs)))
    return out


TE_RECIPE = {"fp8_current": ("fp8", "tensorwise"), "mxfp8": ("fp8", "mxfp8"), "nvfp4": ("fp4", "nvfp4")}


def layer_cast_bytes(dtype: str, recipe: str, m: int = 15872) -> float:
    """Bytes of the casts the TE table's autocast run pays for one layer of ``m`` tokens: every
    GEMM casts both of its operands, twice what the model charges a GEMM (in training each tensor
    is cast once and shared by two of its linear's three GEMMs)."""
    return sum(2 * precision.quantize_bytes(mm, n, k, dtype, recipe)
               for i, o in TE_LAYER for mm, n, k in ((m, o, i), (m, i, o), (i, o, m)))


def te_cast_bytes(recipe_key: str) -> float:
    """``layer_cast_bytes`` of one precision column of the TE table."""
    return layer_cast_bytes(*TE_RECIPE[recipe_key])


def te_cast_seconds() -> dict[str, float]:
    """Measured cast seconds per layer: autocast less pre-quantized per-layer totals (B300)."""
    sums: dict[tuple[str, str], float] = {}
    for r in te_b300_table():
        if r["precision"] in TE_RECIPE:
            key = (r["precision"], r["table"])
            sums[key] = sums.get(key, 0.0) + float(r["time_ms"]) * 1e-3
    return {p: sums[(p, "autocast")] - sums[(p, "prequant")] for p in TE_RECIPE}


def fit_casts() -> dict[str, float]:
    """Per recipe, the HBM efficiency at which the modelled cast bytes take the measured seconds."""
    gpu = load_gpu(B300)
    return {p: HBM_EFFICIENCY * memory_time_s(te_cast_bytes(p), gpu) / sec for p, sec in te_cast_seconds().items()}


def rms_log_error(rows: list[Row]) -> float:
    return math.sqrt(statistics.fmean(math.log(1 + r.error) ** 2 for r in rows))


# -- the fits (slow: grid searches; benchmarks/micro_fit.py --fit) ---------------------------------

def fit_gemm() -> tuple[float, float, int, float]:
    """(RMS log error, tile efficiency, K prologue, harness seconds per call) minimising the RMS
    log error of the table's call times over a grid."""
    gpu = _h100()
    table = gemm_table()
    peak = gpu.peak("bf16")
    best = (math.inf, 0.0, 0, 0.0)
    saved = gemm.K_PROLOGUE
    try:
        for k0 in range(0, 1025, 32):
            gemm.K_PROLOGUE = k0
            qs = [gemm._quantization(m, n, k, 1, gpu.num_sms, 2, peak, 0.0) for m, k, n, _ in table]
            for c_us in range(0, 41):
                for e_milli in range(700, 951, 5):
                    e = e_milli / 1000
                    err = [math.log((c_us * 1e-6 + 2.0 * m * n * k / (peak * e * q)) / t)
                           for (m, k, n, t), q in zip(table, qs, strict=True)]
                    rms = math.sqrt(statistics.fmean(x * x for x in err))
                    if rms < best[0]:
                        best = (rms, e, k0, c_us * 1e-6)
    finally:
        gemm.K_PROLOGUE = saved
    return best


def fit_attention() -> AttnFit:
    """Per direction, (a, beta, blocks) minimising the RMS log error of the six SDPA times."""
    gpu = _h100()
    peak = gpu.peak("bf16")
    pts = micro()["attention"]
    out = []
    for direction in ("fwd", "bwd"):
        best = (math.inf, (0.0, 0.0, 0.0))
        for a_milli in range(600, 1001, 5):
            for beta_fs in range(0, 1001, 10):
                for blocks_q in range(0, 81):
                    cand = (a_milli / 1000, beta_fs * 1e-15, blocks_q / 4)
                    arch = ArchData("probe", (), 0, 0, 0, attn_fit=AttnFit(cand, cand))
                    err = []
                    for p in pts:
                        f, b = fitted_times_s(arch, p["batch"], p["seq"], p["seq"], p["heads"], p["head_dim"],
                                              p["head_dim"], peak)
                        meas = p["fwd_s"] if direction == "fwd" else p["fwd_bwd_s"] - p["fwd_s"]
                        err.append(math.log((f if direction == "fwd" else b) / meas))
                    rms = math.sqrt(statistics.fmean(x * x for x in err))
                    if rms < best[0]:
                        best = (rms, cand)
        out.append(best[1])
    return AttnFit(out[0], out[1])
