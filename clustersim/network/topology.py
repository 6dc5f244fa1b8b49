"""The cluster as a directed networkx graph: GPUs, NVSwitch, NICs, leaf (rail) and spine switches.

The graph is built on the domain view (clustersim.network.domain): a "node" here is one
scale-up domain. Its GPUs sit on one logical NVSwitch (the NVSwitch chips of a DGX/HGX board act
as one non-blocking crossbar: DGX A100 user guide, DGX H100 user guide), or, when the fabric
names its ``switch_chips``, on that many switch chips in ``switch_trays`` trays with one link
bundle from every GPU to every chip (GB200 NVL72: 18 NVLink switch chips in 9 switch trays, each
GPU's 18 NVLink 5 links one per chip; NVIDIA GB200 NVL72 product page and DGX GB200 user guide),
or, for an xGMI fabric, on a full mesh of direct GPU-to-GPU links with no switch (AMD MI300X
platform: 7 links per GPU). GPU ``i`` reaches NIC
``i * nics_per_node // gpus_per_node`` over PCIe. The scale-out network is rail-optimised (DGX
SuperPOD reference architectures): NIC ``r`` of every node in leaf group ``g`` (``nodes_per_leaf``
consecutive nodes) plugs into leaf switch ``leaf{g}.rail{r}``; each leaf has
``nodes_per_leaf / oversubscription`` ports of uplink capacity spread evenly over the spines.

Each directed edge carries ``bw`` (achievable bytes/s: raw rate x fabric efficiency), ``latency_s``
and ``tier``. Node names are strings, so graphs compare and print deterministically.
"""

from __future__ import annotations

import functools
import math

import networkx as nx

from clustersim.hardware.spec import ClusterSpec
from clustersim.network.domain import domain_view


def gpu(node: int, i: int) -> str:
    return f"n{node}.gpu{i}"


def nvswitch(node: int) -> str:
    return f"n{node}.nvsw"


def switch_chip(node: int, chip: int) -> str:
    return f"n{node}.nvsw{chip}"


def num_switch_chips(cluster: ClusterSpec) -> int:
    """Switch chips modelled one by one (0: one logical crossbar, or no switch on a mesh)."""
    return cluster.scale_up.switch_chips if cluster.scale_up.kind == "nvswitch" and cluster.scale_up.switch_chips > 1 else 0


def is_mesh(cluster: ClusterSpec) -> bool:
    return cluster.scale_up.kind == "xgmi"


def mesh_link_bw(cluster: ClusterSpec) -> float:
    """Achievable bandwidth of one direct xGMI link (bundle / links, efficiency applied)."""
    up = cluster.scale_up
    return up.effective_bw_bytes_per_s / max(1, up.links_per_gpu)


def nic(node: int, r: int) -> str:
    return f"n{node}.nic{r}"


def leaf(group: int, rail: int) -> str:
    return f"leaf{group}.rail{rail}"


def spine(k: int) -> str:
    return f"spine{k}"


def rail_of(cluster: ClusterSpec, i: int) -> int:
    """The NIC (rail) that GPU ``i`` of a node uses."""
    return i * cluster.nics_per_node // cluster.gpus_per_node


def leaf_group(cluster: ClusterSpec, node: int) -> int:
    return node // cluster.nodes_per_leaf


def num_leaf_groups(cluster: ClusterSpec) -> int:
    return -(-cluster.num_nodes // cluster.nodes_per_leaf)


def num_spines(cluster: ClusterSpec) -> int:
    """Spines of a two-level fat tree: one per leaf uplink port (nodes_per_leaf / oversubscription)."""
    if num_leaf_groups(cluster) <= 1:
        return 0
    return max(1, math.ceil(cluster.nodes_per_leaf / cluster.oversubscription))


def uplink_bw(cluster: ClusterSpec) -> float:
    """Total leaf-to-spine capacity of one leaf (bytes/s per direction)."""
    return cluster.nodes_per_leaf * cluster.scale_out.effective_bw_bytes_per_s / cluster.oversubscription


def build_topology(cluster: ClusterSpec) -> nx.DiGraph:
    """Directed graph of the whole cluster, one node per scale-up domain (cached per cluster spec)."""
    return _build(domain_view(cluster))


@functools.lru_cache(maxsize=4)
def _build(cluster: ClusterSpec) -> nx.DiGraph:
    """Directed graph of a domain-view cluster.

    Edges are collected in lists and added in bulk: 16,384 GPUs (130k edges) build in well
    under a second.
    """
    up, out = cluster.scale_up, cluster.scale_out
    up_bw, out_bw = up.effective_bw_bytes_per_s, out.effective_bw_bytes_per_s
    pcie_bw = cluster.pcie.effective_bw_bytes_per_s if cluster.pcie else math.inf
    nodes: list[tuple[str, dict]] = []
    edges: list[tuple[str, str, dict]] = []

    def both(a: str, b: str, bw: float, lat_ab: float, lat_ba: float, tier: str) -> None:
        edges.append((a, b, {"bw": bw, "latency_s": lat_ab, "tier": tier}))
        edges.append((b, a, {"bw": bw, "latency_s": lat_ba, "tier": tier}))

    chips = num_switch_chips(cluster)
    per_tray = max(1, chips // max(1, up.switch_trays)) if chips else 0
    for node in range(cluster.num_nodes):
        sw, grp = nvswitch(node), leaf_group(cluster, node)
        if chips:
            for c in range(chips):
                nodes.append((switch_chip(node, c), {"kind": "nvswitch", "node": node, "chip": c, "tray": c // per_tray}))
        elif not is_mesh(cluster):
            nodes.append((sw, {"kind": "nvswitch", "node": node}))
        for i in range(cluster.gpus_per_node):
            nodes.append((gpu(node, i), {"kind": "gpu", "node": node, "index": i}))
            # latency of the whole NVLink switch traversal is charged on the way in
            if chips:
                for c in range(chips):
                    both(gpu(node, i), switch_chip(node, c), up_bw / chips, up.latency_s, 0.0, "scale_up")
            elif is_mesh(cluster):
                for j in range(i + 1, cluster.gpus_per_node):
                    both(gpu(node, i), gpu(node, j), mesh_link_bw(cluster), up.latency_s, up.latency_s, "scale_up")
            else:
                both(gpu(node, i), sw, up_bw, up.latency_s, 0.0, "scale_up")
            # GPUDirect RDMA over PCIe; its latency is part of NCCL's network hop latency
            both(gpu(node, i), nic(node, rail_of(cluster, i)), pcie_bw, 0.0, 0.0, "pcie")
        for r in range(cluster.nics_per_node):
            nodes.append((nic(node, r), {"kind": "nic", "node": node, "rail": r}))
            nodes.append((leaf(grp, r), {"kind": "leaf", "group": grp, "rail": r}))
            # NCCL's network hop latency (RDMA + proxy) is charged leaving the NIC
            both(nic(node, r), leaf(grp, r), out_bw, out.latency_s, 0.0, "scale_out")
    spines = num_spines(cluster)
    if spines:
        per_link = uplink_bw(cluster) / spines
        for k in range(spines):
            nodes.append((spine(k), {"kind": "spine"}))
            for grp in range(num_leaf_groups(cluster)):
                for r in range(cluster.nics_per_node):
                    both(leaf(grp, r), spine(k), per_link, out.switch_latency_s, out.switch_latency_s, "scale_out")
    g = nx.DiGraph(name=cluster.name)
    g.add_nodes_from(nodes)
    g.add_edges_from(edges)
    return g
