"""Failure rates of a training job: what fails, how often, and how many of each the cluster has.

Every unexpected interruption of a synchronous training job is charged to one component class.
A class fails at ``count / mtbf_h`` interruptions per hour: failures are independent and
memoryless (exponential), so the job sees a Poisson process with the sum of the class rates
(the failure model of Young 1974 and Daly 2006; a synchronous job fails when any of its
components fails).

Default MTBFs come from the one public root-cause table of a 16,384-GPU run: the Llama 3 paper
(Grattafiori et al. 2024, arXiv 2407.21783, section 3.3.4 and Table 5): 466 job interruptions in a
54-day snapshot of Llama 3 405B pre-training on 16,384 H100 (2,048 Grand Teton servers of 8 GPUs,
section 3.3.1), 47 planned and 419 unexpected. Each root cause of Table 5 is assigned to the
component class that fails, and the class MTBF is the component-hours of that run divided by the
class's interruptions. The Llama 3 run therefore reproduces the paper's counts by construction;
the counts for another cluster follow from its own component counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from clustersim.hardware.spec import ClusterSpec

# Llama 3 paper, section 3.3.4: "During a 54-day snapshot period of pre-training, we experienced a
# total of 466 job interruptions. Of these, 47 were planned ... The remaining 419 were unexpected".
LLAMA3_SNAPSHOT_H = 54 * 24.0
LLAMA3_GPUS = 16_384                 # Llama 3 paper, section 3.3.1: up to 16K H100 for 405B pre-training
LLAMA3_NODES = LLAMA3_GPUS // 8      # section 3.3.1: Grand Teton servers, 8 GPUs each
LLAMA3_NICS = LLAMA3_GPUS            # section 3.3.1: RoCE, 400 Gbps per GPU: one NIC per GPU
# The paper names its fabric (three-layer Clos, 1,024 ToRs for 16K GPUs at 16 GPUs per rack) but
# not the full switch count; the per-switch rate is therefore stated for the fabric clustersim
# builds for 2,048 DGX H100 nodes (clustersim.network.topology: 64 leaf groups of 32 nodes x 8
# rails = 512 leaves, plus 32 spines), so that the Llama 3 scenario reproduces the table's count.
LLAMA3_SWITCHES = 512 + 32

# Llama 3 paper, Table 5 (root causes of the 419 unexpected interruptions), grouped by the
# component class that fails:
LLAMA3_INTERRUPTIONS = {
    # Faulty GPU 148, GPU HBM3 memory 72, GPU SRAM memory 19, GPU system processor 17,
    # silent data corruption 6, GPU thermal interface + sensor 6
    "gpu": 148 + 72 + 19 + 17 + 6 + 6,
    # Host maintenance (unplanned) 32, SSD 3, power supply 3, server chassis 2,
    # IO expansion board 2, CPU 2, system memory 2
    "node": 32 + 3 + 3 + 2 + 2 + 2 + 2,
    "nic": 7,                        # NIC 7
    "switch": 35,                    # network switch/cable 35
    # Software bug 54, NCCL watchdog timeouts 7, dependency 2: charged per GPU process
    "software": 54 + 7 + 2,
}
LLAMA3_PLANNED = 47                  # section 3.3.4: automated maintenance, firmware upgrades, config updates

CLASSES = ("gpu", "node", "nic", "switch", "software")

_LLAMA3_COUNTS = {"gpu": LLAMA3_GPUS, "node": LLAMA3_NODES, "nic": LLAMA3_NICS, "switch": LLAMA3_SWITCHES,
                  "software": LLAMA3_GPUS}

# MTBF per component in hours: component-hours of the Llama 3 snapshot / interruptions of the class.
DEFAULT_MTBF_H = {c: _LLAMA3_COUNTS[c] * LLAMA3_SNAPSHOT_H / LLAMA3_INTERRUPTIONS[c] for c in CLASSES}
# Mean time between planned interruptions of the job (hours): 54 days / 47.
DEFAULT_PLANNED_INTERVAL_H = LLAMA3_SNAPSHOT_H / LLAMA3_PLANNED


@dataclass(frozen=True, slots=True)
class FailureClass:
    """``count`` components of one kind, each failing once per ``mtbf_h`` hours on average."""

    name: str
    count: int
    mtbf_h: float

    @property
    def rate_per_s(self) -> float:
        return self.count / (self.mtbf_h * 3600.0)


def component_counts(cluster: ClusterSpec, groups: Sequence[tuple[int, ClusterSpec]] = ()) -> dict[str, int]:
    """Components of each class that the job depends on.

    GPUs and nodes as the cluster has them; one software process per GPU (torchrun's one rank per
    GPU). NICs and switches only when the job spans nodes: a one-node job never leaves NVLink.
    Switches are the leaves and spines of clustersim's rail-optimised fat tree
    (clustersim.network.topology.build_topology: one leaf per leaf group and rail, plus spines).
    ``groups``: a mixed cluster's node groups in node order, (nodes, that group's hardware): each
    node has its own group's NICs, and a leaf group as many rails as its nodes' most NICs.
    """
    from clustersim.network.topology import leaf_group, num_spines  # networkx: only when counting

    multi_node = cluster.num_nodes > 1
    nics = [c.nics_per_node for nodes, c in groups for _ in range(nodes)] or [cluster.nics_per_node] * cluster.num_nodes
    rails: dict[int, int] = {}
    for node, n in enumerate(nics):
        rails[leaf_group(cluster, node)] = max(rails.get(leaf_group(cluster, node), 0), n)
    switches = sum(rails.values()) + num_spines(cluster) if multi_node else 0
    return {
        "gpu": cluster.num_gpus,
        "node": cluster.num_nodes,
        "nic": sum(nics) if multi_node else 0,
        "switch": switches,
        "software": cluster.num_gpus,
    }


def failure_classes(cluster: ClusterSpec, mtbf_h: dict[str, float],
                    groups: Sequence[tuple[int, ClusterSpec]] = ()) -> tuple[FailureClass, ...]:
    """One FailureClass per class, in CLASSES order (``mtbf_h`` holds every class); ``groups`` as
    for ``component_counts``."""
    counts = component_counts(cluster, groups)
    return tuple(FailureClass(c, counts[c], float(mtbf_h[c])) for c in CLASSES)


__all__ = ["CLASSES", "DEFAULT_MTBF_H", "DEFAULT_PLANNED_INTERVAL_H", "FailureClass", "component_counts",
           "failure_classes"]
