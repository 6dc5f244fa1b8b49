"""Per-GPU memory of one pipeline stage: MemoryReport and memory_report()."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from clustersim.compute.conventions import resolve_attention
from clustersim.compute.dtypes import activation_bytes, check_dtype, weight_bytes
from clustersim.compute.layer import expert_params_per_gpu, layer_params_per_gpu
from clustersim.errors import InputError
from clustersim.hardware.spec import ClusterSpec
from clustersim.memory.activations import (
    embedding_activation_bytes,
    layer_activation_bytes,
    output_activation_bytes,
    recompute_working_bytes,
)
from clustersim.memory.states import state_bytes
from clustersim.parallel.layout import ParallelLayout
from clustersim.units import MiB
from clustersim.workload.model_spec import ModelSpec

# CUDA context + loaded kernels of a PyTorch process: about 0.5 GiB on A100/H100 (what nvidia-smi
# shows for a process that has only initialised CUDA; PyTorch docs, "CUDA semantics - memory
# management": the context is not counted by memory_allocated). Taken as 512 MiB.
CUDA_CONTEXT_BYTES = 512 * MiB
# cuBLAS / cuBLASLt workspaces: PyTorch allocates 32 MiB per handle on Hopper (4 MiB x 8 before,
# CUBLAS_WORKSPACE_CONFIG default ":4096:8"), Transformer Engine 32 MiB for sm90 (4 MiB otherwise);
# two handles (PyTorch + TE) -> 64 MiB.
CUBLAS_WORKSPACE_BYTES = 64 * MiB
# NCCL: every communicator allocates per channel a receive buffer per protocol; NCCL_BUFFSIZE is 4 MiB
# by default (NCCL docs, environment variables, NCCL_BUFFSIZE) for the Simple protocol, LL128 about
# the same. With 16 channels: 16 x 2 x 4 MiB = 128 MiB per communicator the rank belongs to.
NCCL_BYTES_PER_COMMUNICATOR = 16 * 2 * 4 * MiB


@dataclass(frozen=True, slots=True)
class MemoryReport:
    """Peak memory of one GPU in bytes (all fields ints)."""

    weights: int
    gradients: int
    optimizer_states: int
    activations: int
    comm_buffers: int
    workspace: int
    peak_bytes_per_gpu: int
    capacity_bytes_per_gpu: int
    fits: bool
    host_bytes_per_gpu: int = 0  # offloaded states and activations in host memory (parallel.offload)

    def to_json(self) -> dict[str, int | bool]:
        out = {"weights": self.weights, "gradients": self.gradients, "optimizer_states": self.optimizer_states,
               "activations": self.activations, "comm_buffers": self.comm_buffers, "workspace": self.workspace,
               "peak_bytes_per_gpu": self.peak_bytes_per_gpu, "capacity_bytes_per_gpu": self.capacity_bytes_per_gpu,
               "fits": self.fits}
        if self.host_bytes_per_gpu:
            out["host_bytes_per_gpu"] = self.host_bytes_per_gpu
        return out


def stage_params(model: ModelSpec, layout: ParallelLayout, stage_layers: int, first: bool, last: bool,
                 moe_layers: int | None = None) -> tuple[float, float]:
    """(dense parameters, expert parameters) held by one GPU of a stage whose ``stage_layers``
    layers include ``moe_layers`` MoE layers (None: all of them for a MoE model). The last stage
    also holds the multi-token-prediction modules (one more layer, the 2h -> h projection and a
    copy of the embedding each uses, DeepSeek-V3 §2.2)."""
    moe_n = _moe_count(model, stage_layers, moe_layers)
    expert = expert_params_per_gpu(model, layout.tp, layout.ep, layout.etp, moe=True) if moe_n else 0
    moe_layer = layer_params_per_gpu(model, layout.tp, layout.ep, True, layout.etp) if moe_n else 0
    dense_layer = layer_params_per_gpu(model, layout.tp, layout.ep, False, layout.etp)
    dense = (moe_layer - expert) * moe_n + dense_layer * (stage_layers - moe_n)
    experts = expert * moe_n
    vocab_shard = math.ceil(model.vocab / layout.tp) * model.hidden
    if first:
        dense += vocab_shard
    if last:
        dense += 2 * model.hidden   # final norm
        if not (model.tie_embeddings and first):
            dense += vocab_shard
        if model.mtp_layers:
            layer_e = expert_params_per_gpu(model, layout.tp, layout.ep, layout.etp)
            layer_all = layer_params_per_gpu(model, layout.tp, layout.ep, None, layout.etp)
            mtp_dense = layer_all - layer_e + 2 * model.hidden + math.ceil(2 * model.hidden * model.hidden / layout.tp)
            dense += model.mtp_layers * mtp_dense + (0 if first else vocab_shard)
            experts += model.mtp_layers * layer_e
    return float(dense), float(experts)


def _moe_count(model: ModelSpec, stage_layers: int, moe_layers: int | None) -> int:
    if not model.is_moe:
        return 0
    return stage_layers if moe_layers is None else moe_layers


def memory_report(model: ModelSpec, layout: ParallelLayout, cluster: ClusterSpec, dtype: str,
                  stage_layers: int, in_flight_micro_batches: float, first: bool, last: bool,
                  attention: str = "auto", moe_layers: int | None = None,
                  ends_in_flight: tuple[float, float] | None = None) -> MemoryReport:
    """Peak memory of one GPU of a pipeline stage holding ``stage_layers`` layers (all its chunks;
    ``moe_layers`` of them MoE, None: all for a MoE model) with ``in_flight_micro_batches``
    micro-batches' activations alive at once (from the schedule)."""
    return _memory_report(model, layout, cluster, dtype, int(stage_layers), float(in_flight_micro_batches),
                          bool(first), bool(last), attention, None if moe_layers is None else int(moe_layers),
                          ends_in_flight)


def state_parts(model: ModelSpec, layout: ParallelLayout, dtype: str, stage_layers: int, first: bool, last: bool,
                moe_layers: int | None) -> tuple[float, float, float]:
    """(weights, gradients, optimizer states) of one GPU before offload. ZeRO shards over the
    data-parallel group with context parallelism folded in (Megatron-core's distributed optimizer
    uses the dp x cp group), matching the gradient reduction in the engine; expert parameters
    over the expert-data-parallel group."""
    dense, expert = stage_params(model, layout, stage_layers, first, last, moe_layers)
    mb = layout.adam_moment_bytes
    w1, g1, o1 = state_bytes(dense, layout.dp * layout.cp, layout.zero_stage, dtype, mb)
    w2, g2, o2 = state_bytes(expert, layout.edp, layout.zero_stage, dtype, mb)
    return w1 + w2, g1 + g2, o1 + o2


def activation_parts(model: ModelSpec, layout: ParallelLayout, dtype: str, attention: str
                     ) -> tuple[float, float, float, float, float]:
    """Per micro-batch: (dense layer, MoE layer, first-stage extra, last-stage extra, full-recompute
    working set) in bytes; ``attention`` resolved. The last stage adds the output head's and the
    MTP modules' activations."""
    dense = layer_activation_bytes(model, layout, dtype, attention, moe=False)
    moe = layer_activation_bytes(model, layout, dtype, attention, moe=True) if model.is_moe else dense
    first = embedding_activation_bytes(model, layout, dtype)
    last = output_activation_bytes(model, layout, dtype) * (1 + model.mtp_layers)
    last += layer_activation_bytes(model, layout, dtype, attention) * model.mtp_layers
    return dense, moe, first, last, recompute_working_bytes(model, layout, dtype, attention)


def assemble(layout: ParallelLayout, states: tuple[float, float, float], acts: tuple[float, ...],
             stage_layers: int, moe_n: int, in_flight: float, first: bool, last: bool,
             ends_in_flight: tuple[float, float] | None = None) -> tuple[float, float, float, float, float]:
    """(weights, gradients, optimizer, activations, host bytes) on the GPU after offload.
    ``ends_in_flight``: micro-batches in flight on the chunk with the embedding and on the one
    with the output head, where they differ from the layers' average (DualPipe, V schedules)."""
    dense_b, moe_b, first_b, last_b, working_b = acts
    first_k, last_k = ends_in_flight if ends_in_flight is not None else (in_flight, in_flight)
    per_mb = moe_b * moe_n + dense_b * (stage_layers - moe_n) + (first_b if first else 0.0) \
        + (last_b if last else 0.0)
    working = working_b if stage_layers and in_flight else 0.0
    act = (moe_b * moe_n + dense_b * (stage_layers - moe_n)) * in_flight + working \
        + (first_b * first_k if first else 0.0) + (last_b * last_k if last else 0.0)
    weights, grads, opt = states
    host = 0.0
    if layout.offload_activations and stage_layers:
        # only the layer being computed and the one being prefetched stay on the GPU (double
        # buffering, ZeRO-Offload / Megatron fine-grained activation offloading); the rest waits in host memory
        resident = 2 * per_mb / max(1, stage_layers + (1 if last else 0))
        host += max(0.0, act - resident - working)
        act = min(act, resident + working)
    if layout.offload_optimizer:   # ZeRO-Offload: fp32 master and Adam moments on the host, and a copy of the grads
        host += opt + grads
        opt = 0.0
    if layout.offload_params:      # ZeRO-Infinity: the ZeRO-3 parameter shards live on the host
        host += weights
        weights = 0.0
    return weights, grads, opt, act, host


@functools.lru_cache(maxsize=16384)
def _memory_report(model: ModelSpec, layout: ParallelLayout, cluster: ClusterSpec, dtype: str,
                   stage_layers: int, in_flight: float, first: bool, last: bool, attention: str,
                   moe_layers: int | None = None, ends_in_flight: tuple[float, float] | None = None) -> MemoryReport:
    check_dtype(dtype)
    if stage_layers < 0:
        raise InputError("stage_layers", stage_layers, "an integer >= 0")
    if in_flight < 0:
        raise InputError("in_flight_micro_batches", in_flight, "a number >= 0")
    states = state_parts(model, layout, dtype, stage_layers, first, last, moe_layers)
    acts = activation_parts(model, layout, dtype, resolve_attention(attention, cluster.gpu.name))
    moe_n = _moe_count(model, stage_layers, moe_layers)
    weights, grads, opt, act, host = assemble(layout, states, acts, stage_layers, moe_n, in_flight, first, last,
                                              ends_in_flight)
    comm = _comm_buffer_bytes(model, layout, dtype, stage_layers)
    return finish_report(cluster, weights, grads, opt, act, comm, host)


def finish_report(cluster: ClusterSpec, weights: float, grads: float, opt: float, act: float, comm: float,
                  host: float) -> MemoryReport:
    workspace = CUDA_CONTEXT_BYTES + CUBLAS_WORKSPACE_BYTES
    parts = [int(round(x)) for x in (weights, grads, opt, act, comm)]
    peak = sum(parts) + workspace
    capacity = cluster.gpu.hbm_capacity_bytes
    host_b = int(round(host))
    host_ok = host_b <= cluster.host_memory_bytes // max(1, cluster.gpus_per_node) or not host_b
    return MemoryReport(*parts, workspace, peak, capacity, peak <= capacity and host_ok, host_b)


def _comm_buffer_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str, stage_layers: int) -> float:
    """NCCL buffers per communicator, SP gather buffer, PP send/recv tensors, ZeRO-2/3 staging."""
    a_b = activation_bytes(dtype)
    tokens = layout.micro_batch * math.ceil(model.seq_len / layout.cp)
    groups = sum(1 for n in (layout.tp, layout.pp, layout.dp, layout.cp, layout.ep) if n > 1)
    if model.is_moe:  # the experts' own communicators (MoE parallel folding): ETP unless it is TP, EDP
        groups += int(layout.etp > 1 and layout.etp != layout.tp) + int(layout.edp > 1 and layout.ep > 1)
    total = groups * NCCL_BYTES_PER_COMMUNICATOR
    if layout.sequence_parallel and layout.tp > 1:
        total += tokens * model.hidden * a_b            # Megatron's global buffer for the gathered input
    if layout.pp > 1:
        sp = layout.sequence_parallel and layout.tp > 1
        total += 2 * tokens * model.hidden * a_b / (layout.tp if sp else 1)   # one send + one recv tensor
    if layout.zero_stage >= 2:
        # gradient buckets reduce-scattered from an unsharded fp32 bucket: Megatron-Core bucket size
        # max(40M, 1M x dp) parameters (distributed_data_parallel.py), two buckets in flight
        bucket = layout.dp_bucket_params or max(40_000_000, 1_000_000 * layout.dp)
        total += 2 * bucket * 4
    if layout.zero_stage >= 3:
        # parameters of the current and the prefetched layer, unsharded
        total += 2 * layer_params_per_gpu(model, layout.tp, layout.ep, None, layout.etp) * weight_bytes(dtype)
    return total


__all__ = ["MemoryReport", "memory_report", "stage_params"]
