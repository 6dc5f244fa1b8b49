"""Network layer: topology graph, routing, alpha-beta point-to-point cost, fair-share links."""

from clustersim.network.links import FairShareLink

__all__ = ["FairShareLink"]
