"""Predicted vs measured on the Megatron-LM H100 weak-scaling table (../shared/calibration).

Each row becomes a scenario (Megatron-Core GPT preset, its TP/PP/DP and global batch, micro-batch
1, sequence parallelism with TP > 1, distributed optimizer, overlapped DP and TP communication as
the table's source states ("DP/TP/PP comm overlap on"), bf16 on DGX H100 with NDR InfiniBand). The table gives TFLOP/s per GPU by Megatron's own FLOP count, so
the step-time error is the TFLOP/s error: t_pred / t_meas - 1 = tflops_meas / tflops_pred - 1.
Nothing here is fitted: the printed error is the model's error.

    python benchmarks/accuracy_megatron_h100.py [--csv PATH] [--engine event|analytical]
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

from rich.console import Console
from rich.table import Table

from clustersim.api import estimate, simulate
from clustersim.scenario import scenario_from_dict

DEFAULT_CSV = Path(__file__).resolve().parents[2] / "shared" / "calibration" / "megatron_h100_weak_scaling_2024.csv"


def scenario_for(row: dict[str, str]) -> dict:
    tp, pp, dp = int(row["tp"]), int(row["pp"]), int(row["dp"])
    gpus = tp * pp * dp
    return {
        "name": f"megatron-core-{row['model'].lower()} on {gpus} H100",
        "model": {"preset": f"megatron-core-{row['model'].lower()}"},
        "cluster": {"preset": "dgx-h100", "nodes": gpus // 8},
        "parallel": {"tp": tp, "pp": pp, "dp": dp, "sequence_parallel": tp > 1, "zero_stage": 1,
                     "micro_batch": 1, "global_batch": int(row["global_batch"]), "schedule": "1f1b",
                     "recompute": "none", "tp_comm_overlap": True},
        "training": {"dtype": "bf16"},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    ap.add_argument("--engine", choices=["event", "analytical"], default="event")
    args = ap.parse_args()
    run = simulate if args.engine == "event" else estimate
    table = Table(title=f"Megatron-LM H100 weak scaling: predicted vs measured ({args.engine} engine)")
    for col in ("model", "gpus", "tp/pp/dp", "meas TFLOP/s", "pred TFLOP/s", "pred MFU", "step err %",
                "compute", "tp", "pp+bubble", "dp"):
        table.add_column(col, justify="right")
    errors = []
    with args.csv.open() as f:
        for row in csv.DictReader(f):
            report = run(scenario_from_dict(scenario_for(row)))
            measured = float(row["measured_tflops_per_gpu"])
            err = measured / report.tflops_per_gpu - 1
            errors.append(err)
            b = report.breakdown
            t = report.step_time_s
            table.add_row(row["model"], str(report.num_gpus), f"{row['tp']}/{row['pp']}/{row['dp']}",
                          f"{measured:.1f}", f"{report.tflops_per_gpu:.1f}", f"{report.mfu * 100:.1f}%",
                          f"{err * 100:+.1f}", f"{b['compute'] / t:.0%}", f"{b['tp_comm'] / t:.0%}",
                          f"{(b['pp_comm'] + b['bubble']) / t:.0%}", f"{b['dp_comm'] / t:.0%}")
    Console(width=140).print(table)
    abs_err = [abs(e) for e in errors]
    print(f"mean |error| {statistics.mean(abs_err) * 100:.1f}%   max |error| {max(abs_err) * 100:.1f}%   "
          f"mean signed {statistics.mean(errors) * 100:+.1f}%   ({len(errors)} runs)")


if __name__ == "__main__":
    main()
