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
* ``MEGATRON_LAYER_HOST_S``: Megatron-Core's host time per transformer layer and pass beyond the
  CUDA launches clustersim counts: its Python modules, the dispatcher and autograd recording,
  measured on this machine's CPU, times what the CUDA path adds on the same CPU.
  On this machine (2026-11-28, megatron-core 0.16.1 from PyPI, torch 2.13.0+cpu, one thread,
  load average 0.2-1.1; ``pip install megatron-core==0.16.1`` then ``python
  benchmarks/host_megatron.py``): a whole ``TransformerLayer`` (attention and MLP, local
  implementation) run forward and backward on CPU at tiny shapes (hidden 64, 4 tokens), so that
  what remains is host time; median of 3 x 5 x 30 iterations. Dense layer 0.82 ms forward, 0.69
  ms backward. On three GPU machines lent to the project (one H200 each, 16-vCPU Intel Xeon VMs,
  torch 2.11.0+cu130; ``validation/micro/*_device_run*.sh``, results in
  ``validation/micro/h200_megatron_host_2026-11-28.txt``) the same layer run on the GPU in bf16
  (``benchmarks/host_megatron_layer.py --cuda --bf16``, each pass synchronised, so that its wall
  time is the host's) against the CPU alone on the same machine: dense forward 2.141 / 2.891 /
  3.033 ms against 1.391 / 0.947 / 1.652 (x 1.54, 3.05, 1.84: median ``CUDA_HOST_FACTOR`` 1.84),
  backward 2.455 / 3.337 / 3.875 against 1.223 / 0.836 / 1.495 (x 2.01, 3.99, 2.59: 2.59); the
  CPUs differ (the third machine's ran the CPU-only layer 1.7 x slower than the second's) but the
  factor is a property of the CUDA path (caching allocator, streams and events, autograd's device
  bookkeeping, the launches of Megatron-Core's own ops). One eager op costs the second machine's
  CPU 3.05 us without CUDA and 7.78 us with (``torch.add``), ``F.linear`` with autograd 4.15 and
  13.60 us. A MoE layer (16 experts, top-8, grouped GEMM, alltoall dispatcher) on the GPU costs
  the host 2.02 and 1.99 times the dense layer forward (machines 1 and 3: 4.413 - 0.087 ms
  against 2.141; 6.153 - 0.115 against 3.033; less the time inside the benchmark's grouped-GEMM
  stand-in), 1.46 and 1.35 times backward (3.758 - 0.171 against 2.455; 5.480 - 0.236 against
  3.875): means ``MOE_OVER_DENSE`` 2.00 and 1.41 (the dispatcher's device-to-host copies and
  syncs among them). So a dense layer costs 0.82 x 1.84 = 1.51 ms forward and 0.69 x 2.59 = 1.79
  ms backward, a MoE layer 3.02 and 2.52 ms, less the launches of the layer's own ops
  (``MEGATRON_LAYER_OPS`` x ``CUDA_LAUNCH_S``), as clustersim adds its own kernels' launches.
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
# Megatron-Core host seconds per layer and pass (module docstring): this CPU's CPU-only layer times,
# times the CUDA path's factor measured on three H200 machines (median), MoE over dense measured on
# the GPU, less the launches of the layer's own ops (clustersim counts its kernels' launches)
CPU_ONLY_DENSE_S = {"F": 0.82e-3, "B": 0.69e-3}                    # benchmarks/host_megatron.py, this machine
CUDA_HOST_FACTOR = {"F": 1.84, "B": 2.59}                          # validation/micro/h200_megatron_host_2026-11-28.txt
MOE_OVER_DENSE = {"F": (4.326 / 2.141 + 6.038 / 3.033) / 2, "B": (3.587 / 2.455 + 5.244 / 3.875) / 2}
MEGATRON_LAYER_OPS = {("dense", "F"): 42, ("dense", "B"): 98, ("moe", "F"): 77, ("moe", "B"): 124}
MEGATRON_LAYER_HOST_S = {
    (role, part): CPU_ONLY_DENSE_S[part] * CUDA_HOST_FACTOR[part] * (MOE_OVER_DENSE[part] if role == "moe" else 1.0)
    - MEGATRON_LAYER_OPS[(role, part)] * CUDA_LAUNCH_S
    for role in ("dense", "moe") for part in ("F", "B")}


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


def own_deficit_s(unit: UnitIssue, gpu_s: float) -> float:
    """GPU idle time a unit that syncs pays by itself (module docstring): its host seconds beyond
    its GPU seconds, and one kernel issue after the sync; 0 for a unit that does not sync (its
    host time pools with the action's other units in ``issue_deficit_s``)."""
    return max(0.0, unit.host_s - gpu_s) + KERNEL_ISSUE_S if unit.syncs else 0.0


def issue_deficit_s(units: Sequence[UnitIssue], gpu_s: Sequence[float]) -> float:
    """GPU idle time of one action: its units' host seconds against their GPU seconds (module
    docstring); a unit that syncs pays its own deficit (``own_deficit_s``), the others pool.
    At least the sum of the units' ``own_deficit_s`` (the sweep's floor)."""
    host_rest = gpu_rest = 0.0
    own = 0.0
    for u, g in zip(units, gpu_s, strict=True):
        if u.syncs:
            own += own_deficit_s(u, g)
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
