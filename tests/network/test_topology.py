"""Topology graph, rail routing with ECMP, and the alpha-beta point-to-point cost."""

import pytest

from clustersim.hardware.load import load_cluster
from clustersim.network import build_topology, ecmp_routes, p2p_time_s, route
from clustersim.network import topology as topo
from clustersim.network.routing import check_route


@pytest.fixture(scope="module")
def small():
    # 4 DGX H100 nodes, 2 per leaf, 2:1 oversubscribed -> 2 leaf groups x 8 rails, 1 spine
    return load_cluster("dgx-h100", 4, nodes_per_leaf=2, oversubscription=2.0)


def test_counts(small):
    g = build_topology(small)
    kinds = {}
    for _, data in g.nodes(data=True):
        kinds[data["kind"]] = kinds.get(data["kind"], 0) + 1
    # 4 nodes x 8 GPUs, 4 NVSwitches, 4 x 8 NICs, 2 groups x 8 rails of leaves, ceil(2 / 2) = 1 spine
    assert kinds == {"gpu": 32, "nvswitch": 4, "nic": 32, "leaf": 16, "spine": 1}
    # per node 8 x (gpu-nvsw + gpu-nic + nic-leaf) both ways = 48; leaf-spine 16 x 2
    assert g.number_of_edges() == 4 * 48 + 32


def test_intra_node_route_goes_through_nvswitch(small):
    assert route(small, "n0.gpu0", "n0.gpu5") == [("n0.gpu0", "n0.nvsw"), ("n0.nvsw", "n0.gpu5")]


def test_inter_node_route_is_rail_aligned_and_crosses_a_spine(small):
    g = build_topology(small)
    edges = route(small, "n0.gpu3", "n2.gpu3")
    check_route(g, edges)
    nodes = [edges[0][0]] + [b for _, b in edges]
    assert nodes == ["n0.gpu3", "n0.nic3", "leaf0.rail3", "spine0", "leaf1.rail3", "n2.nic3", "n2.gpu3"]
    assert nodes in ecmp_routes(g, "n0.gpu3", "n2.gpu3")


def test_pxn_moves_to_the_destination_rail_over_nvlink(small):
    edges = route(small, "n0.gpu1", "n1.gpu6")
    assert edges[:2] == [("n0.gpu1", "n0.nvsw"), ("n0.nvsw", "n0.gpu6")]
    assert ("n0.nic6", "leaf0.rail6") in edges


def test_ecmp_spreads_flows_over_spines():
    c = load_cluster("dgx-h100", 64)  # 2 leaf groups of 32 nodes, 32 spines
    assert topo.num_spines(c) == 32
    spines = {[b for _, b in route(c, f"n{i}.gpu0", f"n{32 + i}.gpu0") if b.startswith("spine")][0] for i in range(32)}
    assert len(spines) > 8


def test_alpha_beta_hand_case(small):
    g = build_topology(small)
    edges = route(small, "n0.gpu0", "n1.gpu0")  # same leaf: gpu -> nic -> leaf -> nic -> gpu
    # latency: NDR NIC hop 2.7 us (nothing else on this path); bottleneck: NDR 50 GB/s x 0.96 = 48 GB/s
    # 1 GiB: 2.7e-6 + 1073741824 / 48e9 = 2.7e-6 + 0.0223696213 = 0.0223723213 s
    assert p2p_time_s(2**30, g, edges) == pytest.approx(2.7e-6 + 2**30 / 48e9, rel=1e-9)
    # inside a node: NVLink4 0.6 us + 1 GiB / (450 GB/s x 0.822 = 369.9 GB/s)
    intra = route(small, "n0.gpu0", "n0.gpu1")
    assert p2p_time_s(2**30, g, intra) == pytest.approx(0.6e-6 + 2**30 / 369.9e9, rel=1e-9)
    assert p2p_time_s(123, g, []) == 0.0
