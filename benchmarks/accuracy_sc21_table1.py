"""Predicted vs measured on SC21 Table 1 (Megatron-LM weak scaling, 1.7B-1T on 32-3,072 A100): validation only.

The rows (validation/published/megatron_sc21_table1.csv) are the paper's measured TFLOP/s per GPU
with the layout, micro-batch and interleaving of the authors' own scripts
(Megatron-LM examples/academic_paper_scripts/sc21/run_table_1.sh): megatron-legacy, full
activation recompute ("--activations-checkpoint-method uniform"), seq 2048, vocab 51200, DGX A100.
The TFLOP/s count the recomputed forward (SC21 eq. 3): measured step =
96 B s l h^2 (1 + s/6h + V/16lh) / (TFLOP/s x GPUs). Nothing is fitted to these runs; they are not in
clustersim/data/residuals.json.

    PYTHONPATH=. python benchmarks/accuracy_sc21_table1.py
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's clustersim, not an installed one

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from clustersim.api import simulate  # noqa: E402
from clustersim.scenario import scenario_from_dict  # noqa: E402
from clustersim.uncertainty import step_interval  # noqa: E402
from validation.summary import summary  # noqa: E402

TABLE = Path(__file__).resolve().parents[1] / "validation" / "published" / "megatron_sc21_table1.csv"
SEQ, VOCAB = 2048, 51200   # SC21 Table 1 caption: all models use seq 2048 and vocabulary 51,200


def rows() -> list[tuple[str, dict, float]]:
    out = []
    with TABLE.open() as f:
        for row in csv.DictReader(f):
            layers, h, tp, pp = int(row["layers"]), int(row["hidden"]), int(row["tp"]), int(row["pp"])
            gpus, batch, vpl = int(row["gpus"]), int(row["global_batch"]), int(row["layers_per_virtual_stage"])
            par = {"tp": tp, "pp": pp, "dp": gpus // (tp * pp), "micro_batch": int(row["micro_batch"]),
                   "global_batch": batch, "recompute": "full", "zero_stage": 0, "schedule": "1f1b"}
            if vpl:
                par.update(schedule="interleaved-1f1b", virtual_stages=layers // pp // vpl)
            sc = {"name": f"SC21 {row['model']}", "framework": "megatron-legacy",
                  "model": {"layers": layers, "hidden": h, "heads": int(row["heads"]), "vocab": VOCAB, "seq_len": SEQ},
                  "cluster": {"preset": "dgx-a100", "nodes": gpus // 8}, "parallel": par, "training": {"dtype": "bf16"}}
            flops = 96 * batch * SEQ * layers * h * h * (1 + SEQ / (6 * h) + VOCAB / (16 * layers * h))
            out.append((row["model"], sc, flops / (float(row["measured_tflops_per_gpu"]) * 1e12 * gpus)))
    return out


def main() -> None:
    table = Table(title="SC21 Table 1 (A100): predicted vs measured step time, event engine")
    for col in ("model", "layout", "measured s", "predicted s", "error", "80% interval s", "inside"):
        table.add_column(col, justify="left" if col in ("model", "layout") else "right")
    errs, inside, widths = [], [], []
    for name, sc, measured in rows():
        scenario = scenario_from_dict(sc)
        pred = simulate(scenario).step_time_s
        lo, hi = step_interval(scenario).of(pred)
        errs.append(pred / measured - 1)
        inside.append(lo <= measured <= hi)
        widths.append((hi - lo) / pred)
        p = sc["parallel"]
        layout = f"tp{p['tp']} pp{p['pp']} dp{p['dp']} mb{p['micro_batch']}" + (
            f" v{p['virtual_stages']}" if "virtual_stages" in p else "")
        table.add_row(name, layout, f"{measured:.2f}", f"{pred:.2f}", f"{errs[-1]:+.1%}", f"{lo:.2f}-{hi:.2f}",
                      "yes" if inside[-1] else "NO")
    Console(width=120).print(table)
    print(summary(errs, inside, widths))


if __name__ == "__main__":
    main()
