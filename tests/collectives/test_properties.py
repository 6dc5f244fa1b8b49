"""Property tests: monotone in size, never below the latency term, never faster than the wires."""

import functools

from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.collectives import OPS, GroupShape, applicable_algos, plan_collective
from clustersim.hardware.load import load_cluster


@functools.cache
def _cluster(preset, nodes):
    return load_cluster(preset, nodes)


@st.composite
def setups(draw):
    preset = draw(st.sampled_from(["dgx-a100", "dgx-h100", "hgx-h200"]))
    per_node = draw(st.sampled_from([1, 2, 4, 8]))
    nodes = draw(st.integers(1, 64))
    concurrent = draw(st.integers(1, 8 // per_node))
    op = draw(st.sampled_from(OPS))
    if per_node * nodes < 2:
        per_node = 2
        concurrent = min(concurrent, 4)
    return op, _cluster(preset, nodes), GroupShape(per_node, nodes, concurrent)


sizes = st.integers(0, 2**36)


@settings(max_examples=150, deadline=None)
@given(setups(), sizes, sizes)
def test_time_grows_with_size(setup, a, b):
    op, cluster, shape = setup
    small, large = sorted((a, b))
    assert plan_collective(op, small, cluster, shape).time_s <= plan_collective(op, large, cluster, shape).time_s * (1 + 1e-12)


@settings(max_examples=150, deadline=None)
@given(setups(), sizes)
def test_never_below_the_latency_term(setup, size):
    op, cluster, shape = setup
    for algo in applicable_algos(op, cluster, shape):
        plan = plan_collective(op, size, cluster, shape, algo)
        latency = sum(p.latency_s for p in plan.phases)
        assert latency > 0
        assert plan.time_s >= latency
        assert plan.time_s >= plan_collective(op, 0, cluster, shape, algo).time_s


@settings(max_examples=150, deadline=None)
@given(setups(), st.integers(1, 2**36))
def test_no_port_carries_more_than_its_raw_rate(setup, size):
    op, cluster, shape = setup
    raw = {"scale_up": cluster.scale_up.bw_bytes_per_s, "scale_out": cluster.scale_out.bw_bytes_per_s}
    for algo in applicable_algos(op, cluster, shape):
        plan = plan_collective(op, size, cluster, shape, algo)
        for phase in plan.phases:
            assert phase.wire_bytes / (phase.time_s - phase.latency_s) <= raw[phase.tier]
        if shape.num_nodes == 1 and algo in ("ring", "rhd", "hierarchical", "direct", "pairwise", "p2p"):
            # busbw is the per-link rate of link-based algorithms: it cannot beat the NVLink wire
            assert plan.busbw_bytes_per_s <= raw["scale_up"]
