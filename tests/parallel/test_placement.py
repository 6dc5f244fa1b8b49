"""Placement on nodes and group shapes; hand-checked cases plus properties over the shape table."""

from __future__ import annotations

import dataclasses

import pytest

from clustersim.errors import InputError
from clustersim.hardware.load import load_cluster
from clustersim.parallel.groups import AXES, axis_size, rank_groups
from clustersim.parallel.layout import ParallelLayout
from clustersim.parallel.placement import (
    AxisShape,
    axis_shape,
    axis_shape_for,
    place,
    pp_boundaries_cross_nodes,
    pp_peer_crosses_nodes,
    tp_spans_nodes,
)

from .shapes import SHAPES


def _cluster(nodes: int, gpus_per_node: int = 8):
    return dataclasses.replace(load_cluster("dgx-h100", nodes), gpus_per_node=gpus_per_node)


def test_place_is_block_placement() -> None:
    assert place(0, 8) == (0, 0)
    assert place(7, 8) == (0, 7)
    assert place(8, 8) == (1, 0)
    assert place(16383, 8) == (2047, 7)
    with pytest.raises(ValueError):
        place(-1, 8)


def test_llama3_405b_layout_shapes() -> None:
    # 2048 nodes x 8: tp8 dp128 pp16 (rank = tp_i + 8 dp_i + 1024 pp_i)
    layout = ParallelLayout(tp=8, dp=128, pp=16, ep=1)
    cluster = _cluster(2048)
    # TP: one whole node
    assert axis_shape(layout, cluster, "tp") == AxisShape(8, 1, 1)
    # DP: stride 8 = one member per node on 128 nodes; all 8 TP ranks of a node run their own DP group
    assert axis_shape(layout, cluster, "dp") == AxisShape(1, 128, 8)
    # PP: stride 1024 GPUs = 128 nodes apart, 16 nodes
    assert axis_shape(layout, cluster, "pp") == AxisShape(1, 16, 8)
    assert pp_peer_crosses_nodes(layout, cluster)
    assert not tp_spans_nodes(layout, cluster)


def test_small_node_shapes() -> None:
    # 1 node x 8: tp2 dp2 pp2: tp (0,1); dp (0,2); pp (0,4): all inside the node
    layout = ParallelLayout(tp=2, dp=2, pp=2)
    cluster = _cluster(1)
    assert axis_shape(layout, cluster, "tp") == AxisShape(2, 1, 4)
    assert axis_shape(layout, cluster, "dp") == AxisShape(2, 1, 4)
    assert axis_shape(layout, cluster, "pp") == AxisShape(2, 1, 4)
    assert not pp_peer_crosses_nodes(layout, cluster)
    assert pp_boundaries_cross_nodes(layout, cluster) == (False,)


def test_pp_boundaries_inside_and_across_nodes() -> None:
    # 2 nodes x 8, tp2 dp2 pp4: stage s = ranks 4s..4s+3; stages 0,1 on node 0, 2,3 on node 1
    layout = ParallelLayout(tp=2, dp=2, pp=4)
    assert pp_boundaries_cross_nodes(layout, _cluster(2)) == (False, True, False)
    assert pp_peer_crosses_nodes(layout, _cluster(2))
    assert pp_boundaries_cross_nodes(ParallelLayout(tp=8, dp=2), _cluster(2)) == ()


def test_tp_larger_than_node_is_flagged() -> None:
    layout = ParallelLayout(tp=16)
    cluster = _cluster(2)
    assert axis_shape(layout, cluster, "tp") == AxisShape(8, 2, 1)
    assert tp_spans_nodes(layout, cluster)


def test_uneven_groups_and_wrong_gpu_count_are_input_errors() -> None:
    # 24 GPUs, dp=3 with tp=1: dp groups (0,1,2) (3,4,5) (6,7,8): the third spans nodes 0 and 1
    with pytest.raises(InputError, match="dp groups"):
        axis_shape(ParallelLayout(dp=3, pp=8), _cluster(3), "dp")
    with pytest.raises(InputError, match="GPU count 16"):
        axis_shape(ParallelLayout(tp=8), _cluster(2), "tp")


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "n{}x{}-tp{}cp{}dp{}pp{}ep{}".format(*s))
def test_shape_properties(shape: tuple[int, ...]) -> None:
    nodes, gpn, tp, cp, dp, pp, ep = shape
    layout = ParallelLayout(tp=tp, cp=cp, dp=dp, pp=pp, ep=ep)
    for axis in AXES:
        s = axis_shape_for(layout, gpn, axis)
        assert s.num_ranks == axis_size(layout, axis)
        # every GPU of a node is in exactly one group of the axis
        assert s.ranks_per_node * s.concurrent_groups_per_node == min(gpn, layout.num_gpus)
        # brute force over every group and every node
        touching: dict[int, int] = {}
        for g in rank_groups(layout, axis):
            per_node: dict[int, int] = {}
            for r in g:
                per_node[r // gpn] = per_node.get(r // gpn, 0) + 1
            assert set(per_node.values()) == {s.ranks_per_node}
            assert len(per_node) == s.num_nodes
            for node in per_node:
                touching[node] = touching.get(node, 0) + 1
        assert set(touching.values()) == {s.concurrent_groups_per_node}
    assert (axis_shape_for(layout, gpn, "tp").num_nodes > 1) == (tp > gpn)
