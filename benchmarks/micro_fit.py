"""The kernel models against the microbenchmarks they are fitted to (validation/micro/).

Prints every figure beside the model: the burst GEMM table (with the harness's time per
synchronised call), the sustained GEMM, causal SDPA forward and backward, the eager
memory-bound ops and the fused AdamW; + = the model is slower than measured.

    python benchmarks/micro_fit.py            # the tables
    python benchmarks/micro_fit.py --fit      # re-run the GEMM and attention fits (minutes)
    python benchmarks/micro_fit.py --host     # measure the CPU cost of issuing one op (needs torch)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's clustersim and validation/

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from validation import micro_fit as mf  # noqa: E402


def _table(title: str, rows: list[mf.Row], console: Console) -> None:
    table = Table(title=title)
    for col in ("figure", "measured", "model", "error"):
        table.add_column(col, justify="left" if col == "figure" else "right")
    for r in rows:
        table.add_row(r.what, f"{r.measured:,.1f} {r.unit}", f"{r.model:,.1f} {r.unit}", f"{r.error:+.1%}")
    console.print(table)
    errs = [r.error for r in rows]
    print(f"{len(rows)} figures  mean signed {statistics.fmean(errs):+.1%}  mean |error| "
          f"{statistics.fmean(map(abs, errs)):.1%}  max |error| {max(map(abs, errs)):.1%}  "
          f"RMS log error {mf.rms_log_error(rows):.1%}\n")


def _host() -> None:
    import torch

    torch.set_num_threads(1)

    def bench(f, n: int = 2000, reps: int = 7) -> float:
        out = []
        for _ in range(reps):
            f()
            t = time.perf_counter()
            for _ in range(n):
                f()
            out.append((time.perf_counter() - t) / n)
        return statistics.median(out)

    x, y = torch.randn(8), torch.randn(8)
    w, a = torch.randn(8, 8, requires_grad=True), torch.randn(4, 8, requires_grad=True)
    print(f"torch {torch.__version__}: add without autograd {bench(lambda: torch.add(x, y)) * 1e6:.1f} us, "
          f"F.linear recording autograd {bench(lambda: torch.nn.functional.linear(a, w)) * 1e6:.1f} us per call")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="re-run the fits (grid searches, minutes)")
    ap.add_argument("--host", action="store_true", help="measure the host's cost of issuing an op (torch)")
    args = ap.parse_args()
    if args.host:
        _host()
        return
    if args.fit:
        rms, eff, k0, overhead = mf.fit_gemm()
        print(f"GEMM: tile_eff {eff:.3f}, K_PROLOGUE {k0}, bench_overhead_s {overhead * 1e6:.0f} us (RMS {rms:.2%})")
        fit = mf.fit_attention()
        print(f"attention: fwd (a, beta_s, blocks) = {fit.fwd}, bwd = {fit.bwd}")
        for dtype, (level, rms) in mf.fit_blackwell().items():
            print(f"B300 GEMMs at training shapes, level under the model {dtype}: {level:.3f} (RMS {rms:.1%}, "
                  "te_gemm_b300_2026.csv; not applied, docs/compute.md)")
        for recipe, eff in mf.fit_casts().items():
            print(f"cast kernels {recipe}: {eff:.3f} of HBM bandwidth (te_gemm_b300_2026.csv)")
        return
    console = Console(width=120)
    _table("bf16 GEMM, burst, one synchronised call (h100_gemm_bf16_2026-11-26.csv)", mf.gemm_rows(), console)
    _table("sustained GEMM, 25 s back to back (h100_micro_2026-11-26.json)", [mf.sustained_row()], console)
    _table("causal SDPA, burst (h100_micro_2026-11-26.json)", mf.attention_rows(), console)
    _table("eager memory-bound ops (h100_micro_2026-11-26.json)", mf.eager_rows(), console)
    _table("fused AdamW (h100_micro_2026-11-26.json)", [mf.adamw_row()], console)
    _table("B300 GEMMs at training shapes, burst (te_gemm_b300_2026.csv)", mf.te_b300_rows(), console)


if __name__ == "__main__":
    main()
