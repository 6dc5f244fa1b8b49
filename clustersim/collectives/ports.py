"""Per-rank port bandwidths of a group on a cluster: the closed forms' view of the topology.

The cluster here is the domain view (clustersim.network.domain): a "node" is one scale-up
domain. Scale-up through NVLink switches (an 8-GPU NVSwitch board or an NVL72 rack's switch
trays) is a full crossbar: every GPU has its whole NVLink bundle whatever the other GPUs do.
An xGMI mesh (AMD MI300X/MI325X/MI355X platforms) has no switch: each GPU has one direct link
to each of its peers (7 on an 8-GPU board), so a group of p GPUs inside the mesh can use only
the p - 1 links to its members: 1/7 of the bundle for a pair, all of it for all eight (AMD ROCm
blog "Understanding RCCL Bandwidth and xGMI Performance on AMD Instinct MI300X", 2025: "each
GPU is connected to its seven peer GPUs via xGMI links, forming a fully connected mesh").
RCCL builds its rings so that each ring step uses one link, and runs one ring per link.
Scale-out is rail-optimised: every GPU uses its own rail NIC (NCCL's PXN / rail-local NIC
choice); GPUs share a NIC only when a node has fewer NICs than active GPUs. One GPU does not
spread one flow over several NICs (nccl-tests#232: 1 H100 with 4 NICs reaches about one NIC's
bandwidth).
"""

from __future__ import annotations

from clustersim.collectives.nccl_tuning import HW_NVLINK, HW_PCI, HW_XGMI, NVLS_EFF
from clustersim.collectives.plan import GroupShape
from clustersim.hardware.spec import ClusterSpec


def is_mesh(cluster: ClusterSpec) -> bool:
    return cluster.scale_up.kind == "xgmi"


def scale_up_bw(cluster: ClusterSpec, ranks_per_node: int | None = None) -> float:
    """Achievable per-GPU, per-direction scale-up bandwidth (bytes/s) of a group with
    ``ranks_per_node`` members in the domain (None: the whole domain). On an xGMI mesh only the
    links to the group's other members carry its traffic."""
    bw = cluster.scale_up.effective_bw_bytes_per_s
    links = cluster.scale_up.links_per_gpu
    if is_mesh(cluster) and links:
        peers = (cluster.gpus_per_node if ranks_per_node is None else ranks_per_node) - 1
        return bw * max(1, min(peers, links)) / links
    return bw


def scale_up_link_bw(cluster: ClusterSpec) -> float:
    """One point-to-point path: a single xGMI link on a mesh, the whole NVLink bundle through a switch."""
    return scale_up_bw(cluster, 2)


def scale_up_hw(cluster: ClusterSpec) -> str:
    """NCCL's hardware class of the intra-node path (nvlink, xgmi or pci) for its latency table."""
    if is_mesh(cluster):
        return HW_XGMI
    return HW_NVLINK if cluster.scale_up.kind in ("nvswitch", "nvlink") else HW_PCI


def nvls_bw(cluster: ClusterSpec) -> float:
    """Per-GPU NVLS port bandwidth: the profile's nvls_bw, else NVLink effective x 5/6.

    5/6 is NCCL's NVLS ratio (tuning.cc); 370 GB/s x 5/6 = 308 GB/s on NVLink4 gives the
    measured 8-GPU NVLS all-reduce algbw ~275 GB/s once the (n+1)/n traffic is applied
    (sjeaugey, nccl-tests#212).
    """
    fab = cluster.scale_up
    if not fab.nvls:
        return 0.0
    return fab.nvls_bw_bytes_per_s or fab.effective_bw_bytes_per_s * NVLS_EFF


def nvls_max_algbw(cluster: ClusterSpec) -> float:
    """The profile's cap on NVLS all-reduce algbw (the switch's multicast/reduction rate), inf if none."""
    cap = cluster.scale_up.nvls_max_algbw_bytes_per_s
    return cap if cap > 0 else float("inf")


def nic_bw_per_rank(cluster: ClusterSpec, shape: GroupShape) -> float:
    """Scale-out bandwidth one rank gets: its share of the node's NICs (bytes/s per direction)."""
    active = min(shape.active_gpus_per_node, cluster.gpus_per_node)
    share = min(1.0, cluster.nics_per_node / active)
    bw = cluster.scale_out.effective_bw_bytes_per_s * share
    if cluster.pcie is not None:  # the GPU reaches its NIC over PCIe (GPUDirect RDMA)
        bw = min(bw, cluster.pcie.effective_bw_bytes_per_s)
    return bw


def leaves_spanned(cluster: ClusterSpec, shape: GroupShape) -> int:
    return -(-shape.num_nodes // cluster.nodes_per_leaf)


def spine_factor(cluster: ClusterSpec, shape: GroupShape, cross_fraction: float) -> float:
    """Bandwidth factor for traffic of which ``cross_fraction`` crosses the spine layer.

    A leaf with ``oversubscription`` : 1 has 1/oversubscription of its downlink capacity
    towards the spines. When every node of the leaf sends the same pattern (symmetric
    collectives), a NIC's cross-leaf bytes f x W drain at 1/oversubscription of its rate while
    its other bytes use the rest (flow-level max-min sharing), so its W bytes take
    W / B x max(1, f x oversubscription).

    Three tiers (``nodes_per_pod``): bytes that also leave the pod cross the spine uplinks,
    which have 1/pod_oversubscription of the spines' downlink capacity, so a NIC's share there
    is 1/(oversubscription x pod_oversubscription) (Llama 3, arXiv 2407.21783 §3.3.1: full
    bisection inside 3,072-GPU pods, 1:7 between pods). The fraction crossing pods is taken
    as for leaves: the group's nodes beyond one pod over all its other nodes (at most the
    fraction crossing leaves).
    Rail-only networks have no spines: every NIC reaches its rail peers at full rate.
    """
    if cluster.topology == "rail-only":
        return 1.0
    factor = 1.0
    if cluster.oversubscription > 1.0:
        factor = max(factor, leaf_uplink_share(cluster, shape, cross_fraction) * cluster.oversubscription)
    pod = cluster.nodes_per_pod
    if pod and shape.num_nodes > pod and cluster.pod_oversubscription > 1.0:
        cross_pod = max(min(cross_fraction, (shape.num_nodes - pod) / max(1, shape.num_nodes - 1)), 1.0 / pod)
        factor = max(factor, cross_pod * cluster.oversubscription * cluster.pod_oversubscription)
    return 1.0 / factor


def leaf_uplink_share(cluster: ClusterSpec, shape: GroupShape, cross_fraction: float) -> float:
    """Share of one NIC's stream of this group that its leaf's uplinks carry, when every node of
    the leaf sends the same pattern: 0 for a group inside one leaf (or on a rail-only network);
    else ``cross_fraction``, and never less than ``1 / nodes_per_leaf``: at least one node of the
    leaf sends its whole stream across (a ring's one crossing hop per leaf, which
    ``cross_fraction`` 0 stands for). ``spine_factor`` prices it against the leaf's uplinks
    (1 / oversubscription per node); the shared fabric (clustersim.engine.cosim) charges it as
    each job's demand on them."""
    if cluster.topology == "rail-only" or shape.num_nodes <= cluster.nodes_per_leaf:
        return 0.0
    return max(cross_fraction, 1.0 / cluster.nodes_per_leaf)


def all_to_all_cross_fraction(cluster: ClusterSpec, shape: GroupShape) -> float:
    """Fraction of a rank's inter-node all-to-all bytes whose peer node sits on another leaf."""
    n_nodes = shape.num_nodes
    if n_nodes <= 1:
        return 0.0
    same_leaf = min(n_nodes, cluster.nodes_per_leaf) - 1
    return (n_nodes - 1 - same_leaf) / (n_nodes - 1)
