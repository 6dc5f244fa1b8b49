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
from clustersim.network.domain import domain_view

Edge = tuple[str, str]


def ecmp_index(key: str, n: int) -> int:
    """Deterministic ECMP choice among ``n`` equal-cost next hops."""
    return zlib.crc32(key.encode()) % n


def _parse_gpu(name: str) -> tuple[int, int]:
    node, idx = name.split(".")
    return int(node[1:]), int(idx[3:])


def _scale_up_hop(cluster: ClusterSpec, node: int, src: str, dst: str, flow: str) -> list[str]:
    """Intermediate hops between two GPUs of one domain: a switch, one switch chip (chosen by
    the flow hash, as NVLink spreads traffic over its links), or none on a direct mesh link."""
    if topo.is_mesh(cluster):
        return []
    chips = topo.num_switch_chips(cluster)
    if chips:
        return [topo.switch_chip(node, ecmp_index(f"{src}->{dst}#{flow}", chips))]
    return [topo.nvswitch(node)]


def scale_up_paths(cluster: ClusterSpec, src: str, dst: str) -> list[tuple[list[Edge], float]]:
    """Every path a transfer inside one domain is spread over, with its share of the bytes:
    one through a crossbar or a direct mesh link, 1/chips through each switch chip of an NVL72."""
    (sn, _), _ = _parse_gpu(src), _parse_gpu(dst)
    chips = topo.num_switch_chips(cluster)
    if not chips:
        hops = [src, *_scale_up_hop(cluster, sn, src, dst, ""), dst]
        return [(list(zip(hops[:-1], hops[1:], strict=True)), 1.0)]
    return [([(src, topo.switch_chip(sn, c)), (topo.switch_chip(sn, c), dst)], 1.0 / chips) for c in range(chips)]


def route(cluster: ClusterSpec, src: str, dst: str, flow: str = "") -> list[Edge]:
    """Edges from GPU ``src`` to GPU ``dst`` (names from clustersim.network.topology; the
    cluster is taken in its domain view, one "node" per scale-up domain)."""
    cluster = domain_view(cluster)
    if src == dst:
        return []
    (sn, si), (dn, di) = _parse_gpu(src), _parse_gpu(dst)
    if sn == dn:
        hops = [src, *_scale_up_hop(cluster, sn, src, dst, flow), dst]
        return list(zip(hops[:-1], hops[1:], strict=True))
    path = [src]
    rail = topo.rail_of(cluster, di)
    if topo.rail_of(cluster, si) != rail:  # PXN: hop to the local GPU on the destination's rail
        proxy = next(i for i in range(cluster.gpus_per_node) if topo.rail_of(cluster, i) == rail)
        path += [*_scale_up_hop(cluster, sn, src, topo.gpu(sn, proxy), flow), topo.gpu(sn, proxy)]
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
