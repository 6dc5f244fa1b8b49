"""Predicted vs measured on published H100 3D runs outside the calibration set: validation only.

The rows (validation/published/h100_3d_published.csv, the source and every assumption per row):
Megatron-LM's README strong scaling of the 177B GPT (96 and 4,608 GPUs), Llama 3 Table 4
(405B on 8,192 and 16,384 GPUs) and Megatron-Bridge's published H100 FP8 pre-training rows. None
of them is in clustersim/data/residuals.json; nothing is fitted to them.

Where a publication leaves the pipeline schedule or the recompute policy open, the table carries
one ``primary`` row (the assumption the calibration set makes, or what the publication says)
and sensitivity rows with the alternatives; the summary counts primary rows only. The measured
step time is derived from what each source publishes:

* ``mfu``: model FLOPs / (MFU x 989 TFLOP/s x GPUs) (H100 SXM dense BF16 peak, NVIDIA H100
  datasheet; the Megatron README's MFU and TFLOP/s columns agree with this peak);
* ``tflops``: model FLOPs / (TFLOP/s x GPUs), model FLOPs as clustersim counts them
  (clustersim.compute.flops.model_flops_per_step);
* ``tokens_per_s_per_gpu``: global batch x sequence / (tokens/s/GPU x GPUs): no FLOP accounting.

    PYTHONPATH=. python benchmarks/accuracy_h100_published.py
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's clustersim, not an installed one

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from clustersim.api import simulate  # noqa: E402
from clustersim.compute.flops import model_flops_per_step  # noqa: E402
from clustersim.scenario import scenario_from_dict  # noqa: E402
from clustersim.uncertainty import step_interval  # noqa: E402
from validation.summary import summary  # noqa: E402

TABLE = Path(__file__).resolve().parents[1] / "validation" / "published" / "h100_3d_published.csv"
H100_PEAK_BF16_FLOPS = 989e12   # H100 SXM dense BF16 Tensor Core peak (NVIDIA H100 datasheet, 1,979 TF with sparsity)


def scenario_dict(row: dict[str, str]) -> dict:
    tp, pp, cp, gpus = int(row["tp"]), int(row["pp"]), int(row["cp"]), int(row["gpus"])
    par = {"tp": tp, "pp": pp, "cp": cp, "dp": gpus // (tp * pp * cp), "sequence_parallel": tp > 1,
           "zero_stage": 1, "micro_batch": int(row["micro_batch"]), "global_batch": int(row["global_batch"]),
           "schedule": row["schedule"], "virtual_stages": int(row["virtual_stages"]),
           "recompute": row["recompute"], "tp_comm_overlap": row["tp_comm_overlap"] == "true"}
    training = {"dtype": row["dtype"]}
    if row["fp8_recipe"]:
        training["fp8_recipe"] = row["fp8_recipe"]
    return {"name": row["run"], "model": {"preset": row["model_preset"], "seq_len": int(row["seq_len"])},
            "cluster": {"preset": "dgx-h100", "nodes": gpus // 8}, "parallel": par, "training": training}


def measured_step_time_s(row: dict[str, str], scenario) -> float:
    gpus, value, kind = int(row["gpus"]), float(row["measured_value"]), row["measured_kind"]
    if kind == "tokens_per_s_per_gpu":
        return int(row["global_batch"]) * int(row["seq_len"]) / (value * gpus)
    flops = model_flops_per_step(scenario.model, int(row["global_batch"]))
    per_gpu = value * H100_PEAK_BF16_FLOPS if kind == "mfu" else value * 1e12
    return flops / (per_gpu * gpus)


def main() -> None:
    with TABLE.open() as f:
        rows = list(csv.DictReader(f))
    table = Table(title="published H100 3D runs (validation, never fitted): predicted vs measured step time, event engine")
    for col in ("table", "run", "variant", "measured s", "predicted s", "error", "pred MFU", "80% interval s", "inside"):
        table.add_column(col, justify="left" if col in ("table", "run", "variant") else "right")
    primary: list[tuple[float, bool, float]] = []
    for row in rows:
        sc = scenario_from_dict(scenario_dict(row))
        measured = measured_step_time_s(row, sc)
        rep = simulate(sc)
        err = rep.step_time_s / measured - 1
        lo, hi = step_interval(sc).of(rep.step_time_s)
        ok = lo <= measured <= hi
        if row["variant"] == "primary":
            primary.append((err, ok, (hi - lo) / rep.step_time_s))
        table.add_row(row["table"], row["run"], row["variant"], f"{measured:.2f}", f"{rep.step_time_s:.2f}",
                      f"{err:+.1%}", f"{rep.mfu:.1%}", f"{lo:.2f}-{hi:.2f}", "yes" if ok else "NO")
    Console(width=170).print(table)
    errs = [e for e, _, _ in primary]
    print(f"primary {summary(errs, [ok for _, ok, _ in primary], [w for _, _, w in primary], 'rows')}")


if __name__ == "__main__":
    main()
