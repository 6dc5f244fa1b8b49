"""Routing: the directed edges a transfer crosses.

Rail-optimised routing as NCCL does it: inside a node through the NVSwitch; between nodes from
the GPU's rail NIC to the peer's NIC on the same rail, first moving the data over NVLink to the
local GPU on the destination's rail when the rails differ (NCCL PXN). Between leaf groups the
path climbs to a spine chosen by ECMP (a deterministic hash of the flow, as switches hash
5-tuples).
"""

from __future__ import annotations

import zlib

import networkx as nx

from clustersim.hardware.spec import ClusterSpec
from clustersim.network import topology as topo

Edge = tuple[str, str]


def ecmp_index(key: str, n: int) -> int:
    """Deterministic ECMP choice among ``n`` equal-cost next hops."""
    return zlib.crc32(key.encode()) % n


def _parse_gpu(name: str) -> tuple[int, int]:
    node, idx = name.split(".")
    return int(node[1:]), int(idx[3:])


def route(cluster: ClusterSpec, src: str, dst: str, flow: str = "") -> list[Edge]:
    """Edges from GPU ``src`` to GPU ``dst`` (names from clustersim.network.topology)."""
    if src == dst:
        return []
    (sn, si), (dn, di) = _parse_gpu(src), _parse_gpu(dst)
    if sn == dn:
        return [(src, topo.nvswitch(sn)), (topo.nvswitch(sn), dst)]
    path = [src]
    rail = topo.rail_of(cluster, di)
    if topo.rail_of(cluster, si) != rail:  # PXN: hop to the local GPU on the destination's rail
        proxy = next(i for i in range(cluster.gpus_per_node) if topo.rail_of(cluster, i) == rail)
        path += [topo.nvswitch(sn), topo.gpu(sn, proxy)]
    sg, dg = topo.leaf_group(cluster, sn), topo.leaf_group(cluster, dn)
    path += [topo.nic(sn, rail), topo.leaf(sg, rail)]
    if sg != dg:
        k = ecmp_index(f"{src}->{dst}#{flow}", topo.num_spines(cluster))
        path += [topo.spine(k), topo.leaf(dg, rail)]
    path += [topo.nic(dn, rail), dst]
    return list(zip(path[:-1], path[1:], strict=True))


def check_route(g: nx.DiGraph, edges: list[Edge]) -> None:
    """Every edge of a route must exist in the topology graph."""
    for e in edges:
        if not g.has_edge(*e):
            raise ValueError(f"route uses {e}, which the topology does not have")


def ecmp_routes(g: nx.DiGraph, src: str, dst: str) -> list[list[str]]:
    """All equal-cost (fewest-hop) paths in the graph: the set ECMP picks from (sorted)."""
    return sorted(nx.all_shortest_paths(g, src, dst))
