"""Closed forms: one function per algorithm, returning the phases of one rank.

Notation: S = size_bytes (nccl-tests convention), n ranks, p = ranks per node, N nodes.
Pipelined algorithms (NCCL's ring, tree, NVLS-tree, direct all-to-all) move data on both tiers
at once, so their time is set by the slower port: they are one phase on the bottleneck tier.
Store-and-forward algorithms (hierarchical, recursive halving-doubling) are one phase per tier
visit, in order. Derivations: docs/network.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from clustersim.collectives import nccl_tuning as nt
from clustersim.collectives import ports
from clustersim.collectives.plan import GroupShape, Phase
from clustersim.hardware.spec import ClusterSpec

Port = tuple[float, float]  # (wire_bytes, bw_bytes_per_s) of one rank's port on one tier
Builder = Callable[[str, str, float, ClusterSpec, GroupShape], "tuple[Phase, ...] | None"]


def _hop(cluster: ClusterSpec, hw: str, algo: str, proto: str) -> float:
    """One algorithm step on hardware class ``hw``: NCCL's hwLat, plus whatever one-way latency
    the fabric has beyond the LL hop that table is built on (NVLink 0.6 us, PCI 1.0, NET 2.7).
    For NVLink and InfiniBand profiles this adds nothing; a TCP/Ethernet fabric (kernel sockets,
    15-30 us one way) or a calibrated profile with a measured latency pays it on every step; a
    calibrated fabric below the LL hop scales the table down in proportion."""
    fabric = cluster.scale_out if hw == nt.HW_NET else cluster.scale_up
    ll_hop = nt.HW_LAT_S[hw]["ring"]["LL"]
    extra = max(0.0, fabric.latency_s - ll_hop)
    if hw == nt.HW_NET:
        extra += spine_hops(cluster) * fabric.switch_latency_s
    # a fabric measured faster than NCCL's LL hop (a profile fitted to nccl-tests output) scales
    # the whole table by latency / LL hop; the shipped profiles sit at the LL hop or above
    scale = min(1.0, fabric.latency_s / ll_hop)
    return nt.HW_LAT_S[hw][algo][proto] * scale + extra


def spine_hops(cluster: ClusterSpec) -> int:
    """Switches beyond the leaf that a network step passes in a job spanning several leaves (up to
    a spine and down: 2; across pods, 2 more through the third tier). NCCL's NET hop latency is
    measured through one switch; each further one adds the fabric's ``switch_latency_us``. Every
    ring step waits for its slowest hop, the one crossing leaves (docs/network.md)."""
    if cluster.topology == "rail-only" or cluster.num_nodes <= cluster.nodes_per_leaf:
        return 0
    pod = cluster.nodes_per_pod
    return 4 if pod and cluster.num_nodes > pod else 2


def _pipelined(latency_s: float, up: Port | None, out: Port | None) -> tuple[Phase, ...]:
    """One phase on whichever tier's port takes longer (both run concurrently)."""
    cands = [(w / b if w else 0.0, tier, w, b) for tier, port in (("scale_up", up), ("scale_out", out))
             if port is not None for w, b in (port,)]
    _, tier, wire, bw = max(cands, key=lambda c: (c[0], c[1] == "scale_out"))
    return (Phase(tier, latency_s, wire, bw),)


def _log2i(x: int) -> int:
    return max(0, int(x).bit_length() - 1)


def _is_pow2(x: int) -> bool:
    return x >= 1 and (x & (x - 1)) == 0


def _ll128_ok(cluster: ClusterSpec, shape: GroupShape) -> bool:
    """tuning.cc enables LL128 only on NVLink intra-node paths and RDMA networks."""
    if shape.ranks_per_node > 1 and ports.scale_up_hw(cluster) != nt.HW_NVLINK:
        return False
    return not (shape.num_nodes > 1 and cluster.scale_out.kind == "ethernet")


def protocols_for(algo: str, cluster: ClusterSpec, shape: GroupShape) -> tuple[str, ...]:
    if algo in ("nvls", "nvls_tree", "rhd", "hierarchical", "pairwise"):
        return ("Simple",)
    if not _ll128_ok(cluster, shape):
        return ("LL", "Simple")
    return nt.PROTOCOLS


def _ring_latency(op: str, proto: str, cluster: ClusterSpec, shape: GroupShape) -> float:
    """tuning.cc ring latency: base + intra steps x intra hop + inter steps x network hop."""
    n, n_nodes = shape.num_ranks, shape.num_nodes
    if op == "all_reduce":
        nsteps, ninter = 2 * (n - 1), 2 * (n_nodes - 1)
    elif op in ("all_gather", "reduce_scatter"):
        nsteps, ninter = n - 1, n_nodes - 1
    else:  # broadcast, reduce: a chain of n hops, each at the hop cost of the slowest tier
        hw = ports.scale_up_hw(cluster) if n_nodes == 1 else nt.HW_NET
        algo_row = "tree" if proto == "Simple" else "ring"  # tuning.cc: Simple chunk latency
        return nt.base_lat(cluster.gpu.vendor, "ring", proto) + n * _hop(cluster, hw, algo_row, proto)
    intra = _hop(cluster, ports.scale_up_hw(cluster), "ring", proto)
    inter = _hop(cluster, nt.HW_NET, "ring", proto)
    if n_nodes > 1:
        intra = max(intra, nt.NET_OVERHEAD_S * (3 if proto == "Simple" else 1))
    lat = nt.base_lat(cluster.gpu.vendor, "ring", proto) + (nsteps - ninter) * intra + ninter * inter
    if op == "all_reduce" and n_nodes > 1 and proto == "Simple":
        lat *= nt.RING_PLATEAU_FACTOR
    return lat


def _ring_port_eff(proto: str, cluster: ClusterSpec, shape: GroupShape) -> tuple[float, float]:
    """(protocol efficiency, absolute cap in bytes/s) of a ring's bottleneck port."""
    cap = math.inf
    if proto == "LL":
        cap = nt.ll_max_bw(nt.gpu_arch(cluster.gpu.name), shape.num_nodes)
    return nt.RING_PROTO_EFF[proto], cap


def _ring_ports(wire_up: float, wire_out: float, eff: float, cap: float,
                cluster: ClusterSpec, shape: GroupShape) -> tuple[Port | None, Port | None]:
    up = out = None
    if shape.ranks_per_node > 1:
        up = (wire_up, min(ports.scale_up_bw(cluster, shape.ranks_per_node) * eff, cap))
    if shape.num_nodes > 1:
        out = (wire_out, min(ports.nic_bw_per_rank(cluster, shape) * eff * ports.spine_factor(cluster, shape, 0.0), cap))
    return up, out


def ring(op: str, proto: str, size: float, cluster: ClusterSpec, shape: GroupShape) -> tuple[Phase, ...] | None:
    """Ring (NCCL): all_reduce sends 2(n-1)/n S per rank, all_gather/reduce_scatter (n-1)/n S,
    broadcast/reduce S (a pipelined chain). Across nodes each ring enters and leaves every node
    once, so a node's NICs carry what one rank sends, spread over its p ranks' NICs, and NVLink
    carries the other (p-1)/p."""
    n, p = shape.num_ranks, shape.ranks_per_node
    factor = {"all_reduce": 2.0 * (n - 1) / n, "all_gather": (n - 1) / n,
              "reduce_scatter": (n - 1) / n, "broadcast": 1.0, "reduce": 1.0}.get(op)
    if factor is None:
        return None
    eff, cap = _ring_port_eff(proto, cluster, shape)
    # across nodes one rank per node and ring sends over its NIC instead of NVLink; NCCL rotates
    # that rank over the rings, so NVLink carries (p-1)/p of a rank's ring bytes
    up_share = 1.0 if shape.num_nodes == 1 else (p - 1) / p
    up, out = _ring_ports(factor * size * up_share, factor * size / p, eff, cap, cluster, shape)
    return _pipelined(_ring_latency(op, proto, cluster, shape), up, out)


def tree(op: str, proto: str, size: float, cluster: ClusterSpec, shape: GroupShape) -> tuple[Phase, ...] | None:
    """Double binary tree between nodes, chain inside a node (NCCL all_reduce).

    Inside a node every GPU sends S up (reduce) and S down (broadcast): 2S through its NVLink.
    Between nodes each of the two trees carries S/2; a node is inner in one tree and leaf in the
    other, so it sends 2S (N >= 3) or, on 2 nodes, S (sjeaugey, nccl#946, nccl#330: on 2 nodes
    the network carries half of what NVLink carries).
    """
    if op != "all_reduce":
        return None
    p, n_nodes = shape.ranks_per_node, shape.num_nodes
    if ports.is_mesh(cluster) and n_nodes == 1 and proto == "Simple":
        return None  # RCCL tuning.cc skips Tree/Simple inside one MI300X/MI355X node
    eff = nt.TREE_EFF
    cap = math.inf
    if proto == "LL":
        eff *= nt.TREE_LL_FACTOR
        cap = nt.ll_max_bw(nt.gpu_arch(cluster.gpu.name), n_nodes)
    elif proto == "LL128":
        eff *= nt.TREE_LL128_FACTOR_1NODE if n_nodes == 1 else nt.TREE_LL128_FACTOR_NNODES
    eff *= nt.tree_correction(proto, size)
    node_out = size if n_nodes == 2 else 2.0 * size
    up, out = _ring_ports(2.0 * size, node_out / p, eff, cap, cluster, shape)
    intra_hw = ports.scale_up_hw(cluster)
    lat = nt.base_lat(cluster.gpu.vendor, "tree", proto) + 2 * ((p - 1) * _hop(cluster, intra_hw, "tree", proto)
                                              + _log2i(n_nodes) * _hop(cluster, nt.HW_NET, "tree", proto))
    return _pipelined(lat, up, out)


def _nvls_base_latency(cluster: ClusterSpec, algo: str) -> float:
    """NCCL's fixed NVLS cost (tuning.cc, 23 us), or the one a calibrated profile measured."""
    return cluster.scale_up.nvls_latency_s or nt.BASE_LAT_S[algo]["Simple"]


def nvls(op: str, proto: str, size: float, cluster: ClusterSpec, shape: GroupShape) -> tuple[Phase, ...] | None:
    """NVLink SHARP all_reduce inside one node (NVSwitch gen3+).

    Each GPU reads its whole buffer into the switch's reducing loads (S out) and receives its
    reduced 1/p share, then multicasts that share and receives the other p-1: (p+1)/p S per
    direction, at the NVLS port rate (ports.nvls_bw), less NCCL's per-chunk synchronisation at
    medium sizes where NCCL shrinks the chunks (nccl_tuning.nvls_chunk_efficiency). algbw = nvls_bw x p/(p+1): 274 GB/s on
    8 H100, i.e. busbw 480 GB/s, as NVIDIA reports (nccl-tests#212, nccl#1455: 258..273 GB/s
    algbw for 5..8 GPUs, matching p/(p+1)).
    """
    p = shape.ranks_per_node
    if op != "all_reduce" or shape.num_nodes != 1 or p < 2 or ports.nvls_bw(cluster) <= 0:
        return None
    lat = _nvls_base_latency(cluster, "nvls")
    bw = ports.nvls_bw(cluster) * nt.nvls_chunk_efficiency(size, ports.nvls_bw(cluster))
    bw = min(bw, ports.nvls_max_algbw(cluster) * (p + 1) / p)  # switch multicast/reduce rate (NVL72)
    return (Phase("scale_up", lat, size * (p + 1) / p, bw),)


def nvls_tree(op: str, proto: str, size: float, cluster: ClusterSpec, shape: GroupShape) -> tuple[Phase, ...] | None:
    """NVLS inside each node, a tree between nodes (NCCL NVLS_TREE, H100 multi-node).

    Intra: as nvls. Inter: one head rank per channel sends the node's reduced data through the
    tree: S per node on 2 nodes, 2S beyond (tuning.cc: bwInter, halved for > 2 nodes), spread
    over the node's NICs, at NCCL's NVLS ratio 5/6.
    """
    p, n_nodes = shape.ranks_per_node, shape.num_nodes
    if op != "all_reduce" or n_nodes < 2 or p < 2 or ports.nvls_bw(cluster) <= 0:
        return None
    up = (size * (p + 1) / p, min(ports.nvls_bw(cluster), ports.nvls_max_algbw(cluster) * (p + 1) / p))
    node_out = size if n_nodes == 2 else 2.0 * size
    out = (node_out / p, ports.nic_bw_per_rank(cluster, shape) * nt.NVLS_EFF * ports.spine_factor(cluster, shape, 0.0))
    lat = _nvls_base_latency(cluster, "nvls_tree") + 2 * _log2i(n_nodes) * _hop(cluster, nt.HW_NET, "nvls_tree", "Simple")
    return _pipelined(lat, up, out)


def _step_lat(cluster: ClusterSpec, tier: str) -> float:
    hw = ports.scale_up_hw(cluster) if tier == "scale_up" else nt.HW_NET
    return _hop(cluster, hw, "ring", "Simple")


def _staged(size_pairs: list[tuple[str, float, int]], cluster: ClusterSpec, shape: GroupShape,
            cross: float = 0.0) -> tuple[Phase, ...]:
    """Sequential phases from (tier, wire_bytes, steps); base latency on the first."""
    phases = []
    for i, (tier, wire, steps) in enumerate(size_pairs):
        if steps == 0:
            continue
        if tier == "scale_up":
            bw = ports.scale_up_bw(cluster, shape.ranks_per_node)
        else:
            bw = ports.nic_bw_per_rank(cluster, shape) * ports.spine_factor(cluster, shape, cross)
        base = nt.base_lat(cluster.gpu.vendor, "ring", "Simple") if i == 0 else 0.0
        phases.append(Phase(tier, base + steps * _step_lat(cluster, tier), wire, bw))
    return tuple(phases)


def rhd(op: str, proto: str, size: float, cluster: ClusterSpec, shape: GroupShape) -> tuple[Phase, ...] | None:
    """Recursive halving (reduce-scatter) and doubling (all-gather), Thakur et al. 2005 §4.

    Partners at distance 1, 2, 4, ... ranks: the first log2(p) exchanges stay in the node and move
    S/2 + ... + S/p = (1 - 1/p) S; the next log2(N) cross nodes and move (1 - 1/N) S/p. Needs
    power-of-two p and N. All-reduce = reduce-scatter then all-gather.
    """
    p, n_nodes = shape.ranks_per_node, shape.num_nodes
    if op not in ("all_reduce", "all_gather", "reduce_scatter") or not (_is_pow2(p) and _is_pow2(n_nodes)):
        return None
    up = ("scale_up", (1 - 1 / p) * size, _log2i(p))
    out = ("scale_out", (1 - 1 / n_nodes) * size / p, _log2i(n_nodes))
    if op == "reduce_scatter":
        stages = [up, out]
    elif op == "all_gather":
        stages = [out, up]
    else:
        stages = [up, out, out, up]
    return _staged(stages, cluster, shape, cross=1.0)


def hierarchical(op: str, proto: str, size: float, cluster: ClusterSpec, shape: GroupShape) -> tuple[Phase, ...] | None:
    """Intra-node ring reduce-scatter, inter-node ring all-reduce of each 1/p shard across the
    p rails, intra-node ring all-gather (Horovod / Megatron 2D all-reduce)."""
    p, n_nodes = shape.ranks_per_node, shape.num_nodes
    if op not in ("all_reduce", "all_gather", "reduce_scatter"):
        return None
    intra = ("scale_up", (p - 1) / p * size, p - 1)
    if op == "all_reduce":
        inter = ("scale_out", 2 * (n_nodes - 1) / n_nodes * size / p, 2 * (n_nodes - 1))
        return _staged([intra, inter, intra], cluster, shape)
    inter = ("scale_out", (n_nodes - 1) / n_nodes * size / p, n_nodes - 1)
    return _staged([intra, inter] if op == "reduce_scatter" else [inter, intra], cluster, shape)


def _a2a_ports(size: float, cluster: ClusterSpec, shape: GroupShape, eff: float) -> tuple[Port | None, Port | None]:
    """Rail-only networks (no spine between rails): a byte for a peer on another rail first
    crosses the scale-up fabric to the local GPU on that rail (PXN), (p-1)/p of the inter-node bytes."""
    n, p = shape.num_ranks, shape.ranks_per_node
    up_wire = (p - 1) / n * size
    if cluster.topology == "rail-only" and shape.num_nodes > 1:
        up_wire += (n - p) / n * size * (p - 1) / p
    up = (up_wire, ports.scale_up_bw(cluster, p) * eff) if p > 1 else None
    out = None
    if shape.num_nodes > 1:
        cross = ports.all_to_all_cross_fraction(cluster, shape)
        out = ((n - p) / n * size,
               ports.nic_bw_per_rank(cluster, shape) * eff * ports.spine_factor(cluster, shape, cross))
    return up, out


def mesh_direct(op: str, proto: str, size: float, cluster: ClusterSpec, shape: GroupShape) -> tuple[Phase, ...] | None:
    """One-shot exchanges over an xGMI full mesh inside one domain (RCCL's direct/MSCCL kernels on
    MI300X: every GPU writes to all peers at once over its direct links).

    reduce_scatter: each rank sends S/p to each of its p-1 peers, (p-1)/p S in one step;
    all_gather: the same bytes, one step; all_reduce: reduce_scatter then all_gather, 2(p-1)/p S in
    two steps. Same bytes as the ring, at the group's mesh bandwidth, with 1 or 2 hop latencies
    instead of p-1 or 2(p-1).
    """
    if not ports.is_mesh(cluster) or shape.num_nodes != 1 or shape.ranks_per_node < 2:
        return None
    steps = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1}.get(op)
    if steps is None:
        return None
    p = shape.ranks_per_node
    bw = ports.scale_up_bw(cluster, p) * nt.RING_PROTO_EFF[proto]
    if proto == "LL":
        bw = min(bw, nt.ll_max_bw(nt.gpu_arch(cluster.gpu.name), 1))
    lat = nt.base_lat(cluster.gpu.vendor, "ring", proto) + steps * _hop(cluster, ports.scale_up_hw(cluster), "ring", proto)
    return (Phase("scale_up", lat, steps * (p - 1) / p * size, bw),)


def direct(op: str, proto: str, size: float, cluster: ClusterSpec, shape: GroupShape) -> tuple[Phase, ...] | None:
    """All-to-all with every send posted at once (NCCL alltoall = n grouped send/recv pairs).

    A rank sends S/n to each peer: (p-1)/n S over NVLink and (n-p)/n S over its NIC, at the
    same time. One message per peer costs at least NCCL's smallest hop latency (LL over NVLink,
    0.6 us), so latency grows with n. On an xGMI mesh, all_reduce, all_gather and reduce_scatter
    inside one domain also run direct (``mesh_direct``).
    """
    if op in ("all_reduce", "all_gather", "reduce_scatter"):
        return mesh_direct(op, proto, size, cluster, shape)
    if op != "all_to_all" or shape.num_ranks < 2:
        return None
    eff = nt.RING_PROTO_EFF[proto]
    up, out = _a2a_ports(size, cluster, shape, eff)
    tier_hw = nt.HW_NET if shape.num_nodes > 1 else ports.scale_up_hw(cluster)
    lat = (nt.base_lat(cluster.gpu.vendor, "ring", proto) + _hop(cluster, tier_hw, "ring", proto)
           + (shape.num_ranks - 1) * nt.HW_LAT_S[nt.HW_NVLINK]["ring"]["LL"])
    return _pipelined(lat, up, out)


def pairwise(op: str, proto: str, size: float, cluster: ClusterSpec, shape: GroupShape) -> tuple[Phase, ...] | None:
    """All-to-all in n-1 rounds, one peer per round (MPI pairwise exchange): same bytes as
    direct, n-1 full hop latencies."""
    if op != "all_to_all" or shape.num_ranks < 2:
        return None
    up, out = _a2a_ports(size, cluster, shape, 1.0)
    hw = nt.HW_NET if shape.num_nodes > 1 else ports.scale_up_hw(cluster)
    lat = nt.base_lat(cluster.gpu.vendor, "ring", "Simple") + (shape.num_ranks - 1) * _hop(cluster, hw, "ring", "Simple")
    return _pipelined(lat, up, out)


def p2p(op: str, proto: str, size: float, cluster: ClusterSpec, shape: GroupShape) -> tuple[Phase, ...] | None:
    """send_recv: every rank sends S to the next rank (nccl-tests sendrecv). Inside a node over
    NVLink; when the group spans nodes, the ranks at node boundaries go through their NIC."""
    if op != "send_recv" or shape.num_ranks < 2:
        return None
    eff = nt.RING_PROTO_EFF[proto]
    if shape.num_nodes > 1:
        tier, bw, hw = "scale_out", ports.nic_bw_per_rank(cluster, shape) * eff * ports.spine_factor(cluster, shape, 0.0), nt.HW_NET
    else:
        tier, bw, hw = "scale_up", ports.scale_up_link_bw(cluster) * eff, ports.scale_up_hw(cluster)
    lat = nt.base_lat(cluster.gpu.vendor, "ring", proto) + _hop(cluster, hw, "ring", proto)
    return (Phase(tier, lat, size, bw),)


BUILDERS: dict[str, Builder] = {
    "ring": ring, "tree": tree, "nvls": nvls, "nvls_tree": nvls_tree, "rhd": rhd,
    "hierarchical": hierarchical, "direct": direct, "pairwise": pairwise, "p2p": p2p,
}
ALGOS_BY_OP = {
    "all_reduce": ("ring", "tree", "nvls", "nvls_tree", "rhd", "hierarchical", "direct"),
    "all_gather": ("ring", "rhd", "hierarchical", "direct"),
    "reduce_scatter": ("ring", "rhd", "hierarchical", "direct"),
    "all_to_all": ("direct", "pairwise"),
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "send_recv": ("p2p",),
}
# What NCCL itself considers when it picks (tuning.cc / enqueue.cc): the others only on request.
AUTO_ALGOS_BY_OP = {  # direct exists for these three only on an xGMI mesh (RCCL)
    "all_reduce": ("ring", "tree", "nvls", "nvls_tree", "direct"),
    "all_gather": ("ring", "direct"),
    "reduce_scatter": ("ring", "direct"),
    "all_to_all": ("direct",),
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "send_recv": ("p2p",),
}
