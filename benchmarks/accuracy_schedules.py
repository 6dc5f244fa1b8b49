"""Predicted vs published step times of the Zero Bubble paper's pipeline-schedule comparisons on 8-32 A100
(validation/reference/schedules_published.yaml): 1F1B, interleaved 1F1B, ZB-1p (as zb-h1) and ZB-V.

Validation only: nothing is fitted to these runs and they do not feed the prediction interval.
Same table as benchmarks/accuracy_moe.py, then, per setup (model, GPUs, micro-batch, micro-batches),
the schedules ordered fastest first as measured and as predicted.

    python benchmarks/accuracy_schedules.py [--only ID ...] [--json]
"""

from __future__ import annotations

import sys
from itertools import combinations, pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's clustersim and validation/

from accuracy_moe import main  # noqa: E402

from validation.published_steps import ROOT, Prediction  # noqa: E402

SCHEDULES_FILE = ROOT / "validation" / "reference" / "schedules_published.yaml"


def schedule_order(rows: list[Prediction]) -> None:
    """Row ids end in the schedule (``...-m24-1f1b``); the rest of the id names the setup."""
    setups: dict[str, list[Prediction]] = {}
    for row in rows:
        setups.setdefault(row.id.rsplit("-", 1)[0], []).append(row)
    same = compared = pairs = agree = 0
    for setup, group in setups.items():
        if len(group) < 2:
            continue
        compared += 1
        untied = [(a, b) for a, b in combinations(group, 2) if a.measured_s != b.measured_s]
        wrong = sum((a.measured_s < b.measured_s) != (a.predicted_s < b.predicted_s) for a, b in untied)
        pairs, agree, same = pairs + len(untied), agree + len(untied) - wrong, same + (wrong == 0)
        print(f"order {setup}: measured {_order(group, 'measured_s')}; predicted {_order(group, 'predicted_s')}"
              f"{'  DIFFERENT' if wrong else ''}")
    print(f"schedule order (fastest first) as measured in {same} of {compared} setups; "
          f"{agree} of {pairs} schedule pairs in the measured order (a tie in the published figure orders nothing)")


def _order(group: list[Prediction], key: str) -> str:
    """Fastest first; ``=`` between equal times (two schedules published with the same figure)."""
    ranked = sorted(group, key=lambda r: getattr(r, key))
    out = ranked[0].id.rsplit("-", 1)[1]
    for before, row in pairwise(ranked):
        out += (" = " if getattr(row, key) == getattr(before, key) else " < ") + row.id.rsplit("-", 1)[1]
    return out


if __name__ == "__main__":
    predictions = main(SCHEDULES_FILE, __doc__, "Pipeline schedule")
    if "--json" not in sys.argv:
        schedule_order(predictions)
