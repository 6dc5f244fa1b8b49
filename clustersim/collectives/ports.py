"""Per-rank port bandwidths of a group on a cluster: the closed forms' view of the topology.

Scale-up (NVLink through NVSwitch) is a full crossbar: every GPU has its whole NVLink bundle
whatever the other GPUs do. Scale-out is rail-optimised: every GPU uses its own rail NIC
(NCCL's PXN / rail-local NIC choice); GPUs share a NIC only when a node has fewer NICs than
active GPUs. One GPU does not spread one flow over several NICs (nccl-tests#232: 1 H100 with
4 NICs reaches about one NIC's bandwidth).
"""

from __future__ import annotations

from clustersim.collectives.nccl_tuning import HW_NVLINK, HW_PCI, NVLS_EFF
from clustersim.collectives.plan import GroupShape
from clustersim.hardware.spec import ClusterSpec


def scale_up_bw(cluster: ClusterSpec) -> float:
    """Achievable per-GPU, per-direction scale-up bandwidth (bytes/s)."""
    return cluster.scale_up.effective_bw_bytes_per_s


def scale_up_hw(cluster: ClusterSpec) -> str:
    """NCCL's hardware class of the intra-node path (nvlink or pci) for its latency table."""
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
    """
    if shape.num_nodes <= cluster.nodes_per_leaf or cluster.oversubscription <= 1.0:
        return 1.0
    return 1.0 / max(1.0, cross_fraction * cluster.oversubscription)


def all_to_all_cross_fraction(cluster: ClusterSpec, shape: GroupShape) -> float:
    """Fraction of a rank's inter-node all-to-all bytes whose peer node sits on another leaf."""
    n_nodes = shape.num_nodes
    if n_nodes <= 1:
        return 0.0
    same_leaf = min(n_nodes, cluster.nodes_per_leaf) - 1
    return (n_nodes - 1 - same_leaf) / (n_nodes - 1)
