"""The cost plan of every collective one step names, on the communicator shapes of its scenario.

Group shapes come from ``clustersim.parallel.placement`` (ranks ordered tp fastest, then cp, ep
inside dp, pp: Megatron's "tp-cp-ep-dp-pp"); a layout whose groups of one axis would differ in
shape from node to node is refused there with an InputError. Pipeline links are priced per stage
boundary, because with ``tp * cp * dp`` smaller than a node some boundaries stay inside a node
and others cross to the next.

Beyond plain NCCL collectives (``comm_plan``: NCCL's algorithms on the group's shape), a layer's
ops name two kinds of transfer (``op_plan``):

* ``deepep``: DeepEP's normal dispatch/combine kernels (deepseek-ai/DeepEP, V1 docs/legacy.md):
  every token crosses the scale-out fabric once per destination node and is forwarded over
  NVLink inside it; both run at once ("asymmetric-domain bandwidth forwarding"), so the exchange
  takes as long as the busier of the rank's NIC share (``out_bytes``) and its NVLink port
  (``up_bytes``), plus the latency of an all-to-all over the EP group. DeepEP's measured
  bottleneck bandwidths (H800, CX7 400 Gb/s, DeepSeek-V3 settings: 43-58 GB/s RDMA for EP16-64,
  153-158 GB/s NVLink intranode) are what the fabric profiles' achievable rates give.
* ``host_copy``: a copy to or from host memory (clustersim.plan.host_offload).

Every function here is a pure function of the frozen scenario (or of integers) and keeps a
bounded ``functools.lru_cache``: a step asks for the same collective once per unit, and the
sweep's bounds for the same shapes across thousands of layouts.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from clustersim.collectives import CollectivePlan, GroupShape, Phase, plan_collective, ports
from clustersim.compute.ops import CommOp
from clustersim.hardware.spec import ClusterSpec
from clustersim.parallel.placement import axis_shape_for
from clustersim.plan.host_offload import host_copy_plan
from clustersim.scenario import Scenario


class Item(NamedTuple):
    """One collective of the step as the plan schedules it: its name (the timeline's label; empty
    where nobody reads it) and its cost plan."""

    name: str
    plan: CollectivePlan


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
    par = scenario.parallel
    return pp_link_plan(scenario.cluster, size_bytes, par.tp * par.cp * par.dp, par.pp, rank)


@functools.lru_cache(maxsize=4096)
def tied_embedding_plan(scenario: Scenario, size_bytes: float) -> CollectivePlan:
    """The all-reduce of ``size_bytes`` between the first and the last pipeline rank of one
    (tp, cp, dp) position: the pair that ``link_shape`` gives for the wrap-around boundary."""
    par, c = scenario.parallel, scenario.cluster
    return plan_collective("all_reduce", size_bytes, c, link_shape(par.tp * par.cp * par.dp, par.pp, c.gpus_per_domain,
                                                                   par.pp - 1))


def pp_link_plan(cluster: ClusterSpec, size_bytes: float, stride: int, pp: int, rank: int) -> CollectivePlan:
    """``pp_plan`` from the GPUs per pipeline stage (``stride``) and the pipeline depth: a
    send/recv between the pair of GPUs of ``link_shape`` (the sweep's bounds price every boundary
    of many layouts from these integers without building their scenarios)."""
    return plan_collective("send_recv", size_bytes, cluster, link_shape(stride, pp, cluster.gpus_per_domain, rank))


def op_plan(scenario: Scenario, op: CommOp) -> CollectivePlan:
    if op.collective == "host_copy":
        return host_copy_plan(scenario, op.size_bytes)
    if op.collective == "deepep":
        return deepep_plan(scenario, op.up_bytes, op.out_bytes, op.size_bytes)
    return comm_plan(scenario, op.collective, op.size_bytes, op.group)


@functools.lru_cache(maxsize=4096)
def deepep_plan(scenario: Scenario, up_bytes: float, out_bytes: float, size_bytes: float) -> CollectivePlan:
    shape = group_shape(scenario, "ep")
    lat = sum(ph.latency_s for ph in comm_plan(scenario, "all_to_all", size_bytes, "ep").phases)
    cluster = scenario.cluster
    cands = [("scale_up", up_bytes, ports.scale_up_bw(cluster))]
    if shape.num_nodes > 1:
        cross = ports.all_to_all_cross_fraction(cluster, shape)
        cands.append(("scale_out", out_bytes,
                      ports.nic_bw_per_rank(cluster, shape) * ports.spine_factor(cluster, shape, cross)))
    tier, wire, bw = max(cands, key=lambda c: (c[1] / c[2], c[0] == "scale_out"))
    return CollectivePlan("all_to_all", "deepep", size_bytes, shape, (Phase(tier, lat, wire, bw),))
