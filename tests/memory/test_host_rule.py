"""A node's host memory holds what its own GPUs offload (clustersim.memory.host.host_memory): the
stages on its GPUs, each against its own capacity (a mixed cluster's group's)."""

from __future__ import annotations

from dataclasses import replace

from clustersim.memory.host import host_memory
from clustersim.scenario import scenario_from_dict

GiB = 2**30


def _cluster(host_gib: float):
    sc = scenario_from_dict({"model": {"preset": "llama2-7b"}, "cluster": {"preset": "dgx-a100", "nodes": 2}})
    return replace(sc.cluster, host_memory_bytes=int(host_gib * GiB))


def test_a_node_holding_several_stages_offloads_their_sum():
    """Eight one-GPU stages on one node offload the eight stages' bytes (120 GiB), not eight times
    the largest (8 x 20 = 160 GiB): a node of 128 GiB holds them."""
    per_stage = [20 * GiB, 10 * GiB, 15 * GiB, 15 * GiB, 15 * GiB, 15 * GiB, 10 * GiB, 20 * GiB]
    host = host_memory(per_stage, _cluster(128), gpus_per_stage=1)
    assert host.bytes_per_node == 120 * GiB and host.bytes_per_gpu == 20 * GiB and host.fits


def test_each_node_holds_its_own_stages():
    """Two-GPU stages, four per node: the node of stages 4-7 offloads 2 x (30 + 30 + 10 + 10) GiB
    and does not fit 150 GiB, the node of stages 0-3 (2 x 40 GiB) does."""
    per_stage = [10 * GiB] * 4 + [30 * GiB, 30 * GiB, 10 * GiB, 10 * GiB]
    host = host_memory(per_stage, _cluster(150), gpus_per_stage=2)
    assert host.bytes_per_node == 160 * GiB and not host.fits


def test_each_node_is_checked_against_its_own_host_memory_whatever_the_order():
    """Two one-node stages on nodes of 2 TiB and 256 GiB: the need of 270 GiB does not fit the
    256 GiB node, whichever node comes first."""
    per_stage = [270 * GiB // 8, 270 * GiB // 8]
    for caps in ((2048 * GiB, 256 * GiB), (256 * GiB, 2048 * GiB)):
        host = host_memory(per_stage, _cluster(2048), gpus_per_stage=8, node_capacity=lambda n, c=caps: c[n])
        assert host.capacity_bytes_per_node == 256 * GiB and not host.fits


def test_a_mixed_clusters_report_checks_each_group_against_its_own_host_memory():
    """`run`'s memory.host on a mixed cluster (StepReport.host): a group whose nodes have too little
    host memory decides, whether it comes first or second (it was group 0's memory for all)."""
    from clustersim import api
    from clustersim.plan.host_offload import host_dram_bw

    base = scenario_from_dict({"model": {"preset": "llama2-7b"},
                               "cluster": {"groups": [{"preset": "dgx-a100", "nodes": 2}, {"preset": "dgx-h100", "nodes": 2}],
                                           "nodes_per_leaf": 32},
                               "parallel": {"dp": 4, "pp": 8, "micro_batch": 1, "global_batch": 32,
                                            "offload": {"optimizer": True}}})
    need = api.estimate(base).host.bytes_per_node
    verdicts = []
    for low in (0, 1):
        groups = tuple(replace(g, cluster=replace(g.cluster, host_memory_bytes=need - GiB if i == low else 4 * need))
                       for i, g in enumerate(base.node_groups))
        report = api.estimate(replace(base, node_groups=groups))
        verdicts.append((report.host.verdict, report.host.capacity_bytes_per_node,
                         report.host_memory["adam_bw_bytes_per_s_per_node"] == host_dram_bw(groups[low].cluster)[0]))
    assert verdicts == [("does-not-fit", need - GiB, True)] * 2   # and the Adam bandwidth of its group
