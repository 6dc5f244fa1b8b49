"""Predicted vs published MoE training step times (validation/reference/megatron_moe_published.yaml).

Validation only: nothing is fitted to these runs and they do not feed the prediction interval.
Each row's measured step time is derived from the published figure as the data file states
(tokens/s/GPU, or Megatron-LM's own TFLOP/s with Megatron's FLOPs formula); the prediction is the
event engine's, with its 80% interval.

    python benchmarks/accuracy_moe.py [--only ID ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's clustersim and validation/

from validation.published_steps import MOE_FILE, Prediction, PublishedRun, not_simulated  # noqa: E402
from validation.published_steps import runs as load_runs  # noqa: E402
from validation.summary import summary  # noqa: E402


def _layout(run: PublishedRun) -> str:
    p = run.scenario["parallel"]
    parts = [f"{run.gpus} {run.gpu_label}", f"TP{p.get('tp', 1)}", f"PP{p.get('pp', 1)}"]
    if p.get("virtual_stages", 1) > 1:
        parts.append(f"VP{p['virtual_stages']}")
    if p.get("cp", 1) > 1:
        parts.append(f"CP{p['cp']}")
    if p.get("ep", 1) > 1:
        parts.append(f"EP{p['ep']}")
    parts += [f"DP{p.get('dp', 1)}", f"GBS{p['global_batch']}", run.scenario["training"]["dtype"]]
    return " ".join(parts)


def main(path: Path = MOE_FILE, doc: str | None = None, what: str = "MoE") -> list[Prediction]:
    ap = argparse.ArgumentParser(description=(doc or __doc__).splitlines()[0])
    ap.add_argument("--only", nargs="*", help="run ids to predict (default: all)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args()
    runs = [r for r in load_runs(path) if not args.only or r.id in args.only]
    rows = [r.predict() for r in runs]
    if args.json:
        json.dump([row.as_dict() for row in rows], sys.stdout, indent=1)
        print()
        return rows
    table = Table(title=f"{what} runs: predicted vs published step time (event engine), 80% interval")
    for col in ("run", "source", "layout", "measured s", "predicted s", "error", "80% interval s", "inside"):
        table.add_column(col, justify="left" if col in ("run", "source", "layout") else "right",
                         overflow="fold", max_width=48 if col == "source" else None)
    for run, row in zip(runs, rows, strict=True):
        table.add_row(run.id, run.source_short, _layout(run), f"{row.measured_s:.3f}", f"{row.predicted_s:.3f}",
                      f"{row.error:+.1%}", f"{row.interval_s[0]:.2f}-{row.interval_s[1]:.2f}",
                      "yes" if row.inside else "NO")
    Console(width=200).print(table)
    errs = [row.error for row in rows]
    if errs:
        widths = [(row.interval_s[1] - row.interval_s[0]) / row.predicted_s for row in rows]
        print(f"{summary(errs, [r.inside for r in rows], widths)}  beyond 20%: {sum(abs(e) > 0.2 for e in errs)}")
    for item in not_simulated(path):
        print(f"not simulated: {item['id']}: {item['reason']}")
    return rows


if __name__ == "__main__":
    main()
