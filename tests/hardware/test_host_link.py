"""The GPU's link to host memory: NVLink-C2C on Grace Blackwell (GB200) instead of the NIC's PCIe.

NVIDIA GB200 NVL72 page / GH200 datasheet: NVLink-C2C 900 GB/s bidirectional, 450 GB/s per
direction. CPU offload (clustersim.plan.host_offload) and checkpoint snapshots read
``ClusterSpec.host_memory_link``: the profile's ``host_link``, else its ``pcie``."""

from __future__ import annotations

import pytest

from clustersim import api
from clustersim.errors import InputError
from clustersim.plan.host_offload import host_bw, host_copy_s
from clustersim.scenario import load_scenario

GB200 = ["cluster.preset=gb200-nvl72", "cluster.nodes=4", "model.preset=llama3-8b", "parallel.tp=1", "parallel.pp=1",
         "parallel.dp=16", "parallel.zero_stage=1", "parallel.global_batch=64", "parallel.sequence_parallel=false"]


def test_gb200_reaches_host_memory_over_c2c_and_its_nics_over_pcie() -> None:
    cluster = load_scenario(None, GB200).cluster
    assert cluster.host_link is not None and cluster.host_link.name == "nvlink-c2c"
    assert cluster.host_link.bw_bytes_per_s == 450e9 and cluster.host_memory_link is cluster.host_link
    assert cluster.pcie is not None and cluster.pcie.name == "pcie5-x16"   # GPUDirect to the ConnectX-7 stays PCIe


def test_a_cluster_without_host_link_keeps_pcie() -> None:
    sc = load_scenario(None, ["cluster.preset=dgx-h100", "cluster.nodes=2"])
    assert sc.cluster.host_link is None and sc.cluster.host_memory_link is sc.cluster.pcie
    assert host_bw(sc) == sc.cluster.pcie.effective_bw_bytes_per_s


def test_offload_copies_take_the_c2c_rate() -> None:
    c2c = load_scenario(None, GB200)
    pcie = load_scenario(None, [*GB200, "cluster.host_link=pcie5-x16"])
    assert host_bw(c2c) == pytest.approx(450e9 * 0.9) and host_bw(pcie) == pytest.approx(64e9 * 0.9, rel=0.05)
    gib = 2**30
    assert host_copy_s(c2c, gib) < host_copy_s(pcie, gib) / 5


def test_optimizer_offload_step_is_shorter_over_c2c() -> None:
    """Optimizer offload on GB200: the fp32 gradients out and the parameters back cross C2C, not PCIe."""
    sets = [*GB200, "parallel.offload.optimizer=true"]
    over_c2c = api.simulate(load_scenario(None, sets))
    over_pcie = api.simulate(load_scenario(None, [*sets, "cluster.host_link=pcie5-x16"]))
    assert over_c2c.breakdown["optimizer"] < over_pcie.breakdown["optimizer"]   # the host step with its copies
    assert over_c2c.step_time_s < over_pcie.step_time_s


def test_host_link_of_the_wrong_kind_is_refused_by_name() -> None:
    with pytest.raises(InputError) as exc:
        load_scenario(None, ["cluster.preset=dgx-h100", "cluster.nodes=2", "cluster.host_link=ib-ndr"])
    assert exc.value.field == "cluster.host_link"


def test_gh200_gpu_takes_the_c2c_host_link() -> None:
    """No GH200 cluster preset (its node topologies vary: one superchip per node, quad-GH200 nodes);
    a scenario composes it: the gh200-144gb GPU and host_link nvlink-c2c."""
    sc = load_scenario(None, ["cluster.preset=dgx-h100", "cluster.nodes=2", "cluster.gpu=gh200-144gb",
                              "cluster.host_link=nvlink-c2c"])
    assert sc.cluster.gpu.name == "gh200-144gb" and host_bw(sc) == pytest.approx(405e9)


@pytest.mark.parametrize("key", ["host_link", "pcie"])
def test_an_empty_host_link_or_pcie_is_refused_by_name(key: str) -> None:
    """``host_link: ""`` fell back to PCIe without a word (an NVL72's C2C dropped): an empty
    string names no fabric, as for scale_out; ``null`` keeps the preset's own."""
    with pytest.raises(InputError) as exc:
        load_scenario(None, [*GB200, f'cluster.{key}=""'])
    assert exc.value.field == f"cluster.{key}" and exc.value.value == ""
    assert "nvlink-c2c" in str(exc.value)   # the allowed fabrics
    group = "{preset: gb200-nvl72, nodes: 2"
    groups = f'cluster.groups=[{group}, {key}: ""}}, {group}}}]'
    with pytest.raises(InputError) as exc:
        load_scenario(None, [g for g in GB200 if not g.startswith("cluster.")]
                      + ["cluster.preset=null", "cluster.nodes=null", groups])
    assert exc.value.field == f"cluster.groups.0.{key}"
    assert load_scenario(None, [*GB200, "cluster.host_link=null"]).cluster.host_link.name == "nvlink-c2c"
