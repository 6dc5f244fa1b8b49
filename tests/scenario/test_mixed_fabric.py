"""A mixed cluster (`cluster.groups`) has one fabric: its keys (node_groups.JOB_FABRIC_KEYS) are the
scenario's or the groups' presets' where they agree, never group 0's alone."""

from __future__ import annotations

import pytest

from clustersim.api import estimate
from clustersim.errors import InputError
from clustersim.scenario import scenario_from_dict


def _mixed(first: str, second: str, **cluster) -> dict:
    # Llama 3 8B, TP 8, data parallel over 24 nodes of two groups: the rings cross leaves of 20 nodes
    # but not of 32, so the leaf size is seen in the step
    return {"name": "mixed", "model": {"preset": "llama3-8b"},
            "cluster": {"groups": [{"preset": first, "nodes": 12}, {"preset": second, "nodes": 12}], **cluster},
            "parallel": {"tp": 8, "pp": 1, "dp": 24, "micro_batch": 1, "global_batch": 96, "zero_stage": 1}}


def test_presets_that_disagree_on_the_fabric_need_it_stated() -> None:
    """DGX A100 (20 nodes per leaf) with DGX H100 (32) took group 0's: 20 with the A100 group
    first, 32 with the H100 group first, so the answer depended on the order of the groups. Left
    out, it is now exit 2 naming cluster.nodes_per_leaf and each preset's value."""
    for order in (("dgx-a100", "dgx-h100"), ("dgx-h100", "dgx-a100")):
        with pytest.raises(InputError) as err:
            scenario_from_dict(_mixed(*order))
        assert err.value.field == "cluster.nodes_per_leaf"
        assert sorted(err.value.value) == ["dgx-a100: 20", "dgx-h100: 32"]
        assert "cluster.nodes_per_leaf" in err.value.allowed


@pytest.mark.parametrize("leaf", [20, 32])
def test_a_stated_fabric_holds_for_every_group_in_either_order(leaf: int) -> None:
    ah = scenario_from_dict(_mixed("dgx-a100", "dgx-h100", nodes_per_leaf=leaf, oversubscription=4.0))
    ha = scenario_from_dict(_mixed("dgx-h100", "dgx-a100", nodes_per_leaf=leaf, oversubscription=4.0))
    for sc in (ah, ha):
        assert {(g.cluster.nodes_per_leaf, g.cluster.oversubscription) for g in sc.node_groups} == {(leaf, 4.0)}
        assert (sc.cluster.nodes_per_leaf, sc.cluster.oversubscription) == (leaf, 4.0)
    assert estimate(ah).step_time_s == pytest.approx(estimate(ha).step_time_s, rel=1e-12)


def test_presets_that_agree_keep_their_fabric_and_every_fabric_key_may_be_stated() -> None:
    sc = scenario_from_dict(_mixed("dgx-h100", "hgx-h200"))   # both presets: 32 nodes per leaf, 1:1
    assert {g.cluster.nodes_per_leaf for g in sc.node_groups} == {32}
    # topology, pods and their oversubscription are the job's too: accepted beside groups (they were
    # refused as "absent with cluster.groups", and no group could set them)
    sc = scenario_from_dict(_mixed("dgx-a100", "dgx-h100", nodes_per_leaf=4, topology="fat-tree", nodes_per_pod=8,
                                   pod_oversubscription=2.0, pue=1.2))
    for g in sc.node_groups:
        c = g.cluster
        assert (c.nodes_per_leaf, c.topology, c.nodes_per_pod, c.pod_oversubscription, c.pue) == \
            (4, "fat-tree", 8, 2.0, 1.2)
