"""ZeRO-3 traffic of one step, as the implementation that the scenario names issues it.

ZeRO-3 runs as the implementation that the scenario names (``Zero3Plan``, built by
``zero3_plan``): the framework's own (``FrameworkSpec.zero3``) or torch FSDP when
``parallel.fsdp.version`` is set. What they share (Rajbhandari et al. 2020, ZeRO, §5): a unit's
16-bit parameters are all-gathered before its forward and, when they were freed after it, again
before its backward; its gradients are reduce-scattered after its backward in every micro-batch
(nothing unsharded is kept between micro-batches), except inside torch.distributed.pipelining
stages (torchtitan with pp > 1, ``frameworks.fsdp_in_pipeline_stage``): there the stage
accumulates unsharded gradients and reduce-scatters every unit once per step, after its last
backward (``DpPlan.after_backward``, the rank's tail; torch/distributed/pipelining/stage.py
``backward_maybe_with_nosync``), and does not reshard after forward unless the scenario says so
(torchtitan's "default" policy, ``frameworks.reshards_after_forward``). What differs, each from its source:

* **torch FSDP2** (``fully_shard`` per transformer block, torch/distributed/fsdp/_fully_shard/):
  one all-gather per block in the parameter dtype, issued ``prefetch`` blocks ahead (implicit
  prefetch of the next block in forward and backward: _fsdp_state.py / _fsdp_param_group.py),
  reduce-scatter in ``reduce_dtype`` on its own stream after each block's backward; without
  resharding after forward (``reshard_after_forward: false``, torchtitan's default under PP) the
  backward needs no second gather. Activation recompute
  inside a block reuses the block's unsharded parameters (torchtitan wraps the checkpointed
  block in fully_shard, so the recomputed forward runs no FSDP hook).
* **torch FSDP1** (FlatParameter per wrapped block, torch/distributed/fsdp/): the same traffic;
  ``backward_prefetch=BACKWARD_PRE`` and the all-gather rate limiter (``limit_all_gathers``: at
  most two in flight) bound the run-ahead to the next block.
* **Megatron-FSDP** (megatron/core/distributed/fsdp/): per-module parameter buckets gathered
  one ahead, gradients reduce-scattered per bucket in fp32 (``grad_reduce_in_fp32``).
* **DeepSpeed ZeRO-3** (deepspeed/runtime/zero/partitioned_param_coordinator.py,
  parameter_offload.py): parameters fetched per submodule, one submodule ahead when submodules
  exceed ``stage3_prefetch_bucket_size`` (5e7 elements, DeepSpeed config docs); released after
  each submodule's forward unless re-used within ``stage3_max_reuse_distance`` (1e9 elements),
  so with full activation recompute a layer larger than that is gathered three times per
  micro-batch (forward, the recomputed forward, backward); gradients reduce-scattered in the
  communication dtype (the training dtype by default) in buckets of ``reduce_bucket_size``
  (``parallel.dp_bucket_params``, else 5e8 elements: ``frameworks.grad_bucket_params``), a bucket
  closing at the unit whose gradients fill it (stage3.py reduce_independent_p_g_buckets_and_remove_grads
  flushes before the parameter that would overflow it), on a separate stream (the compute stream
  without overlap_comm). Its collectives are modelled as rings in which every hop
  crosses the scale-out fabric (each GPU's own NIC carries its whole share, not 1/8 of it as
  NCCL's topology-aware rings would): SC21 Table 2 (../shared/calibration/
  megatron_sc21_zero3_vs_3d_175b.csv) measured the ZeRO-3 step of GPT-3 175B at 66.75 s on 768
  and on 1,536 A100s alike, i.e. communication-bound at 4 x 350 GB / 66.75 s = 21 GB/s per GPU:
  one 200 Gb/s HDR NIC per GPU at its achievable rate, eight times below what the node's eight
  NICs deliver to NCCL's rings (the model's node-aggregate rings had predicted 5.5 s).
* **HSDP** (``hsdp_replicas`` > 1; FSDP2's 2-D mesh, DeepSpeed ZeRO++ hpZ is the analogue): shard
  over ``dp * cp / hsdp_replicas`` ranks, replicate across ``hsdp_replicas``: gathers and
  reduce-scatters stay inside the shard group, and each reduced shard is all-reduced over the
  replica group.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

from clustersim import frameworks
from clustersim.collectives import CollectivePlan, Phase
from clustersim.compute.dtypes import activation_bytes
from clustersim.parallel.layout import ParallelLayout
from clustersim.plan.comm_plans import Item, comm_plan, group_shape
from clustersim.plan.dp_rules import bucket_params, close_buckets, grad_reduce_bytes, zero3_impl
from clustersim.plan.host_offload import host_copy_plan
from clustersim.plan.stage_work import StepWork
from clustersim.scenario import Scenario

# DeepSpeed ZeRO-3 defaults (DeepSpeed configuration docs, zero_optimization section;
# deepspeed/runtime/zero/config.py)
DS_PREFETCH_BUCKET_PARAMS = 50_000_000     # stage3_prefetch_bucket_size
DS_MAX_REUSE_DISTANCE_PARAMS = 1_000_000_000  # stage3_max_reuse_distance


@dataclass(frozen=True, slots=True)
class Zero3Plan:
    """ZeRO-3 traffic of one step as one implementation issues it (module docstring)."""

    impl: str                   # fsdp1 | fsdp2 | megatron-fsdp | deepspeed
    prefetch: int               # gathers issued this many units ahead of the unit in use
    backward_gathers: int       # gathers of a unit in each backward: 0 (kept), 1, or 2 (re-gather for recompute)
    gather: dict[tuple[int, int], tuple[Item, ...]] = field(default_factory=dict)  # (stage, fwd unit)
    reduce: dict[tuple[int, int], tuple[Item, ...]] = field(default_factory=dict)  # (stage, bwd unit), every micro-batch


def zero3_plan(scenario: Scenario, work: StepWork) -> Zero3Plan:
    """Gathers and reduce-scatters of every ZeRO-3 unit (a stage's embedding, layers, output head)."""
    par = scenario.parallel
    impl = zero3_impl(scenario)
    deepspeed = impl == "deepspeed"
    param_bytes = activation_bytes(scenario.training.dtype)
    grad_bytes = grad_reduce_bytes(scenario)
    hsdp = par.hsdp_replicas > 1
    shard_axis = zero3_shard_axis(scenario)
    shard_ranks = zero3_shard_ranks(par)
    edp = par.edp
    gather: dict[tuple[int, int], tuple[Item, ...]] = {}
    reduce: dict[tuple[int, int], tuple[Item, ...]] = {}
    largest = 0
    for stage in work.stages:
        g = stage.index
        n = len(stage.unit_params)
        for b, (dense, expert) in enumerate(zip(stage.unit_params, stage.unit_expert_params, strict=True)):
            u = n - 1 - b  # the forward index of backward unit b
            largest = max(largest, dense + expert)
            items: list[Item] = []
            dense_plan, expert_plan = zero3_unit_gathers(scenario, dense, expert)
            if dense_plan is not None:
                items.append(Item(f"all_gather params s{g}.{u} ({dense / 1e6:.0f}M)", dense_plan))
            if expert_plan is not None:
                items.append(Item(f"all_gather expert params s{g}.{u} ({expert / 1e6:.0f}M)", expert_plan))
            if items and par.offload_params:  # ZeRO-Infinity: the shards first come up from host memory
                shard = (dense / max(1, shard_ranks) + expert / max(1, edp)) * param_bytes
                items.insert(0, Item(f"h2d param shards s{g}.{u}", host_copy_plan(scenario, shard)))
            if items:
                gather[(g, u)] = tuple(items)
        groups = [(stage.unit_params, shard_axis, shard_ranks, "")]
        if any(stage.unit_expert_params):
            groups.append((stage.unit_expert_params, "edp", edp, " experts"))
        bucket = bucket_params(scenario) if deepspeed else 1  # DeepSpeed's reduce_bucket_size, else per unit
        for unit_params, axis, ranks, tag in groups:
            for b, params in close_buckets(unit_params, bucket):
                if not params or ranks == 1 and not hsdp:
                    continue
                items = [Item(f"reduce_scatter grads{tag} s{g}.{b} ({params / 1e6:.0f}M)",
                          zero3_grad_reduce(scenario, params, axis))] if ranks > 1 else []
                if hsdp and axis == shard_axis:
                    items.append(Item(f"all_reduce grads{tag} s{g}.{b} over replicas",
                                  comm_plan(scenario, "all_reduce", params * grad_bytes / shard_ranks,
                                            "fsdp_replicate")))
                reduce[(g, b)] = reduce.get((g, b), ()) + tuple(items)
    prefetch = 1 if deepspeed else par.fsdp_prefetch
    return Zero3Plan(impl, prefetch, zero3_backward_gathers(scenario, largest), gather, reduce)


@functools.lru_cache(maxsize=65536)
def zero3_unit_gathers(scenario: Scenario, dense: int, expert: int = 0
                       ) -> tuple[CollectivePlan | None, CollectivePlan | None]:
    """The all-gathers of one unit's 16-bit parameters, run one after the other on the rank's
    stream: its ``dense`` parameters over the shard group (None where one rank holds them all, or
    there are none), its ``expert`` parameters over the expert-data-parallel group (None: none).
    What ``zero3_plan`` issues per unit (after ZeRO-Infinity's host copy), and the sweep's bounds
    at a layer's fewest parameters. Memoised (a pure function of the frozen scenario): a step's
    layers repeat a few sizes."""
    par = scenario.parallel
    nbytes = activation_bytes(scenario.training.dtype)
    dense_plan = expert_plan = None
    if dense and zero3_shard_ranks(par) > 1:
        dense_plan = zero3_collective(scenario, "all_gather", dense * nbytes, zero3_shard_axis(scenario))
    if expert:  # expert weights are sharded over the expert-data-parallel group
        expert_plan = zero3_collective(scenario, "all_gather", expert * nbytes, "edp")
    return dense_plan, expert_plan


@functools.lru_cache(maxsize=65536)
def zero3_grad_reduce(scenario: Scenario, params: int, axis: str) -> CollectivePlan:
    """The reduce-scatter of ``params`` gradients over a group of ``axis`` (the shard group or the
    expert-data-parallel group), in the implementation's gradient bytes: one bucket of
    ``zero3_plan``, and the sweep's bound of the embedding's."""
    return zero3_collective(scenario, "reduce_scatter", params * grad_reduce_bytes(scenario), axis)


def zero3_backward_gathers(scenario: Scenario, largest_unit_params: int) -> int:
    """Gathers of a unit's parameters in each backward (module docstring): DeepSpeed re-gathers for
    the recomputed forward when a unit exceeds stage3_max_reuse_distance; FSDP keeps the forward's
    parameters when it does not reshard after forward (``frameworks.reshards_after_forward``:
    the scenario's ``parallel.fsdp.reshard_after_forward``, else off in torchtitan under PP)."""
    par = scenario.parallel
    if zero3_impl(scenario) == "deepspeed":
        return 2 if par.recompute == "full" and largest_unit_params > DS_MAX_REUSE_DISTANCE_PARAMS else 1
    return 1 if frameworks.reshards_after_forward(par, scenario.framework) else 0


def zero3_shard_ranks(parallel: ParallelLayout) -> int:
    """The ranks a dense parameter is sharded over: the data- and context-parallel ranks of one
    HSDP replica (module docstring); at 1 a rank holds its parameters whole and nothing is
    gathered or reduce-scattered over the shard group."""
    return parallel.dp * parallel.cp // parallel.hsdp_replicas


def zero3_shard_axis(scenario: Scenario) -> str:
    return "fsdp_shard" if scenario.parallel.hsdp_replicas > 1 else "dp_cp"


def zero3_collective(scenario: Scenario, op: str, size_bytes: float, axis: str) -> CollectivePlan:
    """A ZeRO-3 collective as the implementation runs it (per-GPU NIC rings for DeepSpeed)."""
    p = comm_plan(scenario, op, size_bytes, axis)
    return per_gpu_nic(scenario, p, axis) if zero3_impl(scenario) == "deepspeed" else p


def per_gpu_nic(scenario: Scenario, plan: CollectivePlan, axis: str) -> CollectivePlan:
    """The same collective with every ring hop crossing the scale-out fabric: each GPU's NIC share
    carries the GPU's whole share of the data instead of 1/ranks_per_node of it (DeepSpeed ZeRO-3,
    module docstring). A group inside one node keeps NVLink."""
    shape = group_shape(scenario, axis)
    if shape.num_nodes == 1 or shape.ranks_per_node == 1:
        return plan
    k = shape.ranks_per_node
    phases = tuple(Phase(ph.tier, ph.latency_s, ph.wire_bytes * k, ph.bw_bytes_per_s)
                   if ph.tier == "scale_out" else ph for ph in plan.phases)
    return replace(plan, phases=phases, algo=f"{plan.algo}/per-gpu-nic")


def gather_slots(z3: Zero3Plan, num_units: int, g: int, kind: str) -> list[tuple[Item, ...]]:
    """ZeRO-3 gathers of an action's units in the order of use: one slot per forward unit; in a
    backward, ``backward_gathers`` slots per unit (the recomputed forward's, then the backward's),
    units in backward order. Both engines issue them ``prefetch`` slots ahead of use."""
    if kind == "F":
        return [z3.gather.get((g, u), ()) for u in range(num_units)]
    return [z3.gather.get((g, num_units - 1 - b), ()) for b in range(num_units) for _ in range(z3.backward_gathers)]
