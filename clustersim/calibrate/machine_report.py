"""The readable report of `clustersim calibrate` from runs: what calibration changed (each fitted
factor with what it was fitted to, every run before and after), how well it predicts runs it did
not see, and the regimes the profile covers."""

from __future__ import annotations

from typing import Any


def _unit(name: str) -> tuple[float, str]:
    if name.endswith(("bw", "nvls_bw")):
        return 1e-9, " GB/s"
    if name.endswith("latency"):
        return 1e6, " us"
    return 1.0, ""


def print_report(cal: Any) -> None:  # noqa: ANN401 - MachineCalibration (clustersim.calibrate.machine)
    from rich.console import Console
    from rich.table import Table
    out = Console(width=max(Console().width, 150))
    d = cal.to_json()
    loo = d.get("leave_one_out", {})
    if d["runs"]:
        t = Table(title=f"runs: measured vs predicted before and after calibration ({cal.base_cluster} -> {cal.name})")
        cols = ["run", "measured", "before", "err"] + (["leave-one-out", "err"] if loo.get("runs") else []) + [
            "calibrated", "err"]
        for col in cols:
            t.add_column(col, justify="left" if col == "run" else "right")
        for r in d["runs"]:
            row = [r["source"], f"{r['measured_step_time_s']:.4g} s", f"{r['predicted_before_s']:.4g} s",
                   f"{r['error_before_pct']:+.1f}%"]
            if loo.get("runs"):
                row += [f"{r['predicted_loo_s']:.4g} s", f"{r['loo_error_pct']:+.1f}%"]
            row += [f"{r['predicted_calibrated_s']:.4g} s", f"{r['error_calibrated_pct']:+.1f}%"]
            t.add_row(*row)
        out.print(t)
        if loo.get("runs"):
            out.print(f"leave-one-out: {loo['runs']} runs, median |error| {loo['median_abs_error_pct']:.1f}%, "
                      f"max {loo['max_abs_error_pct']:.1f}% (each run predicted by a fit without it)")
    if d.get("factors"):
        out.print("fitted factors:")
        for f in d["factors"]:
            scale, unit = _unit(f["name"])
            src = ", ".join(f["fitted_to"])
            out.print(f"  {f['name']}: {f['before'] * scale:.4g} -> {f['value'] * scale:.4g}{unit}  (fitted to {src})")
    if d.get("cover"):
        out.print(f"covers: {', '.join(d['cover'])} (runs on {d['calibration']['gpus'][0]}-"
                  f"{d['calibration']['gpus'][1]} GPUs, {', '.join(d['calibration']['frameworks'])}); scenarios of "
                  "a kind not listed here keep the uncalibrated interval width")
    if d.get("nccl_tests"):
        s = d["nccl_tests"]["summary"]
        out.print(f"nccl-tests: {s['rows_fitted']} rows fitted, median |error| {s['fit_median_abs_err_pct']}%")
    for n in d["notes"]:
        out.print(f"[yellow]note:[/yellow] {n}")
    out.print(f"profile: {cal.profile_path} (cluster preset {cal.name}; use with --profile)")
