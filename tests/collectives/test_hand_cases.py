"""Closed forms against arithmetic done by hand (constants: fabrics.yaml, nccl_tuning.py)."""

import pytest

from clustersim.collectives import GroupShape, busbw_factor, plan_collective
from clustersim.errors import InputError
from clustersim.hardware.load import load_cluster

GiB = 2**30


@pytest.fixture(scope="module")
def a100():
    return load_cluster("dgx-a100", 2)


@pytest.fixture(scope="module")
def h100():
    return load_cluster("dgx-h100", 2)


def test_ring_all_reduce_8xa100_1gib(a100):
    plan = plan_collective("all_reduce", GiB, a100, GroupShape(8, 1), "ring")
    assert plan.protocol == "Simple"
    # latency = baseLat 8.4 + 2(n-1)=14 steps x 3.4 us = 56.0 us
    # bytes   = 2 x 7/8 x 2^30 = 1879048192 B at 300 GB/s x 0.783 = 234.9 GB/s -> 7.99935e-3 s
    assert plan.time_s == pytest.approx(56.0e-6 + 1879048192 / 234.9e9, rel=1e-9)
    # busbw = S/t x 2(n-1)/n -> approaches 234.9 GB/s
    assert plan.busbw_bytes_per_s == pytest.approx(2**30 / plan.time_s * 1.75)
    assert 230e9 < plan.busbw_bytes_per_s < 234.9e9


def test_ring_all_reduce_small_uses_ll(a100):
    plan = plan_collective("all_reduce", 2**20, a100, GroupShape(8, 1), "ring")
    assert plan.protocol == "LL"
    # LL: 6.6 + 14 x 0.6 = 15.0 us; rate min(234.9 x 0.5, llMaxBw 87.7) = 87.7 GB/s
    # 1.75 x 1048576 = 1835008 B / 87.7e9 = 20.923e-6 -> 35.923 us
    assert plan.time_s == pytest.approx(15.0e-6 + 1835008 / 87.7e9, rel=1e-9)


def test_nvls_all_reduce_8xh100_1gib(h100):
    plan = plan_collective("all_reduce", GiB, h100, GroupShape(8, 1))
    assert (plan.algo, plan.protocol) == ("nvls", "Simple")
    # NVLS port = 450 x 0.822 x 5/6 = 308.25 GB/s; wire = (8+1)/8 x 2^30 = 1207959552 B; lat 23 us
    assert plan.time_s == pytest.approx(23e-6 + 1207959552 / 308.25e9, rel=1e-9)
    # algbw -> 308.25 x 8/9 = 274 GB/s, busbw -> 274 x 1.75 = 479.5 GB/s (NVIDIA: ~480)
    assert plan.busbw_bytes_per_s / 1e9 == pytest.approx(476.7, abs=0.5)


def test_tree_all_reduce_2_nodes_a100(a100):
    plan = plan_collective("all_reduce", GiB, a100, GroupShape(8, 2), "tree")
    # NVLink chain: 2 x 2^30 B per GPU at 234.9 x 0.92 = 216.108 GB/s -> 9.9378e-3 s
    # network: 2 nodes -> S per node / 8 rails at 25 x 0.96 x 0.92 = 22.08 GB/s -> 6.078e-3 s (hidden)
    # latency: baseLat 0 + 2 x (7 x 4.0 + log2(2)=1 x 14) = 84 us
    assert plan.phases[0].tier == "scale_up"
    assert plan.time_s == pytest.approx(84e-6 + 2 * 2**30 / 216.108e9, rel=1e-9)


def test_send_recv_between_nodes_h100(h100):
    plan = plan_collective("send_recv", GiB, h100, GroupShape(1, 2, 8))
    # Simple: 8.4 + NET hop 14 = 22.4 us; one rail NIC: 50 GB/s x 0.96 = 48 GB/s
    assert plan.time_s == pytest.approx(22.4e-6 + 2**30 / 48e9, rel=1e-9)
    assert plan.phases[0].tier == "scale_out"


def test_nics_shared_by_two_gpus_halve_the_rate():
    c = load_cluster("dgx-h100", 2, nics_per_node=4)
    plan = plan_collective("send_recv", GiB, c, GroupShape(1, 2, 8))
    # 8 GPUs on 4 NICs: 48 / 2 = 24 GB/s per GPU
    assert plan.phases[0].bw_bytes_per_s == pytest.approx(24e9)


def test_all_to_all_single_node(h100):
    plan = plan_collective("all_to_all", GiB, h100, GroupShape(8, 1))
    # each rank sends 7/8 of 1 GiB over NVLink at 369.9 GB/s (Simple)
    # latency: 8.4 + 3.4 + 7 peers x 0.6 = 16.0 us
    assert plan.time_s == pytest.approx(16.0e-6 + 7 / 8 * 2**30 / 369.9e9, rel=1e-9)
    # busbw = algbw x 7/8 -> the NVLink rate
    assert plan.busbw_bytes_per_s / 1e9 == pytest.approx(369.9, rel=0.01)


def test_oversubscribed_all_to_all_across_leaves():
    c = load_cluster("dgx-h100", 4, nodes_per_leaf=2, oversubscription=4.0)
    plan = plan_collective("all_to_all", GiB, c, GroupShape(1, 4, 8))
    # 4 ranks, 1 per node: 3/4 of S leaves the node; 2 of 3 peers on the other leaf (f = 2/3);
    # f x oversub = 8/3 > 1 -> NIC rate 48 / (8/3) = 18 GB/s
    assert plan.phases[0].bw_bytes_per_s == pytest.approx(18e9)
    assert plan.phases[0].wire_bytes == pytest.approx(0.75 * 2**30)


def test_hierarchical_phases(h100):
    plan = plan_collective("all_reduce", GiB, h100, GroupShape(8, 2), "hierarchical")
    assert [p.tier for p in plan.phases] == ["scale_up", "scale_out", "scale_up"]
    # RS: 7/8 S over NVLink; AR of S/8 across 2 nodes: 2 x 1/2 x S/8 over the rail NIC; AG: 7/8 S
    assert [p.wire_bytes for p in plan.phases] == pytest.approx([7 / 8 * 2**30, 2**30 / 8, 7 / 8 * 2**30])


def test_rhd_needs_powers_of_two():
    c = load_cluster("dgx-h100", 3)
    with pytest.raises(InputError):
        plan_collective("all_reduce", GiB, c, GroupShape(8, 3), "rhd")
    plan = plan_collective("all_reduce", GiB, c, GroupShape(8, 2), "rhd")
    # halving: S/2 + S/4 + S/8 in the node (3 steps), then S/16 to the other node, and back
    assert [p.wire_bytes for p in plan.phases] == pytest.approx([7 / 8 * 2**30, 2**30 / 16, 2**30 / 16, 7 / 8 * 2**30])


def test_busbw_factors():
    assert busbw_factor("all_reduce", 8) == 1.75
    assert busbw_factor("all_gather", 8) == 0.875
    assert busbw_factor("all_to_all", 4) == 0.75
    assert busbw_factor("broadcast", 8) == busbw_factor("send_recv", 2) == 1.0


def test_group_shape_from_ranks():
    s = GroupShape.from_ranks([0, 2, 4, 6, 8, 10, 12, 14], 8, concurrent_groups_per_node=2)
    assert s == GroupShape(4, 2, 2)
    assert s.num_ranks == 8 and s.active_gpus_per_node == 8
    assert GroupShape.from_ranks(range(0, 64, 8), 8) == GroupShape(1, 8)
    with pytest.raises(InputError):
        GroupShape.from_ranks([0, 1, 8], 8)  # 2 ranks on node 0, 1 on node 1
    with pytest.raises(InputError):
        GroupShape(0, 1)


def test_bad_inputs(a100):
    with pytest.raises(InputError, match="op"):
        plan_collective("allreduce", 1, a100, GroupShape(8, 1))
    with pytest.raises(InputError, match="--algo"):
        plan_collective("all_reduce", 1, a100, GroupShape(8, 1), "nvls")
    with pytest.raises(InputError):
        plan_collective("all_reduce", 1, a100, GroupShape(8, 3))  # cluster has 2 nodes
    with pytest.raises(InputError):
        plan_collective("all_reduce", 1, a100, GroupShape(8, 1, 2))  # 16 GPUs on an 8-GPU node


def test_single_rank_costs_nothing(a100):
    assert plan_collective("all_reduce", GiB, a100, GroupShape(1, 1)).time_s == 0.0


@pytest.mark.parametrize("p", [5, 6, 7, 8])
def test_nvls_algbw_follows_p_over_p_plus_1(h100, p):
    # large messages: algbw -> 308.25 x p/(p+1): 256.9, 264.2, 269.7, 274.0 GB/s
    # (NVIDIA/nccl#1455 measured about 258, 265, 270, 273 on 5..8 H100s)
    plan = plan_collective("all_reduce", 16 * GiB, h100, GroupShape(p, 1), "nvls")
    assert plan.algbw_bytes_per_s / 1e9 == pytest.approx(308.25 * p / (p + 1), rel=0.002)


def test_nvls_medium_sizes_use_smaller_chunks(h100):
    from clustersim.collectives import nccl_tuning as nt

    # NCCL NVLS chunk schedule with 16 channels: < 1 MiB 16 KiB, < 8 MiB 32 KiB, < 128 MiB 64 KiB
    assert [nt.nvls_chunk_bytes(s) for s in (2**19, 2**22, 2**26, 2**27)] == [16384, 32768, 65536, 131072]
    # 64 KiB chunks: transfer 65536 / (308.25e9 / 16) = 3.4017 us per chunk + 1.2 us sync
    eff64 = 3.4017 / (3.4017 + 1.2)
    eff128 = 6.8034 / (6.8034 + 1.2)
    assert nt.nvls_chunk_efficiency(2**26, 308.25e9) == pytest.approx(eff64 / eff128, rel=1e-4)
