"""A fabric's own one-way latency reaches the collective cost beyond NCCL's hop table."""

from __future__ import annotations

from clustersim.collectives import GroupShape, plan_collective
from clustersim.hardware.load import load_cluster


def test_tcp_fabric_pays_its_latency_on_every_network_step() -> None:
    ib = load_cluster("dgx-h100", 4)
    eth = load_cluster("dgx-h100", 4, scale_out="eth-100g")
    shape = GroupShape(1, 4, 8)  # one GPU per node: every ring step crosses the network
    small = 4096  # latency-bound
    t_ib = plan_collective("all_reduce", small, ib, shape, algo="ring").time_s
    t_eth = plan_collective("all_reduce", small, eth, shape, algo="ring").time_s
    # ring all-reduce on 4 ranks: 2 * (4 - 1) = 6 network steps, each 15 us (eth-100g one way)
    # - 2.7 us (NCCL's NET LL hop, what the table already holds) = 12.3 us more than on IB
    assert t_eth - t_ib >= 6 * 12.3e-6 * 0.99


def test_infiniband_matches_nccl_table_unchanged() -> None:
    ib = load_cluster("dgx-h100", 2)
    # the IB profile's latency equals NCCL's NET LL hop (2.7 us), so nothing is added
    assert ib.scale_out.latency_s == 2.7e-6
