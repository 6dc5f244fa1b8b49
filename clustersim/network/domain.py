"""The domain view of a cluster, which the collective model and the topology both read: one "node"
per scale-up domain (here, below both: the collective model imports the network, never the reverse).

The cost model has two tiers: the scale-up fabric (NVLink through NVSwitch, or an xGMI mesh)
and the scale-out network. On an 8-GPU server the scale-up domain is the node; on an NVL72
rack it is 18 compute trays of 4 GPUs that share one NVLink switch system. Collectives do not
see the tray boundary (GB200 NVL72: every GPU reaches every other over NVLink at the same rate,
NVIDIA GB200 NVL72 product page), so the model works on domains: ``domain_view`` returns the
cluster with ``gpus_per_node`` = GPUs per domain, the domain's NICs (every tray's NICs together)
and the leaf/pod sizes counted in domains. ``GroupShape.ranks_per_node`` is therefore the number
of a group's ranks inside one scale-up domain. For 8-GPU servers the view is the cluster itself.
"""

from __future__ import annotations

import functools
from dataclasses import replace

from clustersim.hardware.spec import ClusterSpec


@functools.lru_cache(maxsize=256)
def domain_view(cluster: ClusterSpec) -> ClusterSpec:
    """``cluster`` with one node per scale-up domain (identity when the domain is the node)."""
    per_domain = cluster.nodes_per_domain
    if cluster.gpus_per_domain == cluster.gpus_per_node:
        return cluster if not cluster.scale_up_domain else replace(cluster, scale_up_domain=0)
    return replace(
        cluster,
        num_nodes=cluster.num_domains,
        gpus_per_node=cluster.gpus_per_domain,
        nics_per_node=cluster.nics_per_node * per_domain,
        nodes_per_leaf=max(1, cluster.nodes_per_leaf // per_domain),
        nodes_per_pod=max(1, cluster.nodes_per_pod // per_domain) if cluster.nodes_per_pod else 0,
        scale_up_domain=0,
        node_power_w=cluster.node_power_w * per_domain,
        host_memory_bytes=cluster.host_memory_bytes * per_domain,
        host_memory_bw_bytes_per_s=cluster.host_memory_bw_bytes_per_s * per_domain,
    )
