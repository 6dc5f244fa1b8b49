"""Placement of ranks on nodes and the shape of each axis's groups on the cluster.

Ranks fill nodes in order: rank ``r`` runs on node ``r // gpus_per_node``, local GPU
``r % gpus_per_node`` (torchrun / SLURM block placement, which Megatron assumes when it puts TP
innermost so that TP groups stay inside a node's NVLink domain; Narayanan et al. 2021,
arXiv 2104.04473, §3.3 "tensor model parallelism within a server"). Consecutive nodes form a
scale-up domain (18 compute trays of an NVL72 rack), so the same block placement fills domains.

A group's :class:`AxisShape` is what the collective cost model needs: how many members sit in
one scale-up domain (the node of an 8-GPU server; 72 GPUs of an NVL72 rack), how many domains it
spans, and how many groups of the same axis share each domain (they run the same collective at
the same time, so they share its NICs). ``axis_shape_for`` takes the domain size: groups up to
the domain stay on NVLink (TP 16 or EP 64 inside an NVL72 rack).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from clustersim.errors import InputError
from clustersim.hardware.spec import ClusterSpec
from clustersim.parallel.groups import stride_and_size
from clustersim.parallel.layout import ParallelLayout


@dataclass(frozen=True, slots=True)
class AxisShape:
    """The shape of every group of one axis on the nodes."""

    ranks_per_node: int  # members of one group inside one node
    num_nodes: int  # nodes one group spans
    concurrent_groups_per_node: int  # groups of this axis with members in one node

    @property
    def num_ranks(self) -> int:
        return self.ranks_per_node * self.num_nodes


def place(rank: int, gpus_per_node: int) -> tuple[int, int]:
    """``(node, local_gpu)`` of ``rank`` under block placement."""
    if gpus_per_node < 1:
        raise ValueError(f"gpus_per_node must be >= 1, got {gpus_per_node}")
    if rank < 0:
        raise ValueError(f"rank must be >= 0, got {rank}")
    return divmod(rank, gpus_per_node)


def _check_fits(layout: ParallelLayout, cluster: ClusterSpec) -> None:
    if layout.num_gpus != cluster.num_gpus:
        raise InputError(
            "parallel", f"tp({layout.tp}) * pp({layout.pp}) * cp({layout.cp}) * dp({layout.dp}) = {layout.num_gpus}",
            f"a product equal to the GPU count {cluster.num_gpus}")


def _members_on_node(node: int, start: int, stride: int, size: int, gpus_per_node: int) -> int:
    """Members ``start + k * stride`` (``0 <= k < size``) on ``node``."""
    lo, hi = node * gpus_per_node, (node + 1) * gpus_per_node - 1
    k_lo = max(0, -(-(lo - start) // stride))
    k_hi = min(size - 1, (hi - start) // stride)
    return max(0, k_hi - k_lo + 1)


def group_shape_on_nodes(start: int, stride: int, size: int, gpus_per_node: int) -> tuple[int, int] | None:
    """``(members per node, nodes)`` of the group ``range(start, start + size * stride, stride)``
    on nodes of ``gpus_per_node`` GPUs, or None when nodes hold different numbers of members.

    O(min(stride, gpus_per_node)), whatever the group size (a 100,000,000-node data-parallel group
    included): members ``stride >= gpus_per_node`` apart sit one per node; closer members touch
    every node from the first to the last, and the inner nodes' counts repeat with a period of
    ``stride / gcd(stride, gpus_per_node)`` nodes (node ``n`` starts at ``n * gpus_per_node``, whose
    offset from the progression repeats modulo ``stride``), so the first node, one period of inner
    nodes and the last node hold every count there is.
    """
    if stride >= gpus_per_node:
        return (1, size)
    first = start // gpus_per_node
    last = (start + (size - 1) * stride) // gpus_per_node
    period = stride // math.gcd(stride, gpus_per_node)
    nodes = {*range(first, min(first + period, last - 1) + 1), last}
    counts = {_members_on_node(n, start, stride, size, gpus_per_node) for n in nodes}
    if len(counts) != 1:
        return None
    return (counts.pop(), last - first + 1)


def axis_shape(layout: ParallelLayout, cluster: ClusterSpec, axis: str) -> AxisShape:
    """The shape shared by all groups of ``axis`` (see :func:`axis_shape_for`)."""
    _check_fits(layout, cluster)
    return axis_shape_for(layout, cluster.gpus_per_domain, axis, cluster.gpus_per_domain > cluster.gpus_per_node)


DENSE_AXES = ("tp", "cp", "dp_cp")           # the axes whose collectives every step may run
MOE_AXES = (*DENSE_AXES, "ep", "edp", "etp")  # and an MoE layer's


def groups_uniform(layout: ParallelLayout, cluster: ClusterSpec, axes: tuple[str, ...]) -> bool:
    """Whether every group of each axis in ``axes`` has one shape on ``cluster``'s scale-up domains,
    i.e. whether ``axis_shape`` times them rather than refusing the layout (the sweep searches only
    the layouts that a scenario could state: clustersim.sweep.space.shapes)."""
    for axis in axes:
        try:
            axis_shape(layout, cluster, axis)
        except InputError:
            return False
    return True


def _uniform_approximation(size: int, touched: int, gpus_per_node: int) -> tuple[int, int]:
    """(ranks per domain, domains) of a uniform group of ``size`` ranks spread over at least
    ``touched`` domains: the fewest domains that divide the group evenly and fit in a domain."""
    for d in range(max(1, touched), size + 1):
        if size % d == 0 and size // d <= gpus_per_node:
            return size // d, d
    return 1, size


def _domains_touched(start: int, stride: int, size: int, gpus_per_node: int) -> int:
    """Domains holding members of ``range(start, start + size * stride, stride)``: one per member
    when members are at least a domain apart, else every domain from the first to the last."""
    if stride >= gpus_per_node:
        return size
    return (start + (size - 1) * stride) // gpus_per_node - start // gpus_per_node + 1


@lru_cache(maxsize=256)
def axis_shape_for(layout: ParallelLayout, gpus_per_node: int, axis: str, approximate: bool = False) -> AxisShape:
    """The shape of the groups of ``axis`` with nodes (scale-up domains) of ``gpus_per_node`` GPUs.

    Raises InputError when groups of the axis differ in shape (possible only for layouts whose
    group strides do not align with the node size, e.g. dp=3 groups on 8-GPU nodes): the
    collective model assumes one shape per axis. With ``approximate`` (domains larger than a
    node: an NVL72 rack holds 72 GPUs, so 64-GPU pipeline stages straddle racks unevenly, as
    they do in real deployments) such groups are priced as the nearest uniform shape instead:
    as many domains as the most spread group touches (or the next count that divides the group),
    the ranks split evenly over them.
    """
    stride, size = stride_and_size(layout, axis)
    block = stride * size
    # every group is the progression range(start, start + block, stride) with start = b * block + i
    # (groups.rank_groups), so two groups whose starts agree modulo gpus_per_node are translations
    # by whole nodes and have the same shape: at most gpus_per_node distinct shapes to look at.
    # b * block and i only matter modulo gpus_per_node, so b and i need not run further than that.
    shapes: set[tuple[int, int] | None] = set()
    seen_offsets: set[int] = set()
    for b in range(min(layout.num_gpus // block, gpus_per_node)):
        for i in range(min(stride, gpus_per_node)):
            start = b * block + i
            offset = start % gpus_per_node
            if offset in seen_offsets:
                continue
            seen_offsets.add(offset)
            shapes.add(group_shape_on_nodes(start, stride, size, gpus_per_node))
        if len(seen_offsets) == gpus_per_node:
            break
    if approximate and (len(shapes) != 1 or None in shapes):
        # O(gpus_per_node) like the loop above: groups whose starts agree modulo the domain size
        # touch the same number of domains
        touched = max(_domains_touched(b * block + i, stride, size, gpus_per_node)
                      for b in range(min(layout.num_gpus // block, gpus_per_node))
                      for i in range(min(stride, gpus_per_node)))
        ranks_per_node, num_nodes = _uniform_approximation(size, touched, gpus_per_node)
        concurrent = max(1, min(gpus_per_node, layout.num_gpus) // ranks_per_node)
        return AxisShape(ranks_per_node=ranks_per_node, num_nodes=num_nodes, concurrent_groups_per_node=concurrent)
    if len(shapes) != 1 or None in shapes:
        raise InputError(
            "parallel", f"{axis} groups of {layout.tp}x{layout.cp}x{layout.dp}x{layout.pp} (tp x cp x dp x pp)"
                        f" on nodes of {gpus_per_node} GPUs",
            f"a layout whose {axis} groups all have the same shape on the nodes "
            "(make the GPU count per node a multiple or divisor of each group stride)")
    ranks_per_node, num_nodes = shapes.pop()  # type: ignore[misc]
    # the groups partition the ranks and each has ranks_per_node members on every node it touches,
    # so a node's GPUs (fewer when the whole job is smaller than a node) split into equal groups
    concurrent = min(gpus_per_node, layout.num_gpus) // ranks_per_node
    return AxisShape(ranks_per_node=ranks_per_node, num_nodes=num_nodes, concurrent_groups_per_node=concurrent)


def pp_boundaries_cross_nodes(layout: ParallelLayout, cluster: ClusterSpec) -> tuple[bool, ...]:
    """For each boundary between pipeline stage ``s`` and ``s + 1`` (``pp - 1`` entries): whether the
    send/recv between neighbouring ranks leaves the scale-up domain. Stage ``s`` holds ranks
    ``s * S .. (s + 1) * S - 1`` with stride ``S = tp * cp * dp``; the boundary is the same for
    every rank of the stage when ``S`` is a multiple or divisor of the domain size."""
    _check_fits(layout, cluster)
    stride = layout.tp * layout.cp * layout.dp
    gpn = cluster.gpus_per_domain
    out = []
    for s in range(layout.pp - 1):
        crosses = any((r // gpn) != ((r + stride) // gpn) for r in range(s * stride, (s + 1) * stride))
        out.append(crosses)
    return tuple(out)


def pp_peer_crosses_nodes(layout: ParallelLayout, cluster: ClusterSpec) -> bool:
    """Whether the pipeline neighbour of some rank sits on another node (False when pp = 1)."""
    return any(pp_boundaries_cross_nodes(layout, cluster))


def tp_spans_nodes(layout: ParallelLayout, cluster: ClusterSpec) -> bool:
    """TP larger than a scale-up domain: allowed, but its collectives then cross the scale-out fabric."""
    return axis_shape(layout, cluster, "tp").num_nodes > 1
