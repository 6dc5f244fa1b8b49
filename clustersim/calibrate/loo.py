"""Leave-one-out on the validation harness's own measurements (`clustersim validate --loo`).

Every measured case is predicted by a calibration that did not see it:

* a fit case (collective or compute) by the profile refitted on all fit cases but it
  (clustersim.calibrate.validate.calibrate, written to a scratch folder);
* a held-out collective or compute case by the normal profile (the fit never saw it);
* a training step by the normal profile with its compute_scale fitted (as `clustersim calibrate
  --log` does, clustersim.calibrate.machine) to the other steps' measured times: the steps are
  runs, like training logs.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import tempfile
from pathlib import Path
from typing import Any

from clustersim.calibrate.compare import CaseResult


@dataclasses.dataclass(frozen=True, slots=True)
class LooCase:
    name: str
    kind: str
    role: str
    measured_s: float
    predicted_s: float       # the normal profile
    loo_s: float             # a calibration that did not see this case
    how: str

    @property
    def loo_error_pct(self) -> float:
        return (self.loo_s / self.measured_s - 1) * 100

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "role": self.role, "measured_s": self.measured_s,
                "predicted_s": self.predicted_s, "loo_s": self.loo_s, "loo_error_pct": round(self.loo_error_pct, 3),
                "how": self.how}


def leave_one_out(records: list[dict[str, Any]], opts: Any, link: dict[str, Any],
                  normal: list[CaseResult]) -> list[LooCase]:
    from clustersim.calibrate import validate as v
    from clustersim.calibrate.machine import SCALE_GRID, Run, fit_scale, simulate_s
    from clustersim.calibrate.predict import step_scenario
    from clustersim.calibrate.profile import profile_in_env
    from clustersim.hardware.load import load_cluster
    by_name = {c.name: c for c in normal}
    out: list[LooCase] = []
    with tempfile.TemporaryDirectory(prefix="clustersim-loo-") as tmp:
        scratch = dataclasses.replace(opts, out_dir=Path(tmp))
        for r in records:
            if r["name"] not in by_name or r["kind"] not in ("collective", "compute") or r["role"] != "fit":
                continue
            rest = [x for x in records if x is not r]
            try:
                profile, _ = v.calibrate(rest, scratch, link)
                pred, _ = v.predict_records([r], scratch, profile)
            except Exception:  # noqa: BLE001 - a fold that cannot fit (too few points) is reported as missing
                continue
            if pred:
                c = by_name[r["name"]]
                out.append(LooCase(c.name, c.kind, c.role, c.measured_s, c.predicted_s, pred[0].predicted_s,
                                   "profile refitted without this case"))
    for c in normal:
        if c.role == "holdout" and c.kind in ("collective", "compute"):
            out.append(LooCase(c.name, c.kind, c.role, c.measured_s, c.predicted_s, c.predicted_s,
                               "held out: the fit never saw it"))
    steps = [r for r in records if r["kind"].endswith("_step") and r["name"] in by_name]
    if steps:
        _, _, preset = v._names(opts)
        profile = opts.out_dir / f"{preset}.yaml"
        with profile_in_env(profile):
            cluster = load_cluster(preset, max(r["params"]["world"] for r in steps) if opts.netns else 1)
            runs = []
            for r in steps:
                data = step_scenario(r["kind"], r["params"], preset, opts.mode)
                grid = tuple(simulate_s(data, cluster, k) for k in SCALE_GRID)
                runs.append(Run(r["name"], r["kind"], data, float(r["measured_s"]), grid))
            for i, (r, run) in enumerate(zip(steps, runs, strict=True)):
                k = fit_scale(runs[:i] + runs[i + 1:])
                c = by_name[r["name"]]
                out.append(LooCase(c.name, c.kind, c.role, c.measured_s, c.predicted_s,
                                   simulate_s(run.scenario, cluster, k),
                                   f"compute_scale {k:.3f} fitted to the other {len(runs) - 1} steps"))
    order = {c.name: i for i, c in enumerate(normal)}
    return sorted(out, key=lambda c: order[c.name])


def loo_summary(cases: list[LooCase]) -> dict[str, Any]:
    def stats(errs: list[float]) -> dict[str, Any]:
        if not errs:
            return {"cases": 0}
        errs = sorted(abs(e) for e in errs)
        return {"cases": len(errs), "median_abs_error_pct": round(statistics.median(errs), 3),
                "p90_abs_error_pct": round(errs[max(0, math.ceil(0.9 * len(errs)) - 1)], 3)}
    out = {"all": stats([c.loo_error_pct for c in cases])}
    for kind in sorted({c.kind for c in cases}):
        out[kind] = stats([c.loo_error_pct for c in cases if c.kind == kind])
    return out
