"""Mixed GPUs (cluster.groups) with a stage that holds no layer, the split a V or DualPipe graph
keeps and what the report calls it, and the order of parallel.layers_per_stage on a V schedule."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from clustersim.api import estimate, simulate
from clustersim.errors import InputError
from clustersim.parallel.pipeline import layout_stage_layers
from clustersim.scenario import scenario_from_dict

ROOT = Path(__file__).resolve().parents[2]

# Llama 3 8B on 2 DGX A100 + 2 DGX H100 nodes (TP 8): stage 0 on the A100s, stage 1 on the H100s
MIX = {"name": "mix", "model": {"preset": "llama3-8b"},
       "cluster": {"groups": [{"preset": "dgx-a100", "nodes": 2}, {"preset": "dgx-h100", "nodes": 2}],
                   "nodes_per_leaf": 32},
       "parallel": {"tp": 8, "pp": 2, "dp": 2, "micro_batch": 1, "global_batch": 32}}


def _mix(**parallel) -> dict:
    return {**MIX, "parallel": {**MIX["parallel"], **parallel}}


@pytest.mark.parametrize("parallel", [
    {"layers_per_stage": [0, 32]},
    {"pp": 4, "dp": 1, "layers_per_stage": [0, 16, 16, 0]},
    {"pp": 4, "dp": 1, "pipeline_layout": "E|t*16|t*16|L"},
])
def test_a_mixed_cluster_runs_a_first_stage_without_layers(parallel) -> None:
    """A first stage holding only the embedding divided by its zero layers (ZeroDivisionError in
    perrank.hetero) on a mixed cluster; a plain cluster and an empty last stage ran. It has no
    per-layer time and its fixed work is all it runs: both engines price it."""
    sc = scenario_from_dict(_mix(**parallel))
    event, closed = simulate(sc), estimate(sc)
    het = event.to_json()["heterogeneous"]
    assert het["layers_per_stage"] == (parallel.get("layers_per_stage") or [0, 16, 16, 0])
    assert math.isfinite(event.step_time_s) and event.step_time_s > 0
    assert math.isclose(closed.step_time_s, event.step_time_s, rel_tol=0.05)


@pytest.mark.parametrize("schedule", ["zb-v", "dualpipe-v", "dualpipe"])
def test_a_v_or_dualpipe_graph_reports_the_even_layers_it_ran(schedule) -> None:
    """balance: auto under a V or DualPipe graph ran the even split but reported ``auto`` (the
    layers balanced to speed). It reports ``schedule``, the step is balance: even's."""
    auto = estimate(scenario_from_dict(_mix(schedule=schedule))).to_json()
    even = estimate(scenario_from_dict(_mix(schedule=schedule, balance="even"))).to_json()
    assert auto["heterogeneous"]["balance"] == "schedule"
    assert auto["heterogeneous"]["layers_per_stage"] == [16, 16]
    assert auto["step_time_s"] == even["step_time_s"]
    # 1F1B's graph is in rank order: it still balances and says so
    assert estimate(scenario_from_dict(_mix())).to_json()["heterogeneous"]["balance"] == "auto"


def test_the_table_says_why_the_layers_stayed_even(tmp_path) -> None:
    import yaml
    path = tmp_path / "mix.yaml"
    path.write_text(yaml.safe_dump(_mix(schedule="zb-v")))
    res = subprocess.run([sys.executable, "-m", "clustersim", "run", str(path), "--engine", "analytical"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr
    words = " ".join(res.stdout.split())   # the table wraps its cells
    assert "layers even: the zb-v stage graph" in words and "balance auto" not in words


def test_layers_per_stage_on_a_v_schedule_is_in_the_v_path_order() -> None:
    """zb-v: rank r holds model stages r and 2 pp - 1 - r, so [2, 14, 14, 2] puts 4 layers on rank 0
    and 28 on rank 1, [2, 14, 2, 14] 16 each. The docs and the error message said "stage order
    chunk * pp + rank" (which would read them the other way round); they now state the V order."""
    plain = {"name": "v", "model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "nodes": 2},
             "parallel": {"tp": 8, "pp": 2, "dp": 1, "micro_batch": 1, "global_batch": 8, "schedule": "zb-v"}}

    def ranks(counts: list[int]) -> tuple[int, ...]:
        sc = scenario_from_dict({**plain, "parallel": {**plain["parallel"], "layers_per_stage": counts}})
        return layout_stage_layers(sc.parallel, sc.model.layers)

    assert ranks([2, 14, 14, 2]) == (4, 28)
    assert ranks([2, 14, 2, 14]) == (16, 16)
    with pytest.raises(InputError) as err:
        ranks([2, 14, 16])
    assert err.value.field == "parallel.layers_per_stage"
    assert "rank r holds stages r and 2 pp - 1 - r" in str(err.value)
    assert "chunk * pp + rank" not in str(err.value)
    text = (ROOT / "docs" / "scenario.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `layers_per_stage`"))
    assert "rank r holds stages r and 2 x pp - 1 - r" in row and "`[2, 14, 14, 2]` on pp 2 gives rank 0 4 layers" in row
