"""Calibrate on half of one machine's published runs, predict the other half (docs/calibration.md).

Two tables, each one machine with one software:

* ``megatron``: the Megatron-LM README's H100 weak-scaling table (Megatron-Core r0.8.0 on DGX H100,
  2024-07-15; validation/reference/megatron_h100_weak_scaling_2024.csv, the scenarios exactly as
  clustersim.uncertainty.reference builds them, measured step = Megatron's FLOPs / (TFLOP/s x GPUs));
* ``torchtitan``: torchtitan's H100 benchmarks (96 GB HBM2e at 500 W, 2024-12; the logs and TOML
  configs of validation/logs/torchtitan_h100, written by validation/logs/make_logs.py from the
  published figures), imported as `clustersim import torchtitan-log` does.

Each split goes through the command line as a user would:

    clustersim calibrate --run ROW.yaml=SECONDS ... --cluster dgx-h100 --name h100-half --out P.yaml
    clustersim run ROW.yaml --profile P.yaml --set cluster.preset=h100-half --json

and reports, for every row it did not see, the uncalibrated and calibrated errors, whether the
calibrated prediction lies inside its own 80% interval (it must) and whether the measured step
does (coverage). Splits: alternate rows (even -> odd, odd -> even) and the small half against
the large half, both ways.

    PYTHONPATH=. python benchmarks/calibrate_on_half.py [--table megatron|torchtitan|all]
        [--split even|odd|small|large|all] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's clustersim

import yaml  # noqa: E402

from clustersim.uncertainty.reference import H100_TABLE, REFERENCE_DIR, ReferenceRun, h100_weak_scaling  # noqa: E402

TORCHTITAN_LOGS = Path(__file__).resolve().parents[1] / "validation" / "logs" / "torchtitan_h100"


def torchtitan_rows() -> list[ReferenceRun]:
    from clustersim.importers import finish, import_text
    rows = []
    for log in sorted(TORCHTITAN_LOGS.glob("*.log")):
        cfg = log.with_suffix(".toml")
        res = finish(import_text("torchtitan-log", log.read_text(), log.name, config=(cfg.read_text(), cfg.name)), [])
        rows.append(ReferenceRun("torchtitan-h100", log.stem, res.scenario, res.measured_step_time_s))
    return rows


def table_rows(table: str) -> list[ReferenceRun]:
    return list(h100_weak_scaling(REFERENCE_DIR / H100_TABLE)) if table == "megatron" else torchtitan_rows()

SPLITS = {"even": lambda i, n: i % 2 == 0, "odd": lambda i, n: i % 2 == 1,
          "small": lambda i, n: i < n // 2, "large": lambda i, n: i >= n // 2}


def _cli(argv: list[str]) -> tuple[int, str, str]:
    import contextlib
    import io

    from clustersim.cli import main
    from clustersim.hardware import load
    out, err = io.StringIO(), io.StringIO()
    # each command as its own process would run it: a --profile it registers (a file in a split's
    # temporary directory, deleted afterwards) is forgotten when the command ends
    with load.profiles_restored(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def run_split(split: str, rows: list[Any], work: Path) -> dict[str, Any]:
    """Calibrate on the rows ``split`` selects, predict the others."""
    n = len(rows)
    chosen = [r for i, r in enumerate(rows) if SPLITS[split](i, n)]
    held = [r for i, r in enumerate(rows) if not SPLITS[split](i, n)]
    paths = {}
    for r in rows:
        p = work / (r.name.split()[0].replace("/", "_") + ".yaml")
        p.write_text(yaml.safe_dump(r.scenario, sort_keys=False))
        paths[r.name] = p
    profile = work / f"h100-{split}.yaml"
    argv = ["calibrate", "--name", f"h100-{split}", "--out", str(profile), "--json"]
    for r in chosen:
        argv += ["--run", f"{paths[r.name]}={r.measured_step_time_s!r}"]
    code, out, err = _cli(argv)
    if code:
        raise SystemExit(f"calibrate failed ({code}): {err}")
    cal = json.loads(out)
    out_rows = []
    for r in held:
        _, raw, _ = _cli(["run", str(paths[r.name]), "--json"])
        before = json.loads(raw)
        _, raw, _ = _cli(["run", str(paths[r.name]), "--profile", str(profile), "--set",
                          f"cluster.preset=h100-{split}", "--json"])
        after = json.loads(raw)
        lo, hi = after["interval"]["step_time_s"]
        m_lo, m_hi = after["interval"]["mfu"]
        t_lo, t_hi = after["interval"]["tokens_per_s"]
        m = r.measured_step_time_s
        out_rows.append({
            "run": r.name, "measured_s": m, "uncalibrated_s": before["step_time_s"], "calibrated_s": after["step_time_s"],
            "error_before_pct": (before["step_time_s"] / m - 1) * 100, "error_after_pct": (after["step_time_s"] / m - 1) * 100,
            "interval_s": [lo, hi],
            "point_inside": lo <= after["step_time_s"] <= hi and m_lo <= after["mfu"] <= m_hi
            and t_lo <= after["tokens_per_s"] <= t_hi,
            "measured_inside": lo <= m <= hi,
            "uncalibrated_measured_inside": before["interval"]["step_time_s"][0] <= m <= before["interval"]["step_time_s"][1]})
    before_errs = [abs(x["error_before_pct"]) for x in out_rows]
    after_errs = [abs(x["error_after_pct"]) for x in out_rows]
    return {"split": split, "calibrated_on": [r.name for r in chosen], "compute_scale": cal["compute_scale"],
            "leave_one_out": cal.get("leave_one_out"), "rows": out_rows,
            "summary": {"predicted": len(out_rows),
                        "median_abs_error_before_pct": statistics.median(before_errs),
                        "median_abs_error_after_pct": statistics.median(after_errs),
                        "mean_abs_error_before_pct": statistics.fmean(before_errs),
                        "mean_abs_error_after_pct": statistics.fmean(after_errs),
                        "points_inside_their_interval": sum(x["point_inside"] for x in out_rows),
                        "coverage_after": sum(x["measured_inside"] for x in out_rows),
                        "coverage_before": sum(x["uncalibrated_measured_inside"] for x in out_rows)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--table", choices=["megatron", "torchtitan", "all"], default="all")
    ap.add_argument("--split", choices=[*SPLITS, "all"], default="all")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = []
    for table in (["megatron", "torchtitan"] if args.table == "all" else [args.table]):
        rows = table_rows(table)
        with tempfile.TemporaryDirectory(prefix="clustersim-half-") as tmp:
            for split in (SPLITS if args.split == "all" else [args.split]):
                results.append({"table": table, **run_split(split, rows, Path(tmp))})
    if args.json:
        print(json.dumps(results, indent=1))
        return
    for res in results:
        s = res["summary"]
        print(f"\n{res['table']}, split {res['split']}: calibrated on {', '.join(res['calibrated_on'])}; "
              f"compute_scale {res['compute_scale']:.3f}")
        print("| run | measured | uncalibrated | error | calibrated | error | 80% interval | point inside | measured inside |")
        print("|---|---:|---:|---:|---:|---:|---|---|---|")
        for x in res["rows"]:
            print(f"| {x['run']} | {x['measured_s']:.3f} s | {x['uncalibrated_s']:.3f} s | {x['error_before_pct']:+.1f}% | "
                  f"{x['calibrated_s']:.3f} s | {x['error_after_pct']:+.1f}% | {x['interval_s'][0]:.3f}-"
                  f"{x['interval_s'][1]:.3f} s | {'yes' if x['point_inside'] else 'NO'} | "
                  f"{'yes' if x['measured_inside'] else 'no'} |")
        print(f"median |error| {s['median_abs_error_before_pct']:.1f}% -> {s['median_abs_error_after_pct']:.1f}%, "
              f"mean {s['mean_abs_error_before_pct']:.1f}% -> {s['mean_abs_error_after_pct']:.1f}%; points inside "
              f"their interval {s['points_inside_their_interval']}/{s['predicted']}; measured inside the interval "
              f"{s['coverage_before']}/{s['predicted']} before, {s['coverage_after']}/{s['predicted']} after")


if __name__ == "__main__":
    main()
