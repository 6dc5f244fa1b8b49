"""Buffers that hold memory besides states and activations: ZeRO-3/FSDP parameters and gradients
in flight, gradient buckets, pipeline and sequence-parallel buffers (through PyTorch's caching
allocator), and the CUDA context and NCCL buffers (outside it).

ZeRO-3 as implemented (``parallel.fsdp.version`` 1 or 2, else the framework's own ZeRO-3):
* the unit is one transformer layer (torchtitan ``fully_shard`` per block, FSDP1's
  transformer auto-wrap, Megatron-FSDP and DeepSpeed per-module fetch); the embedding and the
  output layer are units of their own (torchtitan/models/llama3/infra/parallelize.py apply_fsdp);
* forward and backward hold the unit being computed and ``prefetch`` units gathered ahead,
  unsharded in the compute dtype (FSDP2 implicit forward prefetch and explicit backward
  prefetch of one unit: torch/distributed/fsdp/_fully_shard/_fsdp_state.py; FSDP1
  BACKWARD_PRE and limit_all_gathers' two in-flight all-gathers);
* the backward also holds one unit's unsharded gradients (compute dtype) and the
  reduce-scatter input in the reduction dtype (FSDP2 ``foreach_reduce`` casts to
  ``reduce_dtype`` = fp32 in torchtitan; torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py);
* without resharding after forward (``frameworks.reshards_after_forward``) every unit of the
  stage stays unsharded from its forward to its backward; torchtitan turns it off under pipeline
  parallelism by default (torchtitan/models/llama3/infra/parallelize.py apply_fsdp:
  ``reshard_after_forward = not pp_enabled``) and keeps its [norm, output] unit unsharded after
  forward;
* inside torch.distributed.pipelining stages (``frameworks.fsdp_in_pipeline_stage``: torchtitan
  with pp > 1) every unit of the stage is held unsharded whatever ``reshard_after_forward`` says:
  each backward but the last runs with ``set_reshard_after_backward(False)`` and
  ``set_requires_gradient_sync(False)`` (torch/distributed/pipelining/stage.py
  ``backward_maybe_with_nosync``), so after a backward every unit it re-gathered stays
  unsharded, and the stage's unsharded gradients accumulate in the reduction dtype until the last
  backward reduce-scatters them (FSDP2 ``unsharded_accumulated_grad``,
  torch/distributed/fsdp/_fully_shard/_fsdp_param.py); the plan reads the same rule for its one
  reduce-scatter per unit per step;
* DeepSpeed's ZeRO-3 also holds its flat gradient bucket of ``reduce_bucket_size`` elements
  (``deepspeed_zero3_bucket_bytes``).
"""

from __future__ import annotations

import math

from clustersim import frameworks
from clustersim.compute.conventions import gated_factor
from clustersim.compute.dtypes import activation_bytes, reduce_bytes
from clustersim.compute.layer import layer_params_per_gpu
from clustersim.frameworks import FrameworkSpec
from clustersim.parallel.layout import ParallelLayout
from clustersim.units import MiB
from clustersim.workload.model_spec import ModelSpec

# CUDA context + loaded kernels of a PyTorch process: about 0.5 GiB on A100/H100 (what nvidia-smi
# shows for a process that has only initialised CUDA; PyTorch docs, "CUDA semantics - memory
# management": the context is not counted by memory_allocated). Taken as 512 MiB.
CUDA_CONTEXT_BYTES = 512 * MiB
# cuBLAS / cuBLASLt workspaces: PyTorch allocates 32 MiB per handle on Hopper (4 MiB x 8 before,
# CUBLAS_WORKSPACE_CONFIG default ":4096:8"), Transformer Engine 32 MiB for sm90 (4 MiB otherwise);
# two handles (PyTorch + TE) -> 64 MiB. Allocated through the caching allocator.
CUBLAS_WORKSPACE_BYTES = 64 * MiB
# NCCL: every communicator allocates per channel a receive buffer per protocol; NCCL_BUFFSIZE is 4 MiB
# by default (NCCL docs, environment variables, NCCL_BUFFSIZE) for the Simple protocol, LL128 about
# the same. With 16 channels: 16 x 2 x 4 MiB = 128 MiB per communicator the rank belongs to.
NCCL_BYTES_PER_COMMUNICATOR = 16 * 2 * 4 * MiB


def communicators(layout: ParallelLayout) -> int:
    """Process groups with more than one rank that a GPU belongs to (tp, pp, dp, cp, ep; HSDP
    splits the data-parallel group into a shard and a replicate group)."""
    groups = sum(1 for n in (layout.tp, layout.pp, layout.dp, layout.cp, layout.ep) if n > 1)
    if layout.zero_stage == 3 and layout.hsdp_replicas > 1 and layout.dp // layout.hsdp_replicas > 1:
        groups += 1
    return groups


def nccl_buffer_bytes(layout: ParallelLayout) -> int:
    return communicators(layout) * NCCL_BYTES_PER_COMMUNICATOR


def _reduce_bytes(layout: ParallelLayout, dtype: str, framework: FrameworkSpec | None) -> int:
    """Bytes per reduced gradient element, the plan's rule (``compute.dtypes.reduce_bytes`` of
    ``frameworks.grad_reduce_dtype``)."""
    return reduce_bytes(frameworks.grad_reduce_dtype(layout.zero_stage, layout.fsdp_version, framework,
                                                     layout.grad_reduce_dtype, dtype=dtype), dtype)


def zero3_in_flight_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str, stage_layers: int,
                          first: bool, last: bool, framework: FrameworkSpec | None) -> tuple[float, float]:
    """ZeRO-3 / FSDP: (unsharded parameters in flight, unsharded gradients and reduce-scatter
    input alive during a backward) (module docstring)."""
    wb = activation_bytes(dtype)                 # gathered in the compute dtype (fp8 runs keep bf16 copies)
    rb = _reduce_bytes(layout, dtype, framework)
    layer = layer_params_per_gpu(model, layout.tp, layout.ep)
    vocab_unit = math.ceil(model.vocab / layout.tp) * model.hidden
    units = [layer] * (stage_layers > 0) + [vocab_unit] * (first or last)
    unit = max(units, default=0)
    fsdp2 = frameworks.zero3_impl(layout.fsdp_version, framework) == "fsdp2"
    in_pipeline = frameworks.fsdp_in_pipeline_stage(layout, framework)
    stage_units = layer * stage_layers + vocab_unit * (int(first) + int(last))
    if frameworks.reshards_after_forward(layout, framework) and not in_pipeline:
        # the 1 + prefetch largest of the stage's units, each once: a prefetch past the last unit
        # gathers nothing more (fsdp.prefetch 64 counted 64 units on a stage of 32 layers), and the
        # embedding, a stage's largest unit, is one unit (prefetch 1 counted two of its size)
        sizes = sorted([vocab_unit] * (int(first) + int(last)) + [layer] * stage_layers, reverse=True)
        params = sum(sizes[:1 + layout.fsdp_prefetch]) * wb
        if last and fsdp2:
            params += vocab_unit * wb            # the [norm, output] unit is not resharded after forward
    else:
        params = stage_units * wb
    grads = unit * (wb + rb)                     # one unit's unsharded gradients and its reduce-scatter input
    if in_pipeline and layout.num_micro_batches > 1:
        params += stage_units * rb               # gradients accumulate unsharded until the last backward
    return params, grads


def zero2_bucket_buffers(layout: ParallelLayout) -> int:
    """ZeRO-2's gradient bucket buffers per GPU: two when the reduction overlaps the backward
    (``overlap_grad_reduce``), one bucket filling while the other is reduced, else one.
    DeepSpeed's stage_1_and_2.py ``setup_buckets`` (deepspeedai/DeepSpeed edaa722) allocates
    ``buf_0`` of reduce_bucket_size elements and ``buf_1`` only ``if self.overlap_comm`` ("Use
    double buffers to avoid data access conflict when overlap_comm is enabled")."""
    return 2 if layout.overlap_grad_reduce else 1


def deepspeed_zero3_bucket_bytes(layout: ParallelLayout, dtype: str, framework: FrameworkSpec | None) -> int:
    """DeepSpeed ZeRO-3's contiguous gradient bucket: one flat buffer of ``reduce_bucket_size``
    elements in the communication dtype per communication dtype (one: the training dtype by
    default), allocated whole at the optimizer's construction and held for the run whatever the
    model's size (deepspeed/runtime/zero/stage3.py DeepSpeedZeroOptimizer_Stage3.__init__: ``if
    self.contiguous_gradients: bucket.buffer = torch.empty(self.reduce_bucket_size, dtype=dtype)``;
    contiguous_gradients defaults to true, deepspeed/runtime/zero/config.py). The bucket is the
    plan's (``frameworks.grad_bucket_params``); 0 for the other ZeRO-3 implementations."""
    if not frameworks.runs_deepspeed_zero3(layout.zero_stage, layout.fsdp_version, framework):
        return 0
    bucket = frameworks.grad_bucket_params(framework, layout)
    return bucket * _reduce_bytes(layout, dtype, framework)


def grad_cast_bytes(model: ModelSpec, layout: ParallelLayout, framework: FrameworkSpec | None
                    ) -> tuple[float, float]:
    """(a layer's, the vocabulary shard's) fp32 copy that a framework keeping its 16-bit ``.grad``
    (``FrameworkSpec.keeps_lp_grads``) makes when it adds each gradient into its fp32 buffer after a
    backward: DeepSpeed BF16_Optimizer.update_hp_grads runs ``hp_grad.add_(lp.grad.to(hp_grad.dtype))``
    parameter by parameter (deepspeed/runtime/bf16_optimizer.py), so the largest parameter's copy,
    ``grad_bytes`` per element, is alive for a moment: of a layer, the larger of its fused QKV and
    fc1 (gate and up fused) weights; on a stage holding the embedding, its vocabulary shard. (0, 0)
    for the other frameworks."""
    if framework is None or not framework.keeps_lp_grads:
        return 0.0, 0.0
    h = model.hidden
    qkv = h * (model.q_width + 2 * model.kv_hidden) / layout.tp
    fc1 = gated_factor(model) * math.ceil(model.ffn_hidden / layout.tp) * h
    vocab = math.ceil(model.vocab / layout.tp) * h
    return framework.grad_bytes * max(qkv, fc1), float(framework.grad_bytes * vocab)


def buffer_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str, stage_layers: int, first: bool = False,
                 last: bool = False, framework: FrameworkSpec | None = None) -> tuple[float, float]:
    """Allocator-side buffers of one GPU: (held through the step's peak: SP gather buffer, PP
    send/recv tensors, ZeRO-2 buckets, ZeRO-3 parameters in flight and DeepSpeed's ZeRO-3 bucket;
    alive only during a
    backward: ZeRO-3 unsharded gradients and reduce-scatter input)."""
    a_b = activation_bytes(dtype)
    tokens = layout.micro_batch * math.ceil(model.seq_len / layout.cp)
    sp = layout.sequence_parallel and layout.tp > 1
    total = 0.0
    if sp:
        total += tokens * model.hidden * a_b            # Megatron's global buffer for the gathered input
    if layout.pp > 1:
        total += 2 * tokens * model.hidden * a_b / (layout.tp if sp else 1)   # one send + one recv tensor
    if layout.zero_stage == 2:
        # gradient buckets reduce-scattered from an unsharded bucket in the reduction dtype, of the
        # framework's bucket size (clustersim.frameworks.grad_bucket_params), zero2_bucket_buffers of them
        bucket = frameworks.grad_bucket_params(framework, layout)
        stage = layer_params_per_gpu(model, layout.tp, layout.ep) * max(1, stage_layers)
        total += zero2_bucket_buffers(layout) * min(bucket, stage) * _reduce_bytes(layout, dtype, framework)
    backward = 0.0
    if layout.zero_stage >= 3:
        params, backward = zero3_in_flight_bytes(model, layout, dtype, stage_layers, first, last, framework)
        total += params + deepspeed_zero3_bucket_bytes(layout, dtype, framework)
    return total, backward


__all__ = ["CUBLAS_WORKSPACE_BYTES", "CUDA_CONTEXT_BYTES", "NCCL_BYTES_PER_COMMUNICATOR", "buffer_bytes",
           "communicators", "deepspeed_zero3_bucket_bytes", "grad_cast_bytes", "nccl_buffer_bytes", "zero2_bucket_buffers",
           "zero3_in_flight_bytes"]
