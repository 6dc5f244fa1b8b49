"""A scenario names a fabric for a part its kind can play (clustersim.hardware.load.FABRIC_ROLES): a
PCIe or NVLink fabric named as the network between nodes was accepted and came out faster than
InfiniBand. Profiles are not held to it (validate's CPU clusters name one TCP link for both parts)."""

from __future__ import annotations

import pytest

from clustersim.errors import InputError
from clustersim.hardware.load import FABRIC_ROLES, list_clusters, load_cluster
from clustersim.scenario import load_scenario


@pytest.mark.parametrize(("key", "value"), [("scale_out", "pcie6-x16"), ("scale_out", "nvlink5-nvl72"),
                                            ("pcie", "nvlink5-nvl72"), ("pcie", "ib-ndr")])
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
