"""Measured vs predicted per-GPU memory of the harness's training steps on GPUs.

`clustersim validate --backend nccl` records, beside each step's time, ``torch.cuda.
max_memory_allocated`` and ``max_memory_reserved`` (the MAX over the ranks; validation/timing.py
``memory_peaks``). This compares them with clustersim's prediction of the same step
(clustersim.calibrate.predict.step_scenario, on the run's calibrated profile): the allocated peak
with ``allocated_peak_bytes``, the reserved peak with ``reserved_peak_bytes`` minus the CUDA
context and NCCL's buffers (they live outside PyTorch's allocator; validation/memory_table.py
``allocator_reserved``). Nothing is fitted.

    python -m validation.gpu_memory DIR [--json]     # DIR: the --out of `validate --backend nccl`
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from clustersim import units


def compare(out_dir: Path, preset: str = "calibrated-gpus") -> list[dict[str, Any]]:
    from clustersim.api import simulate
    from clustersim.calibrate.predict import step_scenario
    from clustersim.calibrate.profile import profile_in_env
    from clustersim.calibrate.store import RECORDS_FILE, read_records
    from clustersim.scenario import scenario_from_dict
    from validation.memory_table import allocator_reserved
    records = [r for r in read_records(out_dir / RECORDS_FILE) if r["kind"].endswith("_step")]
    rows = []
    with profile_in_env(out_dir / f"{preset}.yaml"):
        for r in records:
            alloc, reserved = r.get("max_memory_allocated_bytes"), r.get("max_memory_reserved_bytes")
            if alloc is None:
                continue   # a CPU run: no CUDA allocator
            report = simulate(scenario_from_dict(step_scenario(r["kind"], r["params"], preset, "gpus"))).memory
            pred_alloc, pred_res = report.allocated_peak_bytes, allocator_reserved(report)
            rows.append({"case": r["name"], "measured_allocated_GiB": alloc / units.GiB,
                         "predicted_allocated_GiB": pred_alloc / units.GiB,
                         "allocated_error_pct": (pred_alloc / alloc - 1) * 100,
                         "measured_reserved_GiB": reserved / units.GiB, "predicted_reserved_GiB": pred_res / units.GiB,
                         "reserved_error_pct": (pred_res / reserved - 1) * 100})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description="measured vs predicted step memory of a validate --backend nccl run")
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = compare(args.out_dir)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("| case | allocated measured | predicted | error | reserved measured | predicted | error |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for x in rows:
        print(f"| {x['case']} | {x['measured_allocated_GiB']:.3f} GiB | {x['predicted_allocated_GiB']:.3f} GiB | "
              f"{x['allocated_error_pct']:+.1f}% | {x['measured_reserved_GiB']:.3f} GiB | "
              f"{x['predicted_reserved_GiB']:.3f} GiB | {x['reserved_error_pct']:+.1f}% |")
    if not rows:
        print("no step with CUDA memory peaks in", args.out_dir)


if __name__ == "__main__":
    main()
