"""Published nccl-tests results at scale beside clustersim's collective model (validation only).

Nothing is fitted to these rows; each names its source and what it leaves unstated.

* NVIDIA/nccl#1229 (2024-03-16, H100 nodes of 8 GPUs, InfiniBand): ``reduce_scatter_perf`` bus
  bandwidth "360, 345, 320, 300, 280, 260" GB/s on 4, 8, 16, 32, 64 and 128 nodes, all 8 GPUs
  of each node in the communicator (ring: NCCL has no tree for reduce-scatter). The buffer size
  is not stated; the rows assume 1 GiB.
* NVIDIA/nccl-tests#283 (2025-01-18, 248 nodes x 8 H200, 8 NDR NICs per node, default
  algorithm): ``all_reduce_perf`` of 512 MiB "typically around 350G" bus bandwidth, "occasionally
  below 300".
"""

from __future__ import annotations

from dataclasses import dataclass

from clustersim.collectives import GroupShape, plan_collective
from clustersim.hardware.load import load_cluster

GiB, MiB = 2 ** 30, 2 ** 20


@dataclass(frozen=True)
class ScaleRow:
    source: str
    op: str
    preset: str
    nodes: int
    size_bytes: int
    published_busbw_GBps: float

    def predicted(self) -> tuple[float, str]:
        """(bus bandwidth in GB/s as nccl-tests defines it, algorithm) from the closed form."""
        cluster = load_cluster(self.preset, self.nodes)
        per = cluster.gpus_per_node
        plan = plan_collective(self.op, float(self.size_bytes), cluster, GroupShape(per, self.nodes))
        n = per * self.nodes
        factor = 2 * (n - 1) / n if self.op == "all_reduce" else (n - 1) / n
        return self.size_bytes / plan.time_s * factor / 1e9, plan.algo

    @property
    def error(self) -> float:
        return self.predicted()[0] / self.published_busbw_GBps - 1


ROWS = tuple(
    [ScaleRow("NVIDIA/nccl#1229 (size assumed 1 GiB)", "reduce_scatter", "dgx-h100", n, GiB, bw)
     for n, bw in ((4, 360), (8, 345), (16, 320), (32, 300), (64, 280), (128, 260))]
    + [ScaleRow("NVIDIA/nccl-tests#283 (typical)", "all_reduce", "hgx-h200", 248, 512 * MiB, 350)])
