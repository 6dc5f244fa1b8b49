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


def test_a_ring_across_leaves_thinner_than_one_nic_is_throttled_in_both_engines():
    """One node per leaf at 8:1 leaves a ring's crossing hop an eighth of a NIC: the event engine
    saw it (24.7 GB/s) and the closed form (and so `run`) did not (194.6 GB/s)."""
    cluster = load_cluster("dgx-h100", 4, nodes_per_leaf=1, oversubscription=8.0)
    shape = GroupShape(8, 4)
    thin = plan_collective("all_reduce", 2**32, cluster, shape, "ring").time_s
    assert simulate_collective("all_reduce", 2**32, cluster, shape, "ring") == pytest.approx(thin, rel=0.01)
    full = plan_collective("all_reduce", 2**32, load_cluster("dgx-h100", 4, nodes_per_leaf=1), shape, "ring").time_s
    assert thin > 7 * full
    # a leaf whose uplinks hold at least one NIC's rate carries the ring at full rate, as before
    wide = load_cluster("dgx-h100", 4, nodes_per_leaf=2, oversubscription=2.0)
    assert plan_collective("all_reduce", 2**32, wide, shape, "ring").time_s == pytest.approx(full)


def test_switch_latency_counts_where_the_job_spans_leaves():
    """`switch_latency_us` (docs/network.md: per further switch hop) was written onto graph edges
    that no timing read: 5,000 us per hop left every collective unchanged."""
    from dataclasses import replace

    from clustersim.collectives.algorithms import spine_hops
    one_leaf, two_leaves = load_cluster("dgx-h100", 4, nodes_per_leaf=4), load_cluster("dgx-h100", 8, nodes_per_leaf=4)
    assert spine_hops(one_leaf) == 0 and spine_hops(two_leaves) == 2
    slow = replace(two_leaves, scale_out=replace(two_leaves.scale_out, switch_latency_s=1e-3))
    shape = GroupShape(1, 8, 8)
    base = plan_collective("all_reduce", 4096.0, two_leaves, shape, "ring").time_s
    # a ring all-reduce over 8 nodes: 2 x 7 network steps, each 2 switches x 1 ms further
    assert plan_collective("all_reduce", 4096.0, slow, shape, "ring").time_s == pytest.approx(base + 14 * 2e-3, rel=1e-3)
