"""What a training step costs on the host: kernel issue, synchronising calls, data loading.

The GPU runs what the CPU has issued. Between two synchronising calls the CPU runs ahead and
its launch time hides behind the kernels, unless the kernels are shorter than it takes to issue
them; after a synchronising call the GPU waits until the first kernel of what follows is issued.

* ``KERNEL_ISSUE_S``: CPU time to issue one kernel from eager PyTorch with autograd recording.
  Measured on this machine (2026-11-26, torch 2.13.0+cpu, one thread, AMD EPYC, load average 7-9
  on its 2 cores): ``torch.nn.functional.linear`` on 4x8 inputs with a weight that requires
  grad, median of 7 x 2,000 calls, 12.4 us (a 1-element ``torch.add`` without autograd 5.8 us;
  reproduce with ``python benchmarks/micro_fit.py --host``). The CPU build runs the same
  Python, dispatcher and autograd recording as the CUDA build; the CUDA build adds the driver's
  launch, about 2.5 us of CPU per ``cudaLaunchKernel`` (NVIDIA, "CUDA C++ Best Practices Guide",
  kernel launch overhead of a few microseconds; the 4 us kernel floor of
  clustersim.compute.roofline is its GPU-side counterpart). A loaded 2-core machine is slower
  than an idle training host, so this is on the high side.
* A step's *issue deficit*: per scheduled action (one stage's forward or backward of one
  micro-batch), ``max(0, kernels x KERNEL_ISSUE_S - the action's kernel seconds)``: where the
  CPU cannot keep up within an action the GPU idles. Large models never pay it (milliseconds of
  GEMMs per layer against tens of microseconds of issue); small layers in eager PyTorch do.
* Synchronising calls per step (the GPU idles for one kernel issue after each): Megatron-LM's
  level-1 timer barrier before the forward-backward (``barrier_with_L1_time`` on by default:
  megatron/training/training.py ``timers('forward-backward', log_level=1).start(barrier=...)``,
  one ``torch.distributed.barrier``, priced as a 4-byte all-reduce over all GPUs) and the
  gradient norm's ``.item()`` before the optimizer (megatron/core/optimizer/clip_grads.py
  ``clip_grad_norm_fp32`` returns a float; DeepSpeed's overflow check and global norm likewise);
  with fp16 the loss-scale check adds an all-reduce of the found-inf flag over the model-parallel
  group and its ``.item()`` (megatron/core/optimizer/optimizer.py
  ``_unscale_main_grads_and_check_for_nan``). torchtitan syncs once per step (its loss for the
  logger; torchtitan/train.py).
* Data: the data loader's workers prefetch (no step time); Megatron's ``get_batch`` broadcasts
  the micro-batch from TP rank 0 to the TP group on the first and last pipeline stages
  (megatron/training/utils.py ``get_batch_on_this_tp_rank``: tokens, labels, loss mask and
  position ids, four latency-bound broadcasts per micro-batch), on the compute stream.

Both engines read these from the step plan (clustersim.plan.step_plan ``SimRank.host_s``) as
one wait before the optimizer step, the breakdown's ``host`` cause.
"""

from __future__ import annotations

KERNEL_ISSUE_S = 12.4e-6 + 2.5e-6   # measured dispatch + autograd record (this machine) + cudaLaunchKernel (module docstring)
MEGATRON_BATCH_BROADCASTS = 4       # get_batch_on_this_tp_rank: tokens, labels, loss_mask, position_ids


def issue_deficit_s(kernels: int, kernel_s: float) -> float:
    """GPU idle time of one action whose ``kernels`` kernels take ``kernel_s`` on the GPU."""
    return max(0.0, kernels * KERNEL_ISSUE_S - kernel_s)


def sync_points(framework: str, dtype: str) -> int:
    """Synchronising host calls per step (module docstring)."""
    if framework == "torchtitan":
        return 1
    n = 2 if framework.startswith("megatron") else 1
    return n + (1 if dtype == "fp16" else 0)
