"""The published runs the interval is calibrated on, as scenarios with their measured step times.

Only the shared calibration tables (validation/reference/, copied from the project's shared folder
with their sources) are used; runs found elsewhere go to validation tables in docs/, never here.

* Megatron-LM H100 weak scaling (Megatron-Core r0.8.0): GPT models with the README's stated
  settings: sequence parallelism with TP, distributed optimizer (ZeRO-1), DP/TP/PP communication
  overlap ("DP/TP/PP comm overlap on"), bf16, DGX H100 with NDR InfiniBand. The table
  gives TFLOP/s per GPU in Megatron's own accounting, which clustersim's model_flops_per_step
  reproduces (Korthikanti et al. 2022 eq. 7): measured step = model FLOPs / (TFLOP/s x GPUs).
  The micro-batch is not stated. Layouts without pipeline parallelism run each data-parallel
  rank's 4 sequences as one micro-batch, as the same authors' weak-scaling scripts do for
  TP-only layouts (Megatron-LM examples/academic_paper_scripts/sc21/run_table_1.sh: 1.7B-7.5B
  run their 16 sequences per rank as one micro-batch of 16, 18B as micro-batches of 8), and as
  the 32B row requires: with micro-batch 1 it could not reach its measured 0.89 s at all
  (its reduce-scatter of 4e9 fp32 gradients, forced for bf16 in Megatron's arguments.py, plus the
  bf16 parameter all-gather move 23.5 GB through each GPU's one 50 GB/s NDR rail, >= 0.47 s, of
  which at most the last micro-batch's backward and the first one's forward, a quarter of >= 0.6 s
  of compute at the sustained GEMM ceiling, can hide: >= 0.92 s). clustersim's memory model puts
  all four at 52-67 GiB of 80 (tested). Pipelined layouts run micro-batch 1 with the interleaved
  schedule at one layer per virtual stage (``--num-layers-per-virtual-pipeline-stage 1``); the
  README names no schedule, and the evidence (docs/uncertainty.md, "Which schedule"):
  (1) the same README's strong scaling of the 177B model loses only 10.6% of its MFU from 96 to
  4,608 GPUs (47% -> 42%) at batch 1,152, where any layout without interleaving has a 1F1B bubble
  of at least 20% (PP 2 and 4 micro-batches; PP 6 and 12 micro-batches: 29%);
  (2) the table's layer counts leave 23 layers per stage at 119B (PP 4) and 7 at 462B (PP 16),
  primes: Megatron asserts that the layers per stage divide by the layers per virtual stage
  (megatron/training/arguments.py, ``num_layers_per_pipeline_stage %
  args.num_layers_per_virtual_pipeline_stage == 0``, commit 937571cf of 2024-07), so interleaving
  at all means one layer per virtual stage on those rows.
* SC21 Table 2 (GPT-3 175B, A100, batch 1536, seq 2048), run as the paper ran it
  (``framework: megatron-legacy``: its ZeRO-3 rows are DeepSpeed ZeRO-3 of 2021, its PTD-P rows
  TP 8 x PP 12 with the 1F1B schedule), full activation recompute. TFLOP/s are in SC21's
  accounting (eq. 3, recompute counted): measured step = 96 B s l h^2 (1 + s/6h + V/16lh) /
  (TFLOP/s x GPUs).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustersim.compute.flops import model_flops_per_step
from clustersim.scenario import scenario_from_dict
from clustersim.workload.presets import MODEL_PRESETS

REFERENCE_DIR = Path(__file__).resolve().parents[2] / "validation" / "reference"
H100_TABLE = "megatron_h100_weak_scaling_2024.csv"
SC21_TABLE = "megatron_sc21_zero3_vs_3d_175b.csv"


@dataclass(frozen=True, slots=True)
class ReferenceRun:
    table: str
    name: str
    scenario: dict[str, Any]
    measured_step_time_s: float


def h100_weak_scaling(path: Path) -> Iterator[ReferenceRun]:
    with path.open() as f:
        for row in csv.DictReader(f):
            tp, pp, dp = int(row["tp"]), int(row["pp"]), int(row["dp"])
            gpus = tp * pp * dp
            micro_batch = int(row["global_batch"]) // dp if pp == 1 else 1   # module docstring
            layers = MODEL_PRESETS[f"megatron-core-{row['model'].lower()}"]["layers"]
            schedule = {"schedule": "interleaved-1f1b", "virtual_stages": layers // pp} if pp > 1 else {"schedule": "1f1b"}
            sc = {
                "name": f"megatron-core-{row['model'].lower()} on {gpus} H100",
                "model": {"preset": f"megatron-core-{row['model'].lower()}"},
                "cluster": {"preset": "dgx-h100", "nodes": gpus // 8},
                "parallel": {"tp": tp, "pp": pp, "dp": dp, "sequence_parallel": tp > 1, "zero_stage": 1,
                             "micro_batch": micro_batch, "global_batch": int(row["global_batch"]), **schedule,
                             "recompute": "none", "tp_comm_overlap": True},
                "training": {"dtype": "bf16"},
            }
            flops = model_flops_per_step(scenario_from_dict(sc).model, int(row["global_batch"]))
            measured = flops / (float(row["measured_tflops_per_gpu"]) * 1e12 * gpus)
            yield ReferenceRun("megatron-h100-2024", f"{row['model']} {gpus} H100 tp{tp} pp{pp} dp{dp}", sc, measured)


def sc21_zero3_vs_3d(path: Path) -> Iterator[ReferenceRun]:
    s, layers, h, vocab = 2048, 96, 12288, 51200   # GPT-3 175B (SC21 Table 1)
    with path.open() as f:
        for row in csv.DictReader(f):
            gpus, mb, batch = int(row["gpus"]), int(row["micro_batch"]), int(row["global_batch"])
            zero3 = row["scheme"].startswith("ZeRO-3")
            if zero3:
                par = {"tp": 1, "pp": 1, "dp": gpus, "zero_stage": 3}
                label = f"175B ZeRO-3 {gpus} A100 mb{mb}"
            else:  # model-parallel size 96 = TP 8 x PP 12 (SC21 section 5.3)
                par = {"tp": 8, "pp": 12, "dp": gpus // 96, "zero_stage": 0, "schedule": "1f1b"}
                label = f"175B PTD-P {gpus} A100 tp8 pp12"
            sc = {"name": label, "framework": "megatron-legacy", "model": {"preset": "gpt3-175b"},
                  "cluster": {"preset": "dgx-a100", "nodes": gpus // 8},
                  "parallel": {**par, "micro_batch": mb, "global_batch": batch, "recompute": "full"},
                  "training": {"dtype": "bf16"}}
            flops = 96 * batch * s * layers * h * h * (1 + s / (6 * h) + vocab / (16 * layers * h))
            yield ReferenceRun("sc21-table2", label, sc, flops / (float(row["measured_tflops_per_gpu"]) * 1e12 * gpus))


def reference_runs(directory: Path = REFERENCE_DIR) -> list[ReferenceRun]:
    return [*h100_weak_scaling(directory / H100_TABLE), *sc21_zero3_vs_3d(directory / SC21_TABLE)]
