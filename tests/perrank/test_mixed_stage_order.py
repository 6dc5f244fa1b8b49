"""Mixed GPUs (cluster.groups) with a stage that holds no layer, the split a V or DualPipe graph
keeps and what the report calls it, and the order of parallel.layers_per_stage on a V schedule."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from clustersim.api import estimate, simulate
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
