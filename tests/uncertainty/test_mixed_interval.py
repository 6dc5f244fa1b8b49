"""The 80% interval on a mixed cluster (`cluster.groups`) does not depend on the groups' order."""

from __future__ import annotations

from clustersim.scenario import scenario_from_dict
from clustersim.uncertainty import step_interval


def _mixed(first: str, second: str) -> dict:
    return {"name": "mixed", "model": {"preset": "llama3-8b"},
            "cluster": {"groups": [{"preset": first, "nodes": 2}, {"preset": second, "nodes": 2}],
                        "nodes_per_leaf": 32},   # the job's fabric: dgx-a100's preset says 20, dgx-h100's 32
            "parallel": {"tp": 8, "pp": 1, "dp": 4, "micro_batch": 1, "global_batch": 64, "zero_stage": 1}}


def _plain(preset: str) -> dict:
    return {**_mixed(preset, preset), "cluster": {"preset": preset, "nodes": 4}}


def test_the_interval_of_mixed_gpus_does_not_depend_on_the_groups_order() -> None:
    """Listing the A100 group first gave 2.987-3.609 s in regime 3d/a100, the H100 group first
    3.116-3.739 s in 3d/hopper, for the same step: group 0's GPU stood for the whole cluster. Each
    group's GPUs now get their own regime's band and the step's is the widest that holds them all,
    regime 3d/a100+hopper, with a reason that names the mixing."""
    ah = step_interval(scenario_from_dict(_mixed("dgx-a100", "dgx-h100")))
    ha = step_interval(scenario_from_dict(_mixed("dgx-h100", "dgx-a100")))
    assert ah == ha
    assert ah.regime == "3d/a100+hopper"
    assert not ah.validated and ah.why[0].startswith("mixed GPUs (3d/a100, 3d/hopper)")
    a100 = step_interval(scenario_from_dict(_plain("dgx-a100")))
    h100 = step_interval(scenario_from_dict(_plain("dgx-h100")))
    assert ah.lo_factor == min(a100.lo_factor, h100.lo_factor)
    assert ah.hi_factor == max(a100.hi_factor, h100.hi_factor)


def test_groups_of_one_gpu_kind_keep_their_regime() -> None:
    """Two groups of the same preset are one regime: the plain preset's interval, unchanged."""
    same = step_interval(scenario_from_dict(_mixed("dgx-h100", "dgx-h100")))
    assert same == step_interval(scenario_from_dict(_plain("dgx-h100")))
