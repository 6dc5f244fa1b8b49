"""Whether a node's host memory holds what its GPUs offload (``parallel.offload``): the one rule
that `run` reports (``memory.host``, clustersim.report.StepReport.host_memory) and the sweep
screens its layouts with (clustersim.sweep.screen), docs/memory.md, "Offload".

A node's need is what its GPUs offload together: the GPUs are numbered tensor-parallel rank
fastest, then context-, data- and pipeline-parallel (clustersim.parallel.layout), a pipeline stage
holds ``tp x cp x dp`` consecutive GPUs and a node ``gpus_per_node`` consecutive ones, so a node
holds one stage's GPUs where a stage spans whole nodes, and several stages' where it does not
(eight one-GPU stages on one node offload the eight stages' bytes, not eight times the largest).
Each node's need is checked against its own host memory (on a mixed cluster, its group's:
``node_capacity``), against the cluster profile's ``host_memory_GiB`` (``ClusterSpec.host_memory_bytes``;
0: the profile gives none, verdict ``unknown``, which no check refuses).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from clustersim.hardware.spec import ClusterSpec

HOST_VERDICTS = ("fits", "does-not-fit", "unknown")


@dataclass(frozen=True, slots=True)
class HostMemory:
    """What the deciding node's GPUs offload against its host memory (the node furthest over its
    capacity, else the one offloading the most)."""

    bytes_per_gpu: int                  # the most one of its GPUs offloads
    gpus_per_node: int
    bytes_per_node: int                 # what its GPUs offload together
    capacity_bytes_per_node: int | None  # None: the cluster profile gives no host_memory_GiB
    node: int = 0                       # its index in the job

    @property
    def verdict(self) -> str:
        cap = self.capacity_bytes_per_node
        return "unknown" if cap is None else "fits" if self.bytes_per_node <= cap else "does-not-fit"

    @property
    def fits(self) -> bool:
        """False only where the profile's host memory is known and does not hold the need."""
        return self.verdict != "does-not-fit"


def host_memory(host_bytes_per_gpu: Sequence[int], cluster: ClusterSpec, gpus_per_stage: int,
                node_capacity: Callable[[int], int] | None = None) -> HostMemory | None:
    """The node's host memory check (module docstring) from each pipeline stage's offloaded bytes
    per GPU (``MemoryReport.host_bytes_per_gpu``, in stage order), each stage on ``gpus_per_stage``
    consecutive GPUs (``tp x cp x dp``); ``node_capacity``: a node's host memory in bytes (None:
    the cluster's for every node). None where nothing is offloaded."""
    per_stage = [int(b) for b in host_bytes_per_gpu]
    if not max(per_stage, default=0):
        return None
    gpn = cluster.gpus_per_node
    nodes = -(-len(per_stage) * gpus_per_stage // gpn)
    best: tuple[tuple[int, int], HostMemory] | None = None
    for n in range(nodes):
        first, end = n * gpn, (n + 1) * gpn
        need = most = 0
        for p in range(first // gpus_per_stage, min(len(per_stage), -(-end // gpus_per_stage))):
            gpus = min(end, (p + 1) * gpus_per_stage) - max(first, p * gpus_per_stage)
            need += per_stage[p] * gpus
            most = max(most, per_stage[p])
        cap = (node_capacity(n) if node_capacity is not None else cluster.host_memory_bytes) or None
        rank = (need - cap, need) if cap is not None else (need - 2**62, need)   # known capacities decide first
        if best is None or rank > best[0]:
            best = (rank, HostMemory(most, gpn, need, cap, n))
    assert best is not None
    return best[1]
