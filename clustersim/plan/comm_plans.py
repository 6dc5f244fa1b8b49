"""Communicator shapes of one scenario, for the collective cost model.

Group shapes come from ``clustersim.parallel.placement`` (ranks ordered tp fastest, then cp, ep
inside dp, pp: Megatron's "tp-cp-ep-dp-pp"); a layout whose groups of one axis would differ in
shape from node to node is refused there with an InputError. Pipeline links are priced per stage
boundary, because with ``tp * cp * dp`` smaller than a node some boundaries stay inside a node
and others cross to the next.
"""

from __future__ import annotations

import functools

from clustersim.collectives import CollectivePlan, GroupShape, plan_collective
from clustersim.parallel.placement import axis_shape_for
from clustersim.scenario import Scenario


@functools.lru_cache(maxsize=4096)
def group_shape(scenario: Scenario, axis: str) -> GroupShape:
    """The shape of every group of ``axis`` (tp, cp, ep, dp, dp_cp)."""
    c = scenario.cluster
    s = axis_shape_for(scenario.parallel, c.gpus_per_domain, axis, c.gpus_per_domain > c.gpus_per_node)
    return GroupShape(s.ranks_per_node, s.num_nodes, s.concurrent_groups_per_node)


@functools.lru_cache(maxsize=4096)
def pp_link_shape(scenario: Scenario, rank: int) -> GroupShape:
    """The pair of GPUs linking pipeline rank ``rank`` to rank ``rank + 1`` (mod pp), with the
    number of such pairs that share a scale-up domain (all GPUs of a stage send to the next at once)."""
    par = scenario.parallel
    return link_shape(par.tp * par.cp * par.dp, par.pp, scenario.cluster.gpus_per_domain, rank)


@functools.lru_cache(maxsize=65536)
def link_shape(stride: int, pp: int, gpn: int, rank: int) -> GroupShape:
    """``pp_link_shape`` from the GPUs per pipeline stage (``stride``), the pipeline depth and the
    GPUs per scale-up domain."""
    a, b = rank * stride, ((rank + 1) % pp) * stride
    pairs_per_node = min(stride, gpn)
    if a // gpn == b // gpn:
        return GroupShape(2, 1, max(1, gpn // 2))
    return GroupShape(1, 2, pairs_per_node)


@functools.lru_cache(maxsize=65536)
def comm_plan(scenario: Scenario, op: str, size_bytes: float, axis: str) -> CollectivePlan:
    """The cost plan of collective ``op`` of ``size_bytes`` over one group of ``axis``."""
    return plan_collective(op, size_bytes, scenario.cluster, group_shape(scenario, axis))


@functools.lru_cache(maxsize=4096)
def pp_plan(scenario: Scenario, size_bytes: float, rank: int) -> CollectivePlan:
    """A pipeline transfer of ``size_bytes`` between pipeline ranks ``rank`` and ``rank + 1``."""
    return plan_collective("send_recv", size_bytes, scenario.cluster, pp_link_shape(scenario, rank))
