"""Communicator shapes of one scenario, for the collective cost model.

Ranks are ordered tp fastest, then cp, (ep inside) dp, pp (Megatron's "tp-cp-ep-dp-pp"), so
the group of an axis that holds rank 0 is an arithmetic progression; every other group of the
same axis is congruent to it, and ``gpus_per_node // ranks_per_node`` of them share a node.
"""

from __future__ import annotations

import functools

from clustersim.collectives import CollectivePlan, GroupShape, plan_collective
from clustersim.scenario import Scenario

AXES = ("tp", "cp", "ep", "dp", "dp_cp", "pp")


def _group_of_rank0(scenario: Scenario, axis: str) -> list[int]:
    par = scenario.parallel
    stride_size = {
        "tp": (1, par.tp),
        "cp": (par.tp, par.cp),
        "ep": (par.tp * par.cp, par.ep),  # experts are spread over the leading dp ranks of a stage
        "dp": (par.tp * par.cp, par.dp),
        "dp_cp": (par.tp, par.cp * par.dp),  # gradients are reduced over dp x cp (Megatron)
        "pp": (par.tp * par.cp * par.dp, par.pp),
    }
    stride, size = stride_size[axis]
    return [stride * i for i in range(size)]


@functools.lru_cache(maxsize=4096)
def group_shape(scenario: Scenario, axis: str) -> GroupShape:
    """The shape of every group of ``axis`` (the pipeline axis: a pair of neighbouring stages)."""
    ranks = _group_of_rank0(scenario, axis)
    if axis == "pp":
        ranks = ranks[:2]
    gpn = scenario.cluster.gpus_per_node
    nodes = len({r // gpn for r in ranks})
    per_node = len(ranks) // nodes
    concurrent = max(1, gpn // per_node)
    return GroupShape.from_ranks(ranks, gpn, concurrent_groups_per_node=concurrent)


@functools.lru_cache(maxsize=65536)
def comm_plan(scenario: Scenario, op: str, size_bytes: float, axis: str) -> CollectivePlan:
    """The cost plan of collective ``op`` of ``size_bytes`` over one group of ``axis``."""
    return plan_collective(op, size_bytes, scenario.cluster, group_shape(scenario, axis))
