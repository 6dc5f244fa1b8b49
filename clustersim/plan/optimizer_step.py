"""One rank's optimizer step: the one cost that every model of the step (and the sweep's bounds) prices it by.

The step of a rank holding ``params`` parameters (before ZeRO sharding) is, one after another:

* Adam on the GPU (clustersim.compute.optimizer), or ZeRO-Offload's host Adam with the gradient
  and parameter copies over the host link (clustersim.plan.host_offload);
* the framework's passes over the whole gradient buffer before its data-parallel reduction
  (zeroing, NaN check, 1/dp scaling: ``FrameworkSpec.grad_buffer_bytes_per_param``, of a buffer
  held in bf16 half as many: ``compute.dtypes.grad_held_bytes``); ZeRO-3 keeps
  no whole buffer, and with one data-parallel rank the ZeRO stages are one layout (the sweep
  prunes them as such), so none is priced there;
* gradient clipping's global norm (``grad_norm_all_reduce_s``).

Its share per micro-batch, ``micro_batch_grad_pass_s``: a framework that keeps fp32 gradients
apart from the backward's 16-bit ones adds each micro-batch's gradients into them after that
micro-batch's backward (DeepSpeed's BF16_Optimizer: ``FrameworkSpec.micro_batch_grad_bytes_per_param``),
one memory-bound pass over the stage's parameters that clustersim.plan.stage_work appends to every
backward, so that both engines run it where the framework does.
"""

from __future__ import annotations

from clustersim.collectives import GroupShape, plan_collective
from clustersim.compute import optimizer_step_time_s
from clustersim.compute.dtypes import grad_held_bytes
from clustersim.compute.optimizer import grad_buffer_time_s
from clustersim.frameworks import grad_accum_dtype, grad_reduce_dtype
from clustersim.memory.report import state_shard_params
from clustersim.plan.host_offload import host_optimizer_time_s
from clustersim.scenario import Scenario


def optimizer_step_s(scenario: Scenario, params_per_gpu: int, expert_params_per_gpu: int = 0) -> float:
    """Seconds of the optimizer step of a rank holding ``params_per_gpu`` parameters, of which
    ``expert_params_per_gpu`` are experts' (module docstring). Adam steps the rank's ZeRO shard of
    each, as its memory holds them (clustersim.memory.report.state_shard_params: experts over the
    expert-data-parallel group, which is smaller than the data-parallel one)."""
    par, gpu = scenario.parallel, scenario.cluster.gpu
    fw = scenario.framework
    # the passes stream the buffer as it is held: half the bytes where it is bf16 (Megatron's
    # main_grad with --grad-reduce-in-bf16: compute.dtypes.grad_held_bytes against the fp32 grad_bytes)
    dtype = scenario.training.dtype
    held = grad_held_bytes(fw, grad_reduce_dtype(par.zero_stage, par.fsdp_version, fw, par.grad_reduce_dtype,
                                                 dtype=dtype), dtype,
                           grad_accum_dtype(par.zero_stage, par.fsdp_version, fw, par.grad_accum_dtype))
    buffer_bytes = (fw.grad_buffer_bytes_per_param * held // fw.grad_bytes
                    if par.zero_stage <= 2 and par.dp * par.cp > 1 else 0)
    shard = state_shard_params(par, params_per_gpu - expert_params_per_gpu, expert_params_per_gpu)
    step_s = (host_optimizer_time_s(scenario, shard) if par.offload_optimizer
              else optimizer_step_time_s(shard, par, gpu, scenario.training.dtype, buffer_bytes > 0))
    return step_s + grad_buffer_time_s(params_per_gpu, buffer_bytes, gpu) + grad_norm_all_reduce_s(scenario)


def micro_batch_grad_pass_s(scenario: Scenario, params_per_gpu: int) -> float:
    """Seconds of the framework's pass over a stage's ``params_per_gpu`` gradients after each
    micro-batch's backward (module docstring); 0 where the framework has none."""
    return grad_buffer_time_s(params_per_gpu, scenario.framework.micro_batch_grad_bytes_per_param,
                              scenario.cluster.gpu)


def grad_norm_all_reduce_s(scenario: Scenario) -> float:
    """Gradient clipping's global norm: every rank's partial squared norm is all-reduced (one fp32)
    before the optimizer can step (Megatron-Core megatron/core/optimizer/clip_grads.py
    get_grad_norm_fp32: all_reduce over the data-parallel then the model-parallel group;
    torch.nn.utils.clip_grad_norm_ on torchtitan's DTensors; DeepSpeed's get_global_norm). A
    latency-bound collective over the whole job, priced by the NCCL model (clustersim.collectives)."""
    cluster = scenario.cluster
    gpus = scenario.parallel.num_gpus
    if gpus == 1:
        return 0.0
    per_node = min(gpus, cluster.gpus_per_domain)  # group shapes count ranks per scale-up domain
    shape = GroupShape(per_node, gpus // per_node)
    return plan_collective("all_reduce", 4, cluster, shape).time_s
