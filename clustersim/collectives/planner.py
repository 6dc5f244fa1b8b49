"""plan_collective: NCCL-style choice of algorithm and protocol by predicted time."""

from __future__ import annotations

import functools
import math

from clustersim.collectives.algorithms import ALGOS_BY_OP, AUTO_ALGOS_BY_OP, BUILDERS, protocols_for
from clustersim.collectives.plan import OPS, CollectivePlan, GroupShape
from clustersim.errors import InputError
from clustersim.hardware.spec import ClusterSpec
from clustersim.network.domain import domain_view


def check_shape(cluster: ClusterSpec, shape: GroupShape) -> None:
    """The group must fit the cluster: GPUs per scale-up domain and domains (``cluster`` is a domain view)."""
    if shape.active_gpus_per_node > cluster.gpus_per_node:
        raise InputError("group.ranks_per_node", shape.ranks_per_node,
                         f"ranks_per_node x concurrent_groups_per_node <= GPUs per scale-up domain "
                         f"({cluster.gpus_per_node})")
    if shape.num_nodes > cluster.num_nodes:
        raise InputError("group.num_nodes", shape.num_nodes,
                         f"at most the cluster's {cluster.num_nodes} scale-up domains")


def applicable_algos(op: str, cluster: ClusterSpec, shape: GroupShape, size_bytes: float = 1.0) -> tuple[str, ...]:
    """Algorithms of ``op`` that exist on this cluster for this group shape."""
    cluster = domain_view(cluster)
    return tuple(a for a in ALGOS_BY_OP[op]
                 if BUILDERS[a](op, "Simple", size_bytes, cluster, shape) is not None)


def _best(op: str, algos: tuple[str, ...], size: float, cluster: ClusterSpec, shape: GroupShape) -> CollectivePlan | None:
    best: CollectivePlan | None = None
    for algo in algos:  # fixed order: ties keep the earlier algorithm and protocol
        for proto in protocols_for(algo, cluster, shape):
            phases = BUILDERS[algo](op, proto, size, cluster, shape)
            if phases is None:
                continue
            plan = CollectivePlan(op, algo, size, shape, phases, proto)
            if best is None or plan.time_s < best.time_s:
                best = plan
    return best


@functools.lru_cache(maxsize=65536)
def plan_collective(op: str, size_bytes: float, cluster: ClusterSpec, shape: GroupShape,
                    algo: str | None = None) -> CollectivePlan:
    """Per-rank plan of one collective; NCCL's choice (least predicted time) unless ``algo``.

    ``size_bytes`` follows nccl-tests: the full buffer for all_reduce/broadcast/reduce and the
    gathered (total) size for all_gather/reduce_scatter/all_to_all. ``shape`` counts ranks per
    scale-up domain and domains (clustersim.network.domain). Pure and cached.
    """
    cluster = domain_view(cluster)
    if op not in OPS:
        raise InputError("op", op, OPS)
    if not isinstance(size_bytes, (int, float)) or isinstance(size_bytes, bool) or not math.isfinite(size_bytes) \
            or size_bytes < 0:
        raise InputError("size", size_bytes, "a finite number of bytes >= 0")
    check_shape(cluster, shape)
    size = float(size_bytes)
    if shape.num_ranks == 1:
        return CollectivePlan(op, algo or "none", size, shape, ())
    if op == "send_recv" and shape.num_ranks < 2:
        raise InputError("group", shape.num_ranks, "at least 2 ranks for send_recv")
    if algo is None:
        plan = _best(op, AUTO_ALGOS_BY_OP[op], size, cluster, shape)
    else:
        if algo not in ALGOS_BY_OP[op]:
            raise InputError("--algo", algo, ALGOS_BY_OP[op])
        plan = _best(op, (algo,), size, cluster, shape)
        if plan is None:
            raise InputError("--algo", algo, applicable_algos(op, cluster, shape) or ("none",))
    if plan is None:  # no NCCL algorithm applies (cannot happen for the ops above): fall back to any
        plan = _best(op, ALGOS_BY_OP[op], size, cluster, shape)
        assert plan is not None
    return plan
