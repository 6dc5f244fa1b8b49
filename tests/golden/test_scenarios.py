"""Each shipped scenario's JSON report is kept under tests/golden/ and compared field by field.

Regenerate only deliberately: `python -m pytest tests/golden --update-golden`, then review the
diff of tests/golden/*.json before committing.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from clustersim.api import simulate
from clustersim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
GOLDEN = Path(__file__).resolve().parent


def _compare(actual: object, expected: object, path: str = "") -> list[str]:
    if isinstance(expected, dict) and isinstance(actual, dict):
        diffs = [f"{path}.{k}: missing" for k in expected if k not in actual]
        diffs += [f"{path}.{k}: unexpected" for k in actual if k not in expected]
        for k in expected:
            if k in actual:
                diffs += _compare(actual[k], expected[k], f"{path}.{k}")
        return diffs
    if isinstance(expected, list) and isinstance(actual, list):
        if len(actual) != len(expected):
            return [f"{path}: length {len(actual)} != {len(expected)}"]
        return [d for i, (a, e) in enumerate(zip(actual, expected, strict=True)) for d in _compare(a, e, f"{path}[{i}]")]
    if isinstance(expected, float) and isinstance(actual, (int, float)) and not isinstance(actual, bool):
        return [] if math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-12) else [f"{path}: {actual} != {expected}"]
    return [] if actual == expected else [f"{path}: {actual!r} != {expected!r}"]


def test_every_scenario_has_a_golden_file(update_golden: bool) -> None:
    assert SCENARIOS, "scenarios/ is empty"
    if update_golden:
        return
    missing = [p.stem for p in SCENARIOS if not (GOLDEN / f"{p.stem}.json").exists()]
    assert not missing, f"no golden file for {missing}; run pytest tests/golden --update-golden"


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_matches_golden(path: Path, update_golden: bool) -> None:
    report = simulate(load_scenario(path)).to_json()
    golden = GOLDEN / f"{path.stem}.json"
    if update_golden:
        golden.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
        return
    expected = json.loads(golden.read_text())
    diffs = _compare(json.loads(json.dumps(report)), expected)
    assert not diffs, "\n".join(diffs[:20])


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_shipped_scenarios_fit(path: Path) -> None:
    report = simulate(load_scenario(path))
    assert report.memory.fits, f"{path.stem}: peak {report.memory.peak_bytes_per_gpu / 2**30:.1f} GiB"
