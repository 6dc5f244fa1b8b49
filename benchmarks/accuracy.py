"""Predicted vs measured on the published runs the interval is calibrated on (validation/reference/).

Reproduces both shared tables row by row (Megatron-LM's H100 weak scaling, SC21 Table 2's
ZeRO-3 vs 3D comparison on A100) with the event engine, prints the errors per regime and, for
SC21, which of each ZeRO-3 / 3D pair is faster. ``--write`` stores the residuals in
clustersim/data/residuals.json (clustersim.uncertainty reads them); tests/uncertainty checks that
the stored file matches what the current model predicts.

    python benchmarks/accuracy.py [--write] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's clustersim and validation/

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from clustersim.calibrate.residuals import RESIDUALS_FILE, compute_residuals, residuals_document  # noqa: E402
from clustersim.scenario import scenario_from_dict  # noqa: E402
from clustersim.uncertainty import step_interval  # noqa: E402
from clustersim.uncertainty.interval import _stored  # noqa: E402
from validation.summary import summary  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write {RESIDUALS_FILE}")
    ap.add_argument("--json", action="store_true", help="print the residuals document")
    args = ap.parse_args()
    runs = compute_residuals()
    doc = residuals_document(runs)
    if args.write:  # first, so that the intervals below come from these residuals
        RESIDUALS_FILE.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        _stored.cache_clear()
        print(f"wrote {RESIDUALS_FILE}")
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        print()
    table = Table(title="predicted vs measured step time (event engine), with the 80% interval")
    for col in ("table", "run", "regime", "measured s", "predicted s", "error", "80% interval s", "inside"):
        table.add_column(col, justify="left" if col in ("table", "run", "regime") else "right")
    inside = 0
    cover: dict[str, list[tuple[bool, float]]] = {}
    for r in runs:
        iv = step_interval(scenario_from_dict(r.scenario))
        lo, hi = iv.of(r.predicted_step_time_s)
        ok = lo <= r.measured_step_time_s <= hi
        inside += ok
        cover.setdefault(r.regime, []).append((ok, (hi - lo) / r.predicted_step_time_s))
        table.add_row(r.table, r.name, r.regime, f"{r.measured_step_time_s:.3f}", f"{r.predicted_step_time_s:.3f}",
                      f"{r.predicted_step_time_s / r.measured_step_time_s - 1:+.1%}", f"{lo:.2f}-{hi:.2f}",
                      "yes" if ok else "NO")
    Console(width=160).print(table)
    by_regime: dict[str, list[float]] = {}
    for r in runs:
        by_regime.setdefault(r.regime, []).append(r.predicted_step_time_s / r.measured_step_time_s - 1)
    for regime, errs in sorted(by_regime.items()):
        ok, widths = zip(*cover[regime], strict=True)
        print(f"{regime:14s} {summary(errs, ok, widths)}")
    errs = [r.predicted_step_time_s / r.measured_step_time_s - 1 for r in runs]
    ok, widths = zip(*(c for rows in cover.values() for c in rows), strict=True)
    print(f"all            {summary(errs, ok, widths)}  (in-sample: these runs set the interval)")
    pairs = {}
    for r in runs:
        if r.table == "sc21-table2":
            gpus = r.scenario["cluster"]["nodes"] * 8
            key = "zero3" if r.scenario["parallel"]["zero_stage"] == 3 else "3d"
            pairs.setdefault(gpus, {})[key] = r
    for gpus, p in sorted(pairs.items()):
        z, d = p["zero3"], p["3d"]
        meas = "3D" if d.measured_step_time_s < z.measured_step_time_s else "ZeRO-3"
        pred = "3D" if d.predicted_step_time_s < z.predicted_step_time_s else "ZeRO-3"
        print(f"SC21 {gpus:5d} GPUs: faster measured {meas} by {max(z.measured_step_time_s, d.measured_step_time_s) / min(z.measured_step_time_s, d.measured_step_time_s):.2f}x, "
              f"predicted {pred} by {max(z.predicted_step_time_s, d.predicted_step_time_s) / min(z.predicted_step_time_s, d.predicted_step_time_s):.2f}x"
              f"  {'ok' if meas == pred else 'WRONG ORDER'}")
    assert all(math.isfinite(e) for e in errs)


if __name__ == "__main__":
    main()
