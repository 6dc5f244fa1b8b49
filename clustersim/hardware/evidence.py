"""The ``calibration:`` mapping of a calibrated cluster entry, both ways: read into
``CalibrationEvidence`` (checked, exit 2 naming the key) and written from it (one format, one
place). Written by `clustersim calibrate` (docs/calibration.md)::

    calibration:
      runs: 3
      loo_rel_errors: [-0.012, 0.008, 0.004]     # none from one run
      source: "clustersim calibrate --run a.yaml=5.58 ..."
      date: "2024-07-15"
      cover: ["dense 3D"]
      gpus: [48, 384]
      frameworks: ["megatron-core"]
      schedules: ["1f1b"]                        # pipeline schedules of the runs with pp > 1 (none: [])
      factors: [{name: "compute_scale", value: 0.903, before: 1.0, fitted_to: ["a.yaml", "b.yaml"]}]
      per_run: [{name: "a.yaml", measured_s: 5.58, before_s: 5.1, after_s: 5.55}]
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from clustersim.errors import InputError
from clustersim.hardware.spec import CalibratedFactor, CalibratedRun, CalibrationEvidence

KEYS = ("runs", "loo_rel_errors", "source", "date", "cover", "gpus", "frameworks", "factors", "per_run",
        "schedules")


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _strings(where: str, raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise InputError(where, raw, "a list of strings")
    return tuple(raw)


def _records(where: str, raw: Any, fields: dict[str, str]) -> list[dict[str, Any]]:
    """A list of mappings with exactly ``fields`` (name -> "number" | "string" | "strings")."""
    allowed = "a list of mappings with " + ", ".join(fields)
    if not isinstance(raw, list):
        raise InputError(where, raw, allowed)
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or set(item) != set(fields):
            raise InputError(f"{where}[{i}]", item, allowed)
        for key, kind in fields.items():
            v = item[key]
            ok = (_number(v) and v >= 0 if kind == "number" else isinstance(v, str) if kind == "string"
                  else isinstance(v, list) and all(isinstance(x, str) for x in v))
            if not ok:
                raise InputError(f"{where}[{i}].{key}", v, {"number": "a number >= 0", "string": "a string",
                                                             "strings": "a list of strings"}[kind])
        out.append(dict(item))
    return out


def load_evidence(where: str, raw: Any) -> CalibrationEvidence | None:
    """The ``calibration:`` mapping of a calibrated cluster entry (None when absent)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not set(raw) <= set(KEYS) or "loo_rel_errors" not in raw:
        raise InputError(where, raw, "a mapping with runs, loo_rel_errors (a list of predicted/measured - 1), "
                                     "source, date and optionally " + ", ".join(KEYS[4:]))
    errors = raw["loo_rel_errors"]
    if not isinstance(errors, list) or not all(_number(e) and -1 < e < 100 for e in errors):
        raise InputError(f"{where}.loo_rel_errors", errors, "a list of numbers between -1 and 100 (exclusive)")
    runs = raw.get("runs", len(errors))
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < len(errors) or runs < 1:
        raise InputError(f"{where}.runs", runs, f"an integer >= 1 and >= the number of loo_rel_errors ({len(errors)})")
    gpus = raw.get("gpus", [0, 0])
    if not (isinstance(gpus, list) and len(gpus) == 2 and all(isinstance(g, int) and not isinstance(g, bool)
                                                              and g >= 0 for g in gpus) and gpus[0] <= gpus[1]):
        raise InputError(f"{where}.gpus", gpus, "[min, max] GPU counts of the runs, integers, min <= max")
    factors = _records(f"{where}.factors", raw.get("factors", []),
                       {"name": "string", "value": "number", "before": "number", "fitted_to": "strings"})
    per_run = _records(f"{where}.per_run", raw.get("per_run", []),
                       {"name": "string", "measured_s": "number", "before_s": "number", "after_s": "number"})
    return CalibrationEvidence(
        runs=runs, loo_rel_errors=tuple(float(e) for e in errors) if runs >= 2 else (),
        source=str(raw.get("source", "")), date=str(raw.get("date", "unknown")),
        cover=_strings(f"{where}.cover", raw.get("cover", [])), min_gpus=gpus[0], max_gpus=gpus[1],
        frameworks=_strings(f"{where}.frameworks", raw.get("frameworks", [])),
        schedules=_strings(f"{where}.schedules", raw.get("schedules", [])),
        factors=tuple(CalibratedFactor(f["name"], float(f["value"]), float(f["before"]), tuple(f["fitted_to"]))
                      for f in factors),
        per_run=tuple(CalibratedRun(r["name"], float(r["measured_s"]), float(r["before_s"]), float(r["after_s"]))
                      for r in per_run))


def _r(x: float) -> float:
    return float(f"{x:.6g}")


def evidence_to_yaml(ev: CalibrationEvidence) -> dict[str, Any]:
    """The mapping `load_evidence` reads back (values rounded to 6 significant digits)."""
    out: dict[str, Any] = {"runs": ev.runs, "loo_rel_errors": [_r(e) for e in ev.loo_rel_errors],
                           "source": ev.source, "date": ev.date, "cover": list(ev.cover),
                           "gpus": [ev.min_gpus, ev.max_gpus], "frameworks": list(ev.frameworks),
                           "schedules": list(ev.schedules)}
    out["factors"] = [{"name": f.name, "value": _r(f.value), "before": _r(f.before), "fitted_to": list(f.fitted_to)}
                      for f in ev.factors]
    out["per_run"] = [{"name": r.name, "measured_s": _r(r.measured_s), "before_s": _r(r.before_s),
                       "after_s": _r(r.after_s)} for r in ev.per_run]
    return out


def evidence_to_json(ev: CalibrationEvidence) -> dict[str, Any]:
    """What `run --json` shows of a calibrated cluster (the profile's mapping, as JSON)."""
    return evidence_to_yaml(ev)
