"""Whether a node's host memory holds what its GPUs offload (``parallel.offload``): the one rule
that `run` reports (``memory.host``, clustersim.report.StepReport.host_memory) and the sweep
screens its layouts with (clustersim.sweep.screen), docs/memory.md, "Offload".

The node's need is the pipeline stage offloading the most per GPU times the GPUs of a node (an
upper bound where a node's GPUs hold different stages), against the cluster profile's
``host_memory_GiB`` (``ClusterSpec.host_memory_bytes``; 0: the profile gives none, verdict
``unknown``, which no check refuses).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from clustersim.hardware.spec import ClusterSpec

HOST_VERDICTS = ("fits", "does-not-fit", "unknown")


@dataclass(frozen=True, slots=True)
class HostMemory:
    """What a node's GPUs offload against its host memory."""

    bytes_per_gpu: int                  # the stage offloading the most, per GPU
    gpus_per_node: int
    capacity_bytes_per_node: int | None  # None: the cluster profile gives no host_memory_GiB

    @property
    def bytes_per_node(self) -> int:
        return self.bytes_per_gpu * self.gpus_per_node

    @property
    def verdict(self) -> str:
        cap = self.capacity_bytes_per_node
        return "unknown" if cap is None else "fits" if self.bytes_per_node <= cap else "does-not-fit"

    @property
    def fits(self) -> bool:
        """False only where the profile's host memory is known and does not hold the need."""
        return self.verdict != "does-not-fit"


def host_memory(host_bytes_per_gpu: Iterable[int], cluster: ClusterSpec) -> HostMemory | None:
    """The node's host memory check from each pipeline stage's offloaded bytes per GPU
    (``MemoryReport.host_bytes_per_gpu``), or None where nothing is offloaded."""
    per_gpu = max(host_bytes_per_gpu, default=0)
    if not per_gpu:
        return None
    return HostMemory(int(per_gpu), cluster.gpus_per_node, cluster.host_memory_bytes or None)
