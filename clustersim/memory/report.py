"""Per-GPU memory of one pipeline stage: MemoryReport and memory_report().

The peak of a training step comes when a rank holds the most micro-batches' activations and
starts a backward pass (or, on the last stage, runs the loss). At that moment the GPU holds:

* allocated through PyTorch's caching allocator (``torch.cuda.max_memory_allocated``):
  weights, gradients, optimizer states (states.py), the activations of every micro-batch in
  flight (activations.py), the largest transient of that moment (the loss's logits copies, or a
  recomputed layer plus the backward's gradients), and buffers (buffers.py: ZeRO-3/FSDP
  parameters and gradients in flight, buckets, pipeline and sequence-parallel buffers), plus the
  cuBLAS workspaces;
* reserved by the allocator above that (fragmentation, ``max_memory_reserved`` minus
  ``max_memory_allocated``; allocator.py);
* outside the allocator: the CUDA context and NCCL's buffers (buffers.py).

``allocated_peak_bytes`` is the first group, ``reserved_peak_bytes`` all three (what the device
has in use; ``torch.cuda.max_memory_reserved()`` is ``reserved_peak_bytes - cuda_context -
nccl_buffers``). ``peak_bytes_per_gpu`` is the reserved peak; the verdict compares its 80%
interval (evidence.py: from the allocated peak, which the allocator can fall back to by freeing
its cache, to the reserved peak, each with the validation residuals) with the capacity: ``fits``
when the whole interval is below it, ``does-not-fit`` when the whole interval is above, ``tight``
otherwise (it fits only with the allocator's retries, or the prediction is too close to call).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from clustersim.compute.dtypes import check_dtype, grad_held_bytes, reduce_bytes
from clustersim.compute.layer import expert_params_per_gpu, layer_params_per_gpu
from clustersim.errors import InputError
from clustersim.frameworks import FrameworkSpec, grad_accum_dtype, grad_reduce_dtype, load_framework
from clustersim.hardware.spec import ClusterSpec
from clustersim.memory.activations import combine, gpu_kernels, layer_units
from clustersim.memory.allocator import fragmentation_bytes
from clustersim.memory.buffers import (
    CUBLAS_WORKSPACE_BYTES,
    CUDA_CONTEXT_BYTES,
    NCCL_BYTES_PER_COMMUNICATOR,
    buffer_bytes,
    nccl_buffer_bytes,
)
from clustersim.memory.evidence import interval_factors
from clustersim.memory.policies import RankPolicies
from clustersim.memory.saved import Kernels
from clustersim.memory.states import state_bytes
from clustersim.parallel.layout import ParallelLayout
from clustersim.workload.model_spec import ModelSpec

VERDICTS = ("fits", "tight", "does-not-fit")
# the parts of a MemoryReport, in the order the report prints them
PARTS = ("weights", "gradients", "optimizer_states", "activations", "transient", "comm_buffers", "workspace",
         "fragmentation", "cuda_context", "nccl_buffers")


@dataclass(frozen=True, slots=True)
class MemoryReport:
    """Peak memory of one GPU of one pipeline stage, in bytes (module docstring)."""

    weights: int
    gradients: int
    optimizer_states: int
    activations: int        # kept for the backward: every micro-batch in flight
    transient: int          # the largest short-lived set at the peak (loss logits, recomputed layer, gradients)
    comm_buffers: int       # allocator-side buffers (ZeRO/FSDP in flight, buckets, PP, SP)
    workspace: int          # cuBLAS / cuBLASLt workspaces
    fragmentation: int      # reserved by the caching allocator above the allocated peak
    cuda_context: int       # outside the allocator
    nccl_buffers: int       # outside the allocator
    capacity_bytes_per_gpu: int
    interval: tuple[int, int] = field(default=(0, 0))   # 80% interval of the reserved peak
    stage: int = 0          # pipeline rank
    host_bytes_per_gpu: int = 0   # offloaded states and activations in host memory (parallel.offload)
    # (weights, optimizer states) that parallel.offload keeps in host memory instead (``offloaded_states``;
    # part of host_bytes_per_gpu): still the model's state, which a checkpoint saves (clustersim.goodput)
    offloaded: tuple[int, int] = field(default=(0, 0))

    @property
    def allocated_peak_bytes(self) -> int:
        return (self.weights + self.gradients + self.optimizer_states + self.activations + self.transient
                + self.comm_buffers + self.workspace)

    @property
    def reserved_peak_bytes(self) -> int:
        return self.allocated_peak_bytes + self.fragmentation + self.cuda_context + self.nccl_buffers

    @property
    def peak_bytes_per_gpu(self) -> int:
        return self.reserved_peak_bytes

    @property
    def verdict(self) -> str:
        return VERDICTS[verdict_index(self.interval, self.capacity_bytes_per_gpu)]

    @property
    def fits(self) -> bool:
        return self.verdict != "does-not-fit"

    def parts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in PARTS}

    def to_json(self) -> dict[str, object]:
        return {**self.parts(), "allocated_peak_bytes": self.allocated_peak_bytes,
                "reserved_peak_bytes": self.reserved_peak_bytes, "peak_bytes_per_gpu": self.peak_bytes_per_gpu,
                "capacity_bytes_per_gpu": self.capacity_bytes_per_gpu, "interval": list(self.interval),
                "verdict": self.verdict, "fits": self.fits, "stage": self.stage,
                **({"host_bytes_per_gpu": self.host_bytes_per_gpu} if self.host_bytes_per_gpu else {})}


def stage_params(model: ModelSpec, layout: ParallelLayout, stage_layers: int, first: bool, last: bool,
                 moe_layers: int | None = None, mtp: bool | None = None) -> tuple[float, float]:
    """(dense parameters, expert parameters) held by one GPU of a stage whose ``stage_layers``
    layers include ``moe_layers`` MoE layers (None: all of them for a MoE model). The stage that
    runs the multi-token-prediction modules (``mtp``; None: the last) also holds them (one more
    layer, the 2h -> h projection and a copy of the embedding each uses, DeepSeek-V3 §2.2)."""
    moe_n = moe_count(model, stage_layers, moe_layers)
    expert = expert_params_per_gpu(model, layout.tp, layout.ep, layout.etp, moe=True) if moe_n else 0
    moe_layer = layer_params_per_gpu(model, layout.tp, layout.ep, True, layout.etp) if moe_n else 0
    dense_layer = layer_params_per_gpu(model, layout.tp, layout.ep, False, layout.etp)
    dense = (moe_layer - expert) * moe_n + dense_layer * (stage_layers - moe_n)
    experts = expert * moe_n
    vocab_shard = math.ceil(model.vocab / layout.tp) * model.hidden
    if first:
        dense += vocab_shard
    if last:
        dense += model.norm_width_params()   # final norm
        if not (model.tie_embeddings and first):
            dense += vocab_shard
    if (last if mtp is None else mtp) and model.mtp_layers:
        layer_e = expert_params_per_gpu(model, layout.tp, layout.ep, layout.etp)
        layer_all = layer_params_per_gpu(model, layout.tp, layout.ep, None, layout.etp)
        mtp_dense = layer_all - layer_e + model.mtp_extra_params(layout.tp)
        dense += model.mtp_layers * mtp_dense + (0 if first else vocab_shard)
        experts += model.mtp_layers * layer_e
    return float(dense), float(experts)


def moe_count(model: ModelSpec, stage_layers: int, moe_layers: int | None) -> int:
    """MoE layers among a stage's ``stage_layers`` (None: all of them for a MoE model)."""
    if not model.is_moe:
        return 0
    return stage_layers if moe_layers is None else moe_layers


def moe_share(model: ModelSpec, stage_layers: int, moe_layers: int | None) -> float | None:
    """The MoE layers' share of a stage's layers (None: not a MoE model, or all MoE)."""
    if not model.is_moe or moe_layers is None or not stage_layers or moe_layers >= stage_layers:
        return None
    return moe_layers / stage_layers


def shard_groups(layout: ParallelLayout) -> tuple[int, int]:
    """(dense, expert) ranks over which ZeRO shards the states: dp x cp (Megatron's distributed
    optimizer uses the dp x cp group, as the engine reduces), over the HSDP shard group with
    replicas; experts over the expert-data-parallel group."""
    dense = max(1, layout.dp * layout.cp // max(1, layout.hsdp_replicas if layout.zero_stage == 3 else 1))
    # experts: the expert-data-parallel group (MoE parallel folding: tp cp dp / (etp ep) ranks)
    return dense, max(1, layout.edp)


def state_shard_params(layout: ParallelLayout, dense: int, expert: int) -> int:
    """Parameters whose optimizer states one GPU holds and steps: all of them without ZeRO, else
    its shard of each over ``shard_groups`` (the optimizer step's time reads the same shard as
    its memory: clustersim.plan.optimizer_step)."""
    if layout.zero_stage < 1:
        return dense + expert
    d_group, e_group = shard_groups(layout)
    return math.ceil(dense / d_group) + math.ceil(expert / e_group)


def states(model: ModelSpec, layout: ParallelLayout, dtype: str, stage_layers: int, first: bool, last: bool,
           framework: FrameworkSpec | None, moe_layers: int | None = None,
           mtp: bool | None = None) -> tuple[int, int, int]:
    """(weights, gradients, optimizer states) of one GPU, rounded to bytes, before offload
    (Adam moments in ``layout.adam_moment_bytes``; gradients in the reduction's dtype where the
    framework accumulates in it: ``compute.dtypes.grad_held_bytes``)."""
    dense, expert = stage_params(model, layout, stage_layers, first, last, moe_layers, mtp)
    d_group, e_group = shard_groups(layout)
    mb, moments = layout.adam_moment_bytes, layout.optimizer_moments
    rd = grad_reduce_dtype(layout.zero_stage, layout.fsdp_version, framework, layout.grad_reduce_dtype, dtype=dtype)
    ad = grad_accum_dtype(layout.zero_stage, layout.fsdp_version, framework, layout.grad_accum_dtype)
    w1, g1, o1 = state_bytes(dense, d_group, layout.zero_stage, dtype, framework, mb, moments, rd, ad)
    w2, g2, o2 = state_bytes(expert, e_group, layout.zero_stage, dtype, framework, mb, moments, rd, ad)
    return int(round(w1 + w2)), int(round(g1 + g2)), int(round(o1 + o2))


def reduce_copy_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str, stage_layers: int, first: bool,
                      last: bool, framework: FrameworkSpec | None, moe_layers: int | None = None) -> int:
    """The copy of a stage's whole gradient buffer in the reduction dtype that a framework with
    ``reduce_cast_copy`` makes at the step's end (DeepSpeed's pipeline engine with BF16_Optimizer:
    pipe/engine.py ``_bf16_reduce_grads`` hands the fp32 flat buffer of each parameter group to
    engine.py ``buffered_allreduce_fallback``; ``allreduce_no_retain`` makes a group of more than 5e8
    elements one bucket, ``flatten`` of one tensor is a view, and ``allreduce_bucket`` casts it whole,
    ``tensor.to(self.communication_data_type)``): the reduction's bytes x the stage's parameters,
    0 where the buffer is already held in the reduction dtype or the framework reduces in buckets."""
    if framework is None or not framework.reduce_cast_copy:
        return 0
    rd = grad_reduce_dtype(layout.zero_stage, layout.fsdp_version, framework, layout.grad_reduce_dtype, dtype=dtype)
    ad = grad_accum_dtype(layout.zero_stage, layout.fsdp_version, framework, layout.grad_accum_dtype)
    rb = reduce_bytes(rd, dtype)
    if rb == grad_held_bytes(framework, rd, dtype, ad):
        return 0
    dense, expert = stage_params(model, layout, stage_layers, first, last, moe_layers)
    return int(round(rb * (dense + expert)))


def memory_report(model: ModelSpec, layout: ParallelLayout, cluster: ClusterSpec, dtype: str,
                  stage_layers: int, in_flight_micro_batches: float, first: bool, last: bool,
                  attention: str = "auto", framework: FrameworkSpec | None = None,
                  kernels: Kernels | None = None, policies: RankPolicies | None = None,
                  stage: int = 0, ends_in_flight: tuple[float, float] | None = None,
                  moe_layers: int | None = None, mtp: bool | None = None,
                  mtp_in_flight: float | None = None) -> MemoryReport:
    """Peak memory of one GPU of a pipeline stage holding ``stage_layers`` layers (all its chunks)
    with ``in_flight_micro_batches`` micro-batches' activations alive at once (from the schedule).

    ``framework``: the implementation (default Megatron-Core); ``kernels``: how its kernels keep
    tensors (default: the framework's on a GPU); ``policies``: the recompute policy of each layer
    (default: ``layout.recompute`` for all); ``ends_in_flight``: micro-batches of the first and of
    the last model chunk held at once (the embedding's and the loss's tensors), default
    ``in_flight_micro_batches``; ``moe_layers``: the MoE layers among ``stage_layers`` (None: all
    of them for a MoE model); ``mtp``: whether the stage runs the multi-token-prediction modules and
    ``mtp_in_flight`` the micro-batches of their chunk held at once (None: the last stage, with the
    last chunk's in flight)."""
    fw = framework or load_framework("megatron-core")
    if kernels is None:
        kernels = gpu_kernels("flash" if attention == "auto" else attention, fw.elementwise)
    if policies is None:
        policies = RankPolicies(((layout.recompute, int(stage_layers)),) if stage_layers else (), 1)
    k = float(in_flight_micro_batches)
    ends = (k, k) if ends_in_flight is None else (float(ends_in_flight[0]), float(ends_in_flight[1]))
    return _memory_report(model, layout, cluster, dtype, int(stage_layers), k, bool(first), bool(last), fw,
                          kernels, policies, int(stage), ends, None if moe_layers is None else int(moe_layers),
                          None if mtp is None else bool(mtp), None if mtp_in_flight is None else float(mtp_in_flight))


@functools.lru_cache(maxsize=16384)
def _memory_report(model: ModelSpec, layout: ParallelLayout, cluster: ClusterSpec, dtype: str,
                   stage_layers: int, in_flight: float, first: bool, last: bool, framework: FrameworkSpec,
                   kernels: Kernels, policies: RankPolicies, stage: int,
                   ends: tuple[float, float], moe_layers: int | None = None, mtp: bool | None = None,
                   mtp_in_flight: float | None = None) -> MemoryReport:
    check_dtype(dtype)
    if stage_layers < 0:
        raise InputError("stage_layers", stage_layers, "an integer >= 0")
    if in_flight < 0:
        raise InputError("in_flight_micro_batches", in_flight, "a number >= 0")
    st = states(model, layout, dtype, stage_layers, first, last, framework, moe_layers, mtp)
    held, backward = buffer_bytes(model, layout, dtype, stage_layers, first, last, framework)
    act, transient = activation_parts(model, layout, dtype, stage_layers, in_flight, first, last, framework,
                                      kernels, policies, backward, ends, moe_layers, mtp_in_flight)
    moved = offloaded_states(layout, st)
    st, act, host = offload(layout, st, act, in_flight, stage_layers, last,
                            optimizer_shard(model, layout, stage_layers, first, last, moe_layers, mtp))
    return assemble(st, act, transient, held, nccl_buffer_bytes(layout), cluster.gpu.hbm_capacity_bytes,
                    interval_factors(model, layout, framework, dtype), stage, host, moved,
                    reduce_copy_bytes(model, layout, dtype, stage_layers, first, last, framework, moe_layers))


# bytes per parameter of the fp32 gradient partition that ZeRO-Offload's host optimizer steps on: DeepSpeed
# keeps it on the host (deepspeed/runtime/zero/stage_1_and_2.py: single_partition_of_fp32_groups[i].grad
# on the cpu device, filled by async_inplace_copy_grad_to_fp32_buffer_from_gpu; stage3.py
# grad_partitions_flat_buffer, fp32, on self.device = cpu under offload_optimizer; deepspeedai/DeepSpeed
# edaa722), as Megatron's --optimizer-cpu-offload its fp32 main_grad shard (Ren et al. 2021, arXiv 2101.06840 §4)
HOST_GRAD_BYTES_PER_PARAM = 4


def optimizer_shard(model: ModelSpec, layout: ParallelLayout, stage_layers: int, first: bool, last: bool,
                    moe_layers: int | None = None, mtp: bool | None = None) -> int:
    """Parameters whose optimizer states one GPU of a stage steps (``state_shard_params`` of its
    ``stage_params``): what an offloaded optimizer holds on the host and steps there."""
    return state_shard_params(layout, *(int(round(x)) for x in stage_params(model, layout, stage_layers, first,
                                                                          last, moe_layers, mtp)))


def gpu_states(layout: ParallelLayout, states_: tuple[int, int, int]) -> tuple[int, int, int]:
    """(weights, gradients, optimizer states) left on the GPU after ``parallel.offload``, the one rule
    that the memory report and the sweep's screen (clustersim.sweep.rows) both apply:

    * optimizer offload takes the optimizer states off the GPU, and with ZeRO-2/3 the gradient
      partition too: DeepSpeed allocates no GPU partition under offload (stage_1_and_2.py
      copy_grads_in_partition returns before allocating grads_in_partition when cpu_offload;
      stage3.py grad_partitions_flat_buffer lives on self.device = cpu with offload_optimizer) and
      reduces each bucket straight into the host's fp32 partition; its reduction buckets (the ipg
      buckets: memory.buffers, ``comm_buffers``) stay on the GPU. ZeRO 0-1 keep their unsharded
      gradients on the GPU (stage 1 copies only its partition to the host; torch's .grad or
      Megatron's main_grad buffer stays);
    * parameter offload (ZeRO-Infinity) takes the ZeRO-3 parameter shards off."""
    w, g, o = states_
    if layout.offload_optimizer:
        o = 0
        if layout.zero_stage >= 2:
            g = 0
    if layout.offload_params:
        w = 0
    return w, g, o


def offloaded_states(layout: ParallelLayout, states_: tuple[int, int, int]) -> tuple[int, int]:
    """(weights, optimizer states) of ``states_`` that ``gpu_states`` takes off the GPU into host memory."""
    w, _, o = states_
    gw, _, go = gpu_states(layout, states_)
    return w - gw, o - go


def offload(layout: ParallelLayout, states_: tuple[int, int, int], activations: float, in_flight: float,
            stage_layers: int, last: bool, shard_params: int = 0) -> tuple[tuple[int, int, int], float, int]:
    """(states, activations, host bytes) after ``parallel.offload`` (clustersim.plan.host_offload):
    the GPU keeps ``gpu_states``; the host holds, once each, the optimizer states (ZeRO-Offload: fp32
    master weights and Adam moments, Ren et al. 2021, arXiv 2101.06840 §4) with the fp32 gradients of
    the ``shard_params`` parameters the host optimizer steps (``HOST_GRAD_BYTES_PER_PARAM``; the GPU's
    16-bit gradients are not counted again), and ZeRO-Infinity's ZeRO-3 parameter shards (arXiv
    2104.07857); activation offload leaves on the GPU only the layer being computed and the one being
    prefetched (double buffering, Megatron fine-grained activation offloading) - two layers' share
    of a micro-batch's activations."""
    w, _, o = states_
    host = 0.0
    if layout.offload_activations and stage_layers and in_flight:
        resident = 2 * activations / in_flight / max(1, stage_layers + (1 if last else 0))
        host += max(0.0, activations - resident)
        activations = min(activations, resident)
    if layout.offload_optimizer:
        host += o + HOST_GRAD_BYTES_PER_PARAM * shard_params
    if layout.offload_params:
        host += w
    return gpu_states(layout, states_), activations, int(round(host))


def verdict_index(interval: tuple[int, int], capacity: int) -> int:
    """0 fits (the whole interval below the capacity), 2 does-not-fit (the whole interval above),
    1 tight (it straddles the capacity): an index into VERDICTS."""
    lo, hi = interval
    if lo > capacity:
        return 2
    return 0 if hi <= capacity else 1


def peak_numbers(states_: tuple[int, int, int], activations: float, transient: float, buffers: float, nccl: int,
                 factors: tuple[float, float], step_end: int = 0) -> tuple[int, int, int, int, int, tuple[int, int]]:
    """(activations, transient, buffers, fragmentation, reserved peak, interval) in bytes: rounded
    parts, the fragmentation on what is not a state, the interval ``factors`` (evidence.py).

    ``step_end``: a block allocated at the step's end, when no activation is held
    (``reduce_copy_bytes``). The allocated peak is the larger of the two moments: the transient
    grows by what the block exceeds the activations, transient and buffers by. The caching
    allocator keeps the activations' freed blocks cached and, finding none as large, takes a new
    segment for the block (c10/cuda/CUDACachingAllocator.cpp ``malloc``: cached blocks first,
    cudaMalloc, and frees the cache only when that fails), so the reserved peak holds both: the
    smaller of the two is reserved above the allocated peak (fragmentation)."""
    w, g, o = states_
    act, trans, comm = int(round(activations)), int(round(transient)), int(round(buffers))
    held = act + trans + comm
    trans += max(0, step_end - held)
    allocated = w + g + o + act + trans + comm + CUBLAS_WORKSPACE_BYTES
    frag = int(round(fragmentation_bytes(held + CUBLAS_WORKSPACE_BYTES))) + min(held, step_end)
    outside = CUDA_CONTEXT_BYTES + nccl
    lo, hi = factors
    interval = (int(round((allocated + outside) * lo)), int(round((allocated + frag + outside) * hi)))
    return act, trans, comm, frag, allocated + frag + outside, interval


def assemble(states_: tuple[int, int, int], activations: float, transient: float, buffers: float, nccl: int,
             capacity: int, factors: tuple[float, float], stage: int = 0, host: int = 0,
             offloaded: tuple[int, int] = (0, 0), step_end: int = 0) -> MemoryReport:
    """The MemoryReport of these parts (``peak_numbers``). The sweep's screen computes its peaks
    and verdicts through ``peak_numbers`` too, so that both agree to the byte. ``offloaded``:
    ``offloaded_states`` of the states before offload; ``step_end``: ``reduce_copy_bytes``."""
    act, trans, comm, frag, _, interval = peak_numbers(states_, activations, transient, buffers, nccl, factors,
                                                       step_end)
    return MemoryReport(*states_, act, trans, comm, CUBLAS_WORKSPACE_BYTES, frag, CUDA_CONTEXT_BYTES, nccl, capacity,
                        interval, stage, host, offloaded)


def activation_parts(model: ModelSpec, layout: ParallelLayout, dtype: str, stage_layers: int, in_flight: float,
                     first: bool, last: bool, framework: FrameworkSpec, kernels: Kernels,
                     policies: RankPolicies, backward_buffers: float = 0.0,
                     ends: tuple[float, float] | None = None, moe_layers: int | None = None,
                     mtp_in_flight: float | None = None) -> tuple[float, float]:
    """(activations in flight, transient) of one GPU of a stage (activations.combine)."""
    units = layer_units(model, layout, dtype, framework, kernels, policies, moe_share(model, stage_layers, moe_layers))
    return combine(units, policies, stage_layers, in_flight, first, last,
                   ends if ends is not None else (in_flight, in_flight), backward_buffers, mtp_in_flight)


__all__ = ["HOST_GRAD_BYTES_PER_PARAM", "NCCL_BYTES_PER_COMMUNICATOR", "PARTS", "VERDICTS", "MemoryReport",
           "activation_parts", "assemble", "gpu_states", "optimizer_shard",
           "peak_numbers", "verdict_index",
           "memory_report", "moe_count", "moe_share", "offload", "offloaded_states", "reduce_copy_bytes",
           "shard_groups", "stage_params", "state_shard_params", "states"]
