"""The event engine (simpy, flows on the topology) against the closed forms."""

import pytest

from clustersim.collectives import GroupShape, applicable_algos, plan_collective, simulate_collective
from clustersim.collectives.lowering import lower, run_concurrently
from clustersim.collectives.plan import OPS
from clustersim.hardware.load import load_cluster

CASES = [
    ("dgx-a100", 4, GroupShape(8, 1)),
    ("dgx-a100", 4, GroupShape(8, 4)),
    ("dgx-h100", 4, GroupShape(8, 2)),
    ("dgx-h100", 4, GroupShape(4, 4, 2)),  # tp=2 DP groups: two groups share the node's NICs
    ("dgx-h100", 4, GroupShape(1, 4, 8)),  # tp=8 DP groups: one rail each
    ("hgx-h200", 4, GroupShape(2, 2, 4)),
]


@pytest.mark.parametrize(("preset", "nodes", "shape"), CASES)
def test_closed_form_equals_event_engine_for_every_algorithm(preset, nodes, shape):
    cluster = load_cluster(preset, nodes)
    for op in OPS:
        if op == "send_recv" and shape.num_ranks < 2:
            continue
        for algo in applicable_algos(op, cluster, shape):
            for size in (4096.0, 64 * 2**20):
                closed = plan_collective(op, size, cluster, shape, algo).time_s
                event = simulate_collective(op, size, cluster, shape, algo)
                assert event == pytest.approx(closed, rel=0.01), (op, algo, size)


def test_event_engine_sees_the_spine_oversubscription():
    # 4 nodes, 2 per leaf, 4:1 oversubscribed: all-to-all crosses the spine and slows down,
    # and the event engine (leaf uplinks charged with the symmetric load) agrees
    cluster = load_cluster("dgx-h100", 4, nodes_per_leaf=2, oversubscription=4.0)
    shape = GroupShape(8, 4)
    closed = plan_collective("all_to_all", 2**30, cluster, shape).time_s
    assert simulate_collective("all_to_all", 2**30, cluster, shape) == pytest.approx(closed, rel=0.01)
    full = load_cluster("dgx-h100", 4, nodes_per_leaf=2, oversubscription=1.0)
    assert closed > 2 * plan_collective("all_to_all", 2**30, full, shape).time_s


def test_two_collectives_on_the_same_links_each_take_about_twice_as_long():
    cluster = load_cluster("dgx-h100", 2)
    shape = GroupShape(1, 2, 8)  # DP across 2 nodes, one rail NIC per GPU
    plan = plan_collective("all_reduce", 2**30, cluster, shape, "ring")
    lowered = lower(plan, cluster)
    alone = run_concurrently([lowered])[0]
    both = run_concurrently([lowered, lowered])
    transfer = alone - sum(p.latency_s for p in plan.phases)
    for t in both:  # latency once, transfer twice
        assert t == pytest.approx(alone + transfer, rel=1e-6)
    assert both[0] / alone == pytest.approx(2.0, rel=0.01)


def test_large_cluster_uses_symmetry():
    # 1,024 GPUs: only the representative node's flows are simulated
    cluster = load_cluster("dgx-h100", 128)
    plan = plan_collective("all_reduce", 8 * 2**30, cluster, GroupShape(8, 128))
    flows = sum(len(f) for _, f in lower(plan, cluster))
    assert flows <= 16
    assert simulate_collective("all_reduce", 8 * 2**30, cluster, GroupShape(8, 128)) == pytest.approx(plan.time_s, rel=0.01)
