"""Checkpoint size and the time to snapshot, write and load it (pure).

What a checkpoint holds: every parameter once in the training dtype plus the optimizer states
(mixed-precision Adam: fp32 master weight, momentum and variance, 12 bytes per parameter; ZeRO,
Rajbhandari et al. 2020, section 3.1; clustersim.memory.states). Gradients are not saved.
States that ``parallel.offload`` keeps in host memory are saved all the same (a GPU's share counts
them: ``MemoryReport.offloaded``).

How it is written: Megatron-Core's distributed checkpoint saves every shard once; replicated
shards (weights held by all data-parallel replicas, optimizer states without ZeRO) are spread
over the data-parallel ranks ("fully parallel save", on by default:
megatron/core/dist_checkpointing/strategies/fully_parallel.py, disabled by
--no-ckpt-fully-parallel-save). A GPU therefore saves its share of the replicated state plus its
own shards; the write to storage runs at the storage's aggregate bandwidth, and each node at
most at its own front-end bandwidth.

How it is read on restart: without --ckpt-fully-parallel-load (Megatron's default is off) every
rank reads its whole local state, so replicated weights are read once per replica; with it each
shard is read once and exchanged between ranks (``parallel_load``).

Sync vs async: a synchronous save blocks training for the GPU-to-host copy and the write; an
asynchronous save (Megatron --async-save, torch.distributed.checkpoint.async_save) blocks only
for the GPU-to-host snapshot and writes in the background; the checkpoint counts once the write
has finished.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from clustersim.compute.dtypes import weight_bytes
from clustersim.compute.optimizer import fewer_moment_bytes
from clustersim.errors import InputError
from clustersim.goodput.config import GoodputSpec
from clustersim.hardware.spec import ClusterSpec
from clustersim.memory.report import MemoryReport
from clustersim.memory.states import ADAM_FP32_BYTES_PER_PARAM, ADAM_MIXED_BYTES_PER_PARAM
from clustersim.scenario import Scenario
from clustersim.units import GiB


@dataclass(frozen=True, slots=True)
class CheckpointCost:
    """One checkpoint of the job: sizes in bytes, times in seconds."""

    mode: str                 # "sync" | "async"
    size_bytes: float         # weights + optimizer states, every shard once
    per_gpu_bytes: float      # what the busiest GPU saves
    read_bytes: float         # what the job reads from storage on restart
    snapshot_s: float         # GPU -> host copy of per_gpu_bytes (less what offload already keeps on the host)
    write_s: float            # host -> storage
    load_s: float             # storage -> GPUs on restart

    @property
    def blocking_s(self) -> float:
        """Training time lost per checkpoint."""
        return self.snapshot_s + self.write_s if self.mode == "sync" else self.snapshot_s

    @property
    def lag_s(self) -> float:
        """Time after the blocking part until the checkpoint is durable (the async write)."""
        return 0.0 if self.mode == "sync" else self.write_s

    @property
    def final_save_s(self) -> float:
        """A save that must be durable before the job stops (planned interruptions): synchronous."""
        return self.snapshot_s + self.write_s


def checkpoint_bytes_per_param(dtype: str, moments: int = 2) -> int:
    """Saved bytes per parameter: the parameter in its storage dtype plus the optimizer states
    (``moments``: Adam's 2, SGD's momentum 1, 4 bytes each). Moments kept in BF16 on the GPU
    (``training.adam_moments``) are still saved in FP32: Megatron-Core's distributed optimizer
    builds its checkpoint tensors from Transformer Engine ``FusedAdam.get_unscaled_state``, which
    returns each state in FP32 (megatron/core/optimizer/distrib_optimizer.py,
    ``_get_main_param_and_optimizer_states``; transformer_engine/pytorch/optimizers/fused_adam.py).

    fp8 training keeps bf16 parameters (the fp8 copies are caches, not in the state dict:
    clustersim.compute.dtypes.weight_bytes), so fp8 saves 2 bytes like bf16; fp32 saves 4.
    """
    param = 4 if dtype == "fp32" else 2
    optim = ADAM_FP32_BYTES_PER_PARAM if dtype == "fp32" else ADAM_MIXED_BYTES_PER_PARAM
    return param + optim - fewer_moment_bytes(moments)


def checkpoint_cost(scenario: Scenario, memories: Sequence[MemoryReport], spec: GoodputSpec,
                    hosts: Sequence[Sequence[ClusterSpec]] | None = None) -> CheckpointCost:
    """Checkpoint sizes and times for ``scenario`` with one MemoryReport per pipeline stage.
    ``hosts``: per stage, the hardware of the node groups its GPUs sit on (a mixed cluster,
    clustersim.goodput.report); None: the cluster's own. Each GPU copies its share over its own
    host link into its own host's memory, and the snapshot lasts as long as the slowest copy."""
    cluster, par, dtype = scenario.cluster, scenario.parallel, scenario.training.dtype
    size = float(scenario.model.total_params()) * checkpoint_bytes_per_param(dtype, par.optimizer_moments)
    # weights as saved (fp8's extra copies are not saved); replicas over the data-parallel group
    saved_weight = (4 if dtype == "fp32" else 2) / weight_bytes(dtype)
    replicas = par.dp * par.cp
    hosts = hosts or [(cluster,)] * len(memories)

    def saved_share(w: float, o: float) -> float:   # what one GPU saves of its stage's weights w and states o
        return (w if par.zero_stage >= 3 else w / replicas) + (o if par.zero_stage >= 1 else o / replicas)

    per_gpu, local, snapshot_s = 0.0, 0.0, 0.0
    for m, stage_hosts in zip(memories, hosts, strict=True):
        # the states wherever they live: parallel.offload keeps some in host memory (MemoryReport.offloaded),
        # and a checkpoint saves them all the same (the GPU-resident optimizer_states are 0 under offload);
        # only the GPU-resident part crosses the host link in the snapshot
        off_w, off_o = m.offloaded
        w, o = (m.weights + off_w) * saved_weight, float(m.optimizer_states + off_o)
        share = saved_share(w, o)
        copied = saved_share(m.weights * saved_weight, float(m.optimizer_states))
        per_gpu = max(per_gpu, share)
        local += (w + o) * cluster.num_gpus / par.pp          # every GPU of the stage holds this
        for host in stage_hosts:
            snapshot_s = max(snapshot_s, copied / _snapshot_bw(host, spec))
            if spec.checkpoint == "async" and host.host_memory_bytes:
                node_bytes = share * host.gpus_per_node
                if node_bytes > host.host_memory_bytes:
                    raise InputError("goodput.checkpoint", "async",
                                     f"sync: the snapshot of one node ({node_bytes / GiB:.0f} GiB) exceeds its host "
                                     f"memory ({host.host_memory_bytes / GiB:.0f} GiB)")
    read = size if spec.parallel_load else local

    node_bw = spec.node_storage_bw_bytes_per_s
    per_node_write = per_gpu * cluster.gpus_per_node
    per_node_read = read / cluster.num_nodes
    write_s = max(size / spec.storage_write_bw_bytes_per_s, per_node_write / node_bw if node_bw else 0.0)
    load_s = max(read / spec.storage_read_bw_bytes_per_s, per_node_read / node_bw if node_bw else 0.0)
    return CheckpointCost(spec.checkpoint, size, per_gpu, read, snapshot_s, write_s, load_s)


def _snapshot_bw(cluster: ClusterSpec, spec: GoodputSpec) -> float:
    """One GPU's GPU-to-host rate: ``snapshot_bw_GBps`` if given, else the host link
    (``ClusterSpec.host_memory_link``: NVLink-C2C where the profile names it, else PCIe)."""
    link = cluster.host_memory_link
    bw = spec.snapshot_bw_bytes_per_s or (link.effective_bw_bytes_per_s if link else 0.0)
    if bw <= 0:
        raise InputError("goodput.snapshot_bw_GBps", None,
                         f"a GPU-to-host bandwidth > 0 (cluster {cluster.name} names no pcie or host_link fabric)")
    return bw


__all__ = ["CheckpointCost", "checkpoint_bytes_per_param", "checkpoint_cost"]
