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
* ``MEGATRON_LAYER_HOST_S``: Megatron-Core's CPU time per transformer layer and pass beyond the
  CUDA launches (its Python modules, the dispatcher, autograd recording), measured on this
  machine (2026-11-28, megatron-core 0.16.1 from PyPI, torch 2.13.0+cpu, one thread, load
  average 0.2-1.1; ``pip install megatron-core==0.16.1`` then ``python benchmarks/host_megatron.py``):
  a whole ``TransformerLayer`` (attention and MLP, local implementation) run forward and backward
  on CPU at tiny shapes (hidden 64, 4 tokens), so that what remains is host time; median of 3 x 5
  x 30 iterations. Dense layer 0.82 ms forward, 0.69 ms backward; MoE layer (16 experts, top-8,
  grouped GEMM, alltoall dispatcher) 1.56 ms and 1.20 ms, less the CPU's own loop over the
  experts inside the grouped GEMM (0.09 and 0.17 ms; on a GPU the grouped GEMM is its launches).
  Megatron-Core issues 42 / 98 (dense) and 77 / 124 (MoE) non-view ATen ops per layer forward /
  backward there (a 128-expert layer), against the 15-50 kernels clustersim's ops name, which is
  why a Megatron layer is priced as measured and not as kernels x ``KERNEL_ISSUE_S``. Each of
  clustersim's kernels adds its ``cudaLaunchKernel`` (``CUDA_LAUNCH_S``). A backward that
  recomputes a layer's forward adds that forward's host time in proportion to the kernels it
  recomputes. Other frameworks, and the embedding and the output layer, keep kernels x
  ``KERNEL_ISSUE_S``.
* A step's *issue deficit*: per scheduled action (one stage's forward or backward of one
  micro-batch), ``max(0, host seconds - the action's GPU seconds)`` (its contention-free time,
  collectives on its streams included: the CPU issues ahead while the GPU runs them): where the
  CPU cannot keep up within an action the GPU idles. Large models never pay it (milliseconds of
  GEMMs per layer against a millisecond of issue); small layers do.
* MoE dispatch syncs: a dropless Megatron MoE layer copies its token counts to the host and
  waits for them once per forward (megatron/core/transformer/moe/token_dispatcher.py
  ``_maybe_dtoh_and_synchronize`` in the alltoall dispatcher; the flex dispatcher's DeepEP
  dispatch spins on the received-token count, HybridEP's blocking dispatch likewise; none with
  the input padded to capacity, none in the backward: the split sizes are kept). The CPU cannot
  run ahead past it, so such a layer's deficit is its own (``max(0, host - GPU)`` per layer, not
  per action), and after each sync the GPU idles for one kernel issue.
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

from collections.abc import Sequence
from dataclasses import dataclass

from clustersim.frameworks import megatron_family

CUDA_LAUNCH_S = 2.5e-6              # cudaLaunchKernel's CPU time (module docstring)
KERNEL_ISSUE_S = 12.4e-6 + CUDA_LAUNCH_S   # measured dispatch + autograd record (this machine) + the launch
MEGATRON_BATCH_BROADCASTS = 4       # get_batch_on_this_tp_rank: tokens, labels, loss_mask, position_ids
# Megatron-Core host seconds per layer and pass, launches excluded (measured on this machine: module docstring)
MEGATRON_LAYER_HOST_S = {("dense", "F"): 0.82e-3, ("dense", "B"): 0.69e-3,
                         ("moe", "F"): 1.56e-3 - 0.09e-3, ("moe", "B"): 1.20e-3 - 0.17e-3}


@dataclass(frozen=True, slots=True)
class UnitIssue:
    """What the host spends on one unit (a layer, the embedding, the output layer) of an action:
    its CPU seconds and whether it ends the CPU's run-ahead (a MoE dispatch sync)."""

    host_s: float
    syncs: bool = False


def unit_issue(megatron: bool, role: str, part: str, kernels: int, recomputed_share: float = 0.0,
               syncs: bool = False) -> UnitIssue:
    """Host time of one unit of an action part (F, B, Bi, W): ``role`` "dense" or "moe" for a
    transformer layer, "" for the embedding, the output layer and the MTP modules;
    ``recomputed_share`` the fraction of the layer's forward kernels its backward recomputes."""
    if not megatron or not role or part == "W":
        return UnitIssue(kernels * KERNEL_ISSUE_S, syncs)
    key = "F" if part == "F" else "B"
    python_s = MEGATRON_LAYER_HOST_S[(role, key)]
    if key == "B":
        python_s += recomputed_share * MEGATRON_LAYER_HOST_S[(role, "F")]
    return UnitIssue(python_s + kernels * CUDA_LAUNCH_S, syncs)


def issue_deficit_s(units: Sequence[UnitIssue], gpu_s: Sequence[float]) -> float:
    """GPU idle time of one action: its units' host seconds against their GPU seconds (module
    docstring); a unit that syncs pays its own deficit and one kernel issue after the sync."""
    host_rest = gpu_rest = 0.0
    own = 0.0
    for u, g in zip(units, gpu_s, strict=True):
        if u.syncs:
            own += max(0.0, u.host_s - g) + KERNEL_ISSUE_S
        else:
            host_rest += u.host_s
            gpu_rest += g
    return own + max(0.0, host_rest - gpu_rest)


def sync_points(framework: str, dtype: str) -> int:
    """Synchronising host calls per step (module docstring)."""
    if framework == "torchtitan":
        return 1
    n = 2 if megatron_family(framework) else 1
    return n + (1 if dtype == "fp16" else 0)
