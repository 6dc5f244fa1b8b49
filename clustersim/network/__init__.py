"""Network layer: topology graph, routing, alpha-beta point-to-point cost, fair-share links."""

from clustersim.network.alpha_beta import p2p_time_s
from clustersim.network.links import FairShareLink
from clustersim.network.routing import ecmp_routes, route
from clustersim.network.topology import build_topology

__all__ = ["FairShareLink", "build_topology", "ecmp_routes", "p2p_time_s", "route"]
