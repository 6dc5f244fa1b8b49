"""Published nccl-tests bus bandwidths at 32-1,984 GPUs beside clustersim's collective model.

Validation only (validation/collectives_at_scale.py names each row's source and what it leaves
unstated); + = the model predicts more bandwidth than was measured.

    python benchmarks/collectives_at_scale.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's clustersim and validation/

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from validation.collectives_at_scale import ROWS  # noqa: E402


def main() -> None:
    table = Table(title="bus bandwidth at scale: predicted vs published (GB/s)")
    for col in ("source", "op", "cluster", "GPUs", "size", "published", "predicted", "algo", "error"):
        table.add_column(col, justify="left" if col in ("source", "op", "cluster", "algo") else "right")
    errs = []
    for r in ROWS:
        bw, algo = r.predicted()
        err = bw / r.published_busbw_GBps - 1
        errs.append(err)
        gpus = r.nodes * 8
        table.add_row(r.source, r.op, r.preset, f"{gpus:,}", f"{r.size_bytes / 2**20:,.0f} MiB",
                      f"{r.published_busbw_GBps:.0f}", f"{bw:.1f}", algo, f"{err:+.1%}")
    Console(width=160).print(table)
    print(f"{len(errs)} rows  mean signed {statistics.fmean(errs):+.1%}  mean |error| "
          f"{statistics.fmean(map(abs, errs)):.1%}  max |error| {max(map(abs, errs)):.1%}")


if __name__ == "__main__":
    main()
