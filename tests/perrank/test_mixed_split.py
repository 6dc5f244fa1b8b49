"""What the split of a mixed cluster (`cluster.groups`) runs, and what the report says it ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustersim.api import estimate
from clustersim.scenario import apply_overrides, read_scenario_dict, scenario_from_dict

MIXED = str(Path(__file__).resolve().parents[2] / "scenarios" / "llama3_70b_a100_h100_mixed.yaml")
PARALLEL = {"tp": 2, "pp": 2, "dp": 8, "micro_batch": 1, "global_batch": 64, "zero_stage": 1}


def _job(cluster: dict) -> dict:
    return {"name": "homog", "model": {"preset": "llama3-8b"}, "cluster": cluster, "parallel": PARALLEL}


@pytest.mark.parametrize("groups", [[{"preset": "dgx-h100", "nodes": 4}],
                                    [{"preset": "dgx-h100", "nodes": 2}, {"preset": "dgx-h100", "nodes": 2}]],
                         ids=["one group", "two groups of one kind"])
def test_groups_of_one_gpu_kind_run_as_the_plain_preset(groups: list[dict]) -> None:
    """A uniform cluster written as `cluster.groups` balanced the stages for the embedding and the
    output layer (1.849 s in the event engine) where the plain preset splits evenly (1.923 s):
    groups of one hardware now run as the preset does, and the report says `balance: even`."""
    plain = estimate(scenario_from_dict(_job({"preset": "dgx-h100", "nodes": 4})))
    grouped = estimate(scenario_from_dict(_job({"groups": groups})))
    assert grouped.step_time_s == plain.step_time_s
    h = grouped.to_json()["heterogeneous"]
    assert h["balance"] == "even" and h["layers_per_stage"] == [16, 16]


def test_a_framework_split_on_mixed_gpus_is_reported_as_what_ran() -> None:
    """`parallel.account_for_embedding` sets the layers (Megatron-Core's split) and turns the layer
    balancing off; the report still said `balance auto`. It now says `framework`, and the text says
    the layers come from the framework's split option."""
    raw = apply_overrides(read_scenario_dict(MIXED),
                          ["parallel.account_for_embedding=true"])
    sc = scenario_from_dict(raw)
    h = estimate(sc).to_json()["heterogeneous"]
    assert h["balance"] == "framework"
    balanced = estimate(scenario_from_dict(read_scenario_dict(MIXED)))
    assert balanced.to_json()["heterogeneous"]["balance"] == "auto"
    assert h["layers_per_stage"] != balanced.to_json()["heterogeneous"]["layers_per_stage"]
    given = scenario_from_dict(apply_overrides(read_scenario_dict(MIXED),
                                               ["parallel.layers_per_stage=[10, 10, 30, 30]"]))
    assert estimate(given).to_json()["heterogeneous"]["balance"] == "layers_per_stage"
