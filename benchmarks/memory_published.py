"""Predicted vs published per-GPU memory (validation/published/memory_runs.yaml, docs/memory.md).

Each published run becomes its scenario; the engine's memory of the rank the source measured is
compared with the published figure (torchtitan: max_memory_reserved; Megatron-LM:
mem-max-allocated-bytes), and runs that report only an outcome (ran / out of memory) with the
verdict. Prints one row per run, the error statistics and the residual percentiles that
clustersim/memory/evidence.py uses for the interval. Nothing is fitted.

    python benchmarks/memory_published.py [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # this checkout's clustersim and validation/

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from clustersim import units  # noqa: E402
from validation.memory_table import ALLOCATOR_METRICS, allocator_reserved, residual_quantiles, rows  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = ap.parse_args()
    table = rows()
    q10, q90 = residual_quantiles(table)
    # predicted / published - 1, of the allocator-measured runs and of the nvidia-smi readings
    errors = [1 / r.residual - 1 for r in table if r.residual is not None and r.metric in ALLOCATOR_METRICS]
    device = [r for r in table if r.metric == "device"]
    device_errors = [1 / r.residual - 1 for r in device]
    out = [{"id": r.run["id"], "framework": r.run["framework"], "metric": r.metric, "outcome": r.run["outcome"],
            "published_gib": r.published_gib, "predicted_gib": r.predicted_gib,
            "error": None if r.residual is None else 1 / r.residual - 1,
            "verdict": r.report.verdict, "outcome_ok": r.outcome_ok, "explained": r.explained,
            "allocated_gib": r.report.allocated_peak_bytes / units.GiB,
            "device_gib": r.report.reserved_peak_bytes / units.GiB,
            "allocator_reserved_gib": allocator_reserved(r.report) / units.GiB,
            "interval_gib": [x / units.GiB for x in r.report.interval],
            "capacity_gib": r.report.capacity_bytes_per_gpu / units.GiB} for r in table]
    summary = {"runs": len(table), "measured": len(errors),
               "mean_abs_error": statistics.fmean(abs(e) for e in errors),
               "max_abs_error": max(abs(e) for e in errors),
               "outcomes_ok": sum(r.outcome_ok for r in table), "residual_q10": q10, "residual_q90": q90,
               "device_runs": len(device),
               "device_mean_abs_error": statistics.fmean(abs(e) for e in device_errors) if device else None,
               "device_max_abs_error": max((abs(e) for e in device_errors), default=None),
               "device_in_interval": sum(r.report.interval[0] <= r.published_gib * units.GiB <= r.report.interval[1]
                                         for r in device)}
    if args.json:
        print(json.dumps({"rows": out, "summary": summary}, indent=2))
        return
    t = Table(title="per-GPU memory: predicted vs published")
    # the interval is the verdict's, of the whole device (reserved + CUDA context + NCCL), against the
    # capacity; the predicted column is the published metric's counterpart (allocated or reserved)
    for col in ("run", "metric", "published GiB", "predicted GiB", "error", "outcome", "verdict",
                "device interval GiB", "capacity"):
        t.add_column(col, justify="left" if col in ("run", "metric", "outcome", "verdict") else "right")
    for row in out:
        pub = "-" if row["published_gib"] is None else f"{row['published_gib']:.1f}"
        pred = {"allocated": row["allocated_gib"], "device": row["predicted_gib"]}.get(row["metric"],
                                                                                 row["allocator_reserved_gib"])
        err = "-" if row["error"] is None else f"{row['error']:+.1%}"
        lo, hi = row["interval_gib"]
        t.add_row(row["id"], row["metric"], pub, f"{pred:.1f}", err, row["outcome"],
                  row["verdict"] + ("" if row["outcome_ok"] else " (WRONG)" if row["explained"]
                                    else " (WRONG, unexplained)"), f"{lo:.1f}-{hi:.1f}",
                  f"{row['capacity_gib']:.1f}")
    console = Console(width=140)
    console.print(t)
    console.print(f"{summary['measured']} measured peaks: mean |error| {summary['mean_abs_error']:.1%}, "
                  f"max {summary['max_abs_error']:.1%}; outcomes right {summary['outcomes_ok']}/{summary['runs']}; "
                  f"residual (published / predicted) 10th-90th percentile {q10:.3f}-{q90:.3f}")
    if device:
        console.print(f"{summary['device_runs']} nvidia-smi readings (not in the residuals): mean |error| "
                      f"{summary['device_mean_abs_error']:.1%}, max {summary['device_max_abs_error']:.1%}; "
                      f"{summary['device_in_interval']} inside the device interval")


if __name__ == "__main__":
    main()
