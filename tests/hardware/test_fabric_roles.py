"""A scenario names a fabric for a part its kind can play (clustersim.hardware.load.FABRIC_ROLES): a
PCIe or NVLink fabric named as the network between nodes was accepted and came out faster than
InfiniBand. Profiles are not held to it (validate's CPU clusters name one TCP link for both parts)."""

from __future__ import annotations

import pytest

from clustersim.errors import InputError
from clustersim.hardware.load import FABRIC_ROLES, list_clusters, load_cluster
from clustersim.scenario import load_scenario


@pytest.mark.parametrize(("key", "value"), [("scale_out", "pcie6-x16"), ("scale_out", "nvlink5-nvl72"),
                                            ("pcie", "nvlink5-nvl72"), ("pcie", "ib-ndr"),
                                            # a 1 GbE "NVLink" ran (step 364 s) without a word
                                            ("scale_up", "eth-1g"), ("scale_up", "ib-ndr")])
def test_a_fabric_of_another_kind_is_refused_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(InputError) as err:
        load_scenario(None, [f"cluster.{key}={value}"])
    assert err.value.field == f"cluster.{key}" and "a fabric of kind" in err.value.allowed


def test_every_shipped_cluster_uses_its_fabrics_in_their_parts() -> None:
    """The shipped presets hold the rule the scenario keys are held to."""
    for preset in list_clusters():
        c = load_cluster(preset, 1)
        for key, kinds in FABRIC_ROLES.items():
            fabric = getattr(c, key)
            assert fabric is None or fabric.kind in kinds, (preset, key, fabric.kind)


def test_more_nics_than_gpus_is_refused_not_dropped() -> None:
    """16 NICs on an 8-GPU node priced as 8 without a word (the share floors at one GPU per NIC)."""
    with pytest.raises(InputError) as err:
        load_scenario(None, ["cluster.nics_per_node=16"])
    assert err.value.field == "cluster.nics_per_node" and "at most gpus_per_node (8)" in err.value.allowed
    # a preset given fewer GPUs per node keeps one NIC per GPU
    c = load_cluster("dgx-h100", 2, gpus_per_node=4)
    assert c.nics_per_node == 4
    with pytest.raises(InputError):
        load_cluster("dgx-h100", 2, gpus_per_node=4, nics_per_node=8)


def test_a_profile_cluster_keeps_its_own_node_count(tmp_path) -> None:
    """`clusters.X.nodes` in a profile was accepted by the schema and ignored (1 node)."""
    from clustersim.hardware.load import profiles_restored, use_profiles
    f = tmp_path / "p.yaml"
    f.write_text("clusters:\n  two-node-h100:\n    gpu: h100-sxm-80gb\n    gpus_per_node: 8\n"
                 "    scale_up: nvlink4-nvswitch\n    scale_out: ib-ndr\n    nics_per_node: 8\n    nodes: 2\n")
    with profiles_restored():
        use_profiles([str(f)])
        s = load_scenario(None, ["cluster.preset=two-node-h100", "parallel.dp=4"])
        assert s.cluster.num_nodes == 2
        assert load_scenario(None, ["cluster.preset=two-node-h100", "cluster.nodes=1", "parallel.dp=2"]).cluster.num_nodes == 1
