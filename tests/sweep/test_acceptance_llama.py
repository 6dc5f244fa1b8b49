"""The sweep as a user runs it on the shipped Llama-3-70B scenario at 128 H100 (16 DGX nodes),
through the CLI (docs/sweep.md): the top 10 are structurally distinct layouts ordered by the ranked
value, ``--fix``/``--set`` on a searched dimension constrain it, ``--rank-by p90`` orders by the
interval's upper end. Each sweep screens about 200,000 layouts (one to two minutes here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LLAMA = ["scenarios/llama3_70b_h100x512.yaml", "--gpus", "128", "--top", "10", "--json", "--no-progress"]
STRUCTURE = ("tp", "pp", "dp", "cp", "zero_stage")


def _sweep(*args: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "clustersim", "sweep", *LLAMA, *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.fixture(scope="module")
def by_time() -> dict:
    return _sweep()


def test_top_10_are_distinct_layouts_ordered_by_step_time(by_time):
    top = by_time["top"]
    assert len(top) == 10 and by_time["ranked_field"] == "step_time_s"
    layouts = {tuple(r["parallel"][f] for f in STRUCTURE) for r in top}
    assert len(layouts) >= 5, layouts
    times = [r["step_time_s"] for r in top]
    assert times == sorted(times)
    # no two rows differ only in virtual stages or as ZeRO-1/2 twins: those share a row
    keys = set()
    for r in top:
        p = dict(r["parallel"], virtual_stages=None, zero_stage=min(r["parallel"]["zero_stage"], 1)
                 if r["parallel"]["zero_stage"] < 3 else 3)
        keys.add(json.dumps(p, sort_keys=True))
    assert len(keys) == 10


def test_fix_cp_1_and_rank_by_p90():
    data = _sweep("--fix", "parallel.cp=1", "--rank-by", "p90")
    top = data["top"]
    assert data["constraints"]["fix"] == {"parallel.cp": 1} and data["ranked_field"] == "p90_step_time_s"
    assert len(top) == 10 and all(r["parallel"]["cp"] == 1 for r in top)
    upper = [r["interval"]["step_time_s"][1] for r in top]
    assert upper == sorted(upper) and [r["p90_step_time_s"] for r in top] == upper


def test_set_on_cp_constrains_like_fix():
    """``--set parallel.cp=2`` (cp is searched) is a constraint, not an ignored template value."""
    data = _sweep("--set", "parallel.cp=2", "--top", "3", "--rerank", "1")
    assert data["constraints"]["fix"] == {"parallel.cp": 2}
    assert data["top"] and all(r["parallel"]["cp"] == 2 for r in data["top"])
