"""Scale-up domains beyond a node (NVL72), NVLink 5 boards and AMD's xGMI mesh, against the
published bus bandwidths the profiles cite (docs/hardware.md) and by hand."""

from __future__ import annotations

import pytest

from clustersim.collectives import GroupShape, plan_collective, ports
from clustersim.collectives.algorithms import _a2a_ports
from clustersim.collectives.lowering import simulate_collective
from clustersim.hardware.load import load_cluster
from clustersim.network.domain import domain_view
from clustersim.network.topology import build_topology

GiB = 2**30


def busbw_GBps(preset: str, nodes: int, shape: GroupShape, size: float = 8 * GiB, op: str = "all_reduce",
               algo: str | None = None) -> float:
    return plan_collective(op, size, load_cluster(preset, nodes), shape, algo).busbw_bytes_per_s / 1e9


@pytest.mark.parametrize("preset,nodes,shape,algo,published", [
    # GTC25 S72583 (via stas00/ml-engineering network/README.md): NVL72 all-reduce 850 GB/s with NVLS, 680 without
    ("gb200-nvl72", 18, GroupShape(72, 1), None, 850.0),
    ("gb200-nvl72", 18, GroupShape(72, 1), "ring", 680.0),
    # stas00/ml-engineering: 8x B200 NVLS 838.0, ring 682.2 GB/s (nccl 2.27.7, 8 GiB)
    ("dgx-b200", 1, GroupShape(8, 1), None, 838.0),
    ("dgx-b200", 1, GroupShape(8, 1), "ring", 682.2),
    # 2 GB200 trays over MNNVL, 8 GPUs: 811 GB/s (lixueduan.com GB200 MNNVL nccl-test)
    ("gb200-nvl72", 2, GroupShape(8, 1), None, 811.0),
    # stas00/ml-engineering all_reduce_bench on 8x MI300X, 4 GiB: 312.9 GB/s (8 GPUs), 47.7 GB/s (2 GPUs)
    ("mi300x", 1, GroupShape(8, 1), None, 312.9),
    ("mi300x", 1, GroupShape(2, 1), None, 47.7),
])
def test_large_message_busbw_within_15_percent_of_published(preset, nodes, shape, algo, published):
    assert busbw_GBps(preset, nodes, shape, algo=algo) == pytest.approx(published, rel=0.15)


def test_nvl72_domain_view_and_group_shape():
    cluster = load_cluster("gb200-nvl72", 36)          # two racks, 4-GPU trays
    assert cluster.gpus_per_domain == 72 and cluster.num_domains == 2 and cluster.nodes_per_domain == 18
    view = domain_view(cluster)
    assert (view.num_nodes, view.gpus_per_node, view.nics_per_node) == (2, 72, 72)
    # a 72-GPU group stays on NVLink: one domain, NVLS; 144 GPUs cross InfiniBand between the racks
    assert plan_collective("all_reduce", 8 * GiB, cluster, GroupShape(72, 1)).algo == "nvls"
    plan = plan_collective("all_reduce", 8 * GiB, cluster, GroupShape(72, 2))
    assert plan.algo in ("nvls_tree", "ring", "tree")
    assert {p.tier for p in plan.phases} <= {"scale_up", "scale_out"}


def test_xgmi_mesh_bandwidth_follows_the_links_a_group_reaches():
    """7 links x 64 GB/s per direction x 0.75 (AMD ROCm blog): a pair has one link, 48 GB/s;
    four GPUs reach three, eight all seven: ring busbw 48, 144, 336 GB/s."""
    cluster = load_cluster("mi300x", 1)
    for p, expected in ((2, 48.0), (4, 144.0), (8, 336.0)):
        assert busbw_GBps("mi300x", 1, GroupShape(p, 1), 64 * GiB, algo="ring") == pytest.approx(expected, rel=0.01)
    # send_recv between two GPUs of the mesh: one link
    plan = plan_collective("send_recv", 1 * GiB, cluster, GroupShape(2, 1))
    assert plan.phases[0].bw_bytes_per_s == pytest.approx(48e9 * 1.0, rel=0.01)


def test_mesh_direct_beats_ring_on_latency_not_bandwidth():
    cluster = load_cluster("mi300x", 1)
    small = [plan_collective("all_reduce", 64 * 1024, cluster, GroupShape(8, 1), a) for a in ("ring", "direct")]
    assert small[1].time_s < small[0].time_s            # 2 hops instead of 14
    big = [plan_collective("all_reduce", 16 * GiB, cluster, GroupShape(8, 1), a) for a in ("ring", "direct")]
    assert big[1].time_s == pytest.approx(big[0].time_s, rel=0.01)  # same bytes on the same links
    with pytest.raises(Exception, match="--algo"):
        plan_collective("all_reduce", 1 * GiB, load_cluster("dgx-h100", 1), GroupShape(8, 1), "direct")


@pytest.mark.parametrize("preset,nodes,shape", [("mi300x", 1, GroupShape(8, 1)), ("mi300x", 1, GroupShape(4, 1, 2)),
                                                 ("gb200-nvl72", 18, GroupShape(72, 1)),
                                                 ("gb200-nvl72", 36, GroupShape(72, 2))])
def test_event_engine_equals_closed_form_without_contention(preset, nodes, shape):
    cluster = load_cluster(preset, nodes)
    for op in ("all_reduce", "all_gather"):
        plan = plan_collective(op, 1 * GiB, cluster, shape)
        assert simulate_collective(op, 1 * GiB, cluster, shape) == pytest.approx(plan.time_s, rel=1e-6)


def test_nvl72_topology_has_18_switch_chips_in_9_trays():
    g = build_topology(load_cluster("gb200-nvl72", 18))
    chips = [n for n, d in g.nodes(data=True) if d["kind"] == "nvswitch"]
    assert len(chips) == 18
    assert len({g.nodes[c]["tray"] for c in chips}) == 9
    gpus = [n for n, d in g.nodes(data=True) if d["kind"] == "gpu"]
    assert len(gpus) == 72
    # every GPU has one link bundle to every chip, 900 GB/s x 0.756 / 18 each
    assert all(g.out_degree(gpu) == 18 + 1 for gpu in gpus)  # 18 chips + its NIC
    assert g.edges[gpus[0], chips[0]]["bw"] == pytest.approx(900e9 * 0.756 / 18)


def test_mi300x_topology_is_a_full_mesh_without_switch():
    g = build_topology(load_cluster("mi300x", 1))
    gpus = [n for n, d in g.nodes(data=True) if d["kind"] == "gpu"]
    assert not [n for n, d in g.nodes(data=True) if d["kind"] == "nvswitch"]
    assert all(g.has_edge(a, b) for a in gpus for b in gpus if a != b)


def test_three_tier_and_rail_only():
    """Three tiers: all-to-all crossing pods slows by the spine oversubscription (Llama 3: 1:7);
    rail-only: no spine, but cross-rail bytes cross NVLink first (PXN)."""
    shape = GroupShape(8, 64)
    base = load_cluster("dgx-h100", 64, nodes_per_leaf=8)
    three = load_cluster("dgx-h100", 64, nodes_per_leaf=8, nodes_per_pod=32, pod_oversubscription=7.0)
    t_base = plan_collective("all_to_all", 8 * GiB, base, shape).time_s
    t_three = plan_collective("all_to_all", 8 * GiB, three, shape).time_s
    # 63 peer nodes, 32 of them in the other pod: the NIC drains 32/63 x 7 = 3.6x slower
    assert t_three / t_base == pytest.approx(32 / 63 * 7, rel=0.05)
    rail = load_cluster("dgx-h100", 64, topology="rail-only")
    # 512 ranks, 8 per node: 7/512 of S to node peers; of the 504/512 to other nodes 7/8 change rail first
    up_base = _a2a_ports(1.0, base, shape, 1.0)[0][0]
    up_rail = _a2a_ports(1.0, rail, shape, 1.0)[0][0]
    assert up_base == pytest.approx(7 / 512)
    assert up_rail == pytest.approx(7 / 512 + 504 / 512 * 7 / 8)
    oversub = load_cluster("dgx-h100", 64, nodes_per_leaf=8, oversubscription=4.0)
    rail_big = load_cluster("dgx-h100", 64, nodes_per_leaf=8, oversubscription=4.0, topology="rail-only")
    assert ports.spine_factor(oversub, shape, 1.0) == pytest.approx(0.25)
    assert ports.spine_factor(rail_big, shape, 1.0) == 1.0     # no spine to oversubscribe
    # the same bytes on the same NICs; the fat tree's network steps each pass two spine switches
    # more (2 x 0.13 us a step: algorithms.spine_hops), a whole number of steps
    t_rail = plan_collective("all_reduce", 8 * GiB, rail, shape).time_s
    t_tree = plan_collective("all_reduce", 8 * GiB, base, shape).time_s
    steps = (t_tree - t_rail) / (2 * base.scale_out.switch_latency_s)
    assert steps >= 1 and steps == pytest.approx(round(steps), abs=1e-6)
