"""Alpha-beta cost of a point-to-point transfer (Hockney 1994): time = sum of hop latencies +
size / bottleneck bandwidth. Pure: takes the graph and a route, returns seconds."""

from __future__ import annotations

import networkx as nx

from clustersim.network.routing import Edge


def path_latency_s(g: nx.DiGraph, edges: list[Edge]) -> float:
    return sum(g.edges[e]["latency_s"] for e in edges)


def bottleneck_bw(g: nx.DiGraph, edges: list[Edge]) -> float:
    return min(g.edges[e]["bw"] for e in edges)


def p2p_time_s(size_bytes: float, g: nx.DiGraph, edges: list[Edge]) -> float:
    """alpha + size / beta over ``edges``; 0 for an empty route (same GPU)."""
    if not edges:
        return 0.0
    return path_latency_s(g, edges) + size_bytes / bottleneck_bw(g, edges)
