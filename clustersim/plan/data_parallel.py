"""Data-parallel communication of one step: gradient buckets and parameter gathers (ZeRO 0-3).

Follows Megatron-core's DistributedDataParallel and distributed optimizer
(megatron/core/distributed/): gradients accumulate in fp32 ``main_grad`` buffers and are
reduced in the framework's gradient dtype (``FrameworkSpec.grad_reduce_dtype``: fp32 for Megatron,
``accumulate_allreduce_grads_in_fp32`` being on for bf16; the training dtype for DeepSpeed), in buckets of
``max(40M, 1M * dp)`` parameters launched as soon as a bucket's last gradient is ready during
the final micro-batch's backward (``overlap_grad_reduce``). ZeRO-0 all-reduces the gradients;
ZeRO-1/2 (the distributed optimizer) reduce-scatter them and all-gather the updated 16-bit
parameters, overlapped with the next forward pass when ``overlap_param_gather`` is set (the
first bucket is still exposed). Reductions span the dp x cp ranks.

ZeRO-3 runs as the implementation that the scenario names (``Zero3Plan``, built by
``zero3_plan``): the framework's own (``FrameworkSpec.zero3``) or torch FSDP when
``parallel.fsdp.version`` is set. What they share (Rajbhandari et al. 2020, ZeRO, §5): a unit's
16-bit parameters are all-gathered before its forward and, when they were freed after it, again
before its backward; its gradients are reduce-scattered after its backward in every micro-batch
(nothing unsharded is kept between micro-batches). What differs, each from its source:

* **torch FSDP2** (``fully_shard`` per transformer block, torch/distributed/fsdp/_fully_shard/):
  one all-gather per block in the parameter dtype, issued ``prefetch`` blocks ahead (implicit
  prefetch of the next block in forward and backward: _fsdp_state.py / _fsdp_param_group.py),
  reduce-scatter in ``reduce_dtype`` on its own stream after each block's backward; with
  ``reshard_after_forward: false`` the backward needs no second gather. Activation recompute
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
  (5e8 elements) on a separate stream. Its collectives are modelled as rings in which every hop
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

from clustersim.collectives import CollectivePlan, Phase
from clustersim.plan.comm_plans import comm_plan, group_shape
from clustersim.plan.host_offload import host_copy_plan
from clustersim.plan.stage_work import StepWork, activation_bytes, build_step_work
from clustersim.scenario import Scenario

Item = tuple[str, CollectivePlan]


# DeepSpeed ZeRO-3 defaults (DeepSpeed configuration docs, zero_optimization section;
# deepspeed/runtime/zero/config.py)
DS_PREFETCH_BUCKET_PARAMS = 50_000_000     # stage3_prefetch_bucket_size
DS_MAX_REUSE_DISTANCE_PARAMS = 1_000_000_000  # stage3_max_reuse_distance
DS_REDUCE_BUCKET_PARAMS = 500_000_000      # reduce_bucket_size


@dataclass(frozen=True, slots=True)
class Zero3Plan:
    """ZeRO-3 traffic of one step as one implementation issues it (module docstring)."""

    impl: str                   # fsdp1 | fsdp2 | megatron-fsdp | deepspeed
    prefetch: int               # gathers issued this many units ahead of the unit in use
    backward_gathers: int       # gathers of a unit in each backward: 0 (kept), 1, or 2 (re-gather for recompute)
    gather: dict[tuple[int, int], tuple[Item, ...]] = field(default_factory=dict)  # (stage, fwd unit)
    reduce: dict[tuple[int, int], tuple[Item, ...]] = field(default_factory=dict)  # (stage, bwd unit), every micro-batch


@dataclass(frozen=True, slots=True)
class DpPlan:
    grad_buckets: dict[tuple[int, int], tuple[Item, ...]] = field(default_factory=dict)  # (stage, bwd unit)
    after_backward: dict[int, tuple[Item, ...]] = field(default_factory=dict)   # stage -> after the backward
    param_gathers: dict[tuple[int, int], tuple[Item, ...]] = field(default_factory=dict)  # (stage, fwd unit)
    after_optimizer: dict[int, tuple[Item, ...]] = field(default_factory=dict)  # stage -> after the step
    zero3: Zero3Plan | None = None

    def after_backward_of(self, stages: list[int]) -> tuple[Item, ...]:
        return tuple(item for g in stages for item in self.after_backward.get(g, ()))

    def after_optimizer_of(self, stages: list[int]) -> tuple[Item, ...]:
        return tuple(item for g in stages for item in self.after_optimizer.get(g, ()))


def bucket_params(scenario: Scenario) -> int:
    par = scenario.parallel
    return par.dp_bucket_params or max(40_000_000, 1_000_000 * par.dp * par.cp)


@functools.lru_cache(maxsize=65536)
def _buckets(unit_params: tuple[int, ...], size: int) -> tuple[tuple[int, int], ...]:
    """Close a bucket at the unit where the running sum reaches ``size``: ((last unit, params), ...)
    (memoised: the sweep's bounds plan many layouts with the same stages)."""
    out, acc = [], 0
    for u, p in enumerate(unit_params):
        acc += p
        if acc >= size:
            out.append((u, acc))
            acc = 0
    if acc:
        out.append((len(unit_params) - 1, acc))
    return tuple(out)


@functools.lru_cache(maxsize=65536)
def _gather_buckets(fwd_params: tuple[int, ...], size: int) -> tuple[tuple[int, int], ...]:
    """The parameter gathers' buckets in forward order: ((first unit, params), ...)."""
    return tuple((unit - _units_in_bucket(fwd_params, unit, params) + 1, params)
                 for unit, params in _buckets(fwd_params, size))


def dp_plan(scenario: Scenario, work: StepWork) -> DpPlan:
    """Data-parallel collectives of one step (module docstring). Memoised per scenario when
    ``work`` is the scenario's own (hashing a StepWork costs milliseconds; a Scenario microseconds)."""
    if work is build_step_work(scenario):
        return _dp_plan_of(scenario)
    return _dp_plan(scenario, work)


def dp_plan_from(scenario: Scenario, work: StepWork, named: bool = True,
                 stages: frozenset[int] | None = None) -> DpPlan:
    """``dp_plan`` of ``scenario`` from ``work`` (another layout's units with the same parameters
    per unit), not memoised and without building the scenario's own work; ``named=False``
    leaves the items' names empty (the sweep's bounds read their plans only); ``stages``: only
    these global stages' items (each stage's items depend on that stage alone)."""
    return _dp_plan(scenario, work, named, stages)


@functools.lru_cache(maxsize=4096)
def _dp_plan_of(scenario: Scenario) -> DpPlan:
    return _dp_plan(scenario, build_step_work(scenario))


def _dp_plan(scenario: Scenario, work: StepWork, named: bool = True,
             stages: frozenset[int] | None = None) -> DpPlan:
    par = scenario.parallel
    if par.dp * par.cp == 1:
        return DpPlan()
    zero = par.zero_stage
    if zero == 3:
        return DpPlan(zero3=zero3_plan(scenario, work))
    param_bytes = activation_bytes(scenario.training.dtype)
    size = bucket_params(scenario)
    grad_op = "all_reduce" if zero == 0 else "reduce_scatter"
    grad_bytes = _reduce_bytes(scenario.framework.grad_reduce_dtype, scenario.training.dtype)
    grad_buckets: dict[tuple[int, int], tuple[Item, ...]] = {}
    after_backward: dict[int, tuple[Item, ...]] = {}
    param_gathers: dict[tuple[int, int], tuple[Item, ...]] = {}
    after_optimizer: dict[int, tuple[Item, ...]] = {}
    edp = par.edp
    for stage in work.stages:
        g = stage.index
        if stages is not None and g not in stages:
            continue
        # dense parameters reduce over dp x cp; expert parameters over the expert-data-parallel
        # group (dp x cp / ep ranks), in buckets of their own (Megatron-core MoE)
        groups = [("dp_cp", stage.unit_params, "")]
        if edp > 1 and any(stage.unit_expert_params):
            groups.append(("edp", stage.unit_expert_params, " experts"))
        for axis, unit_params, tag in groups:
            for unit, params in _buckets(unit_params, size):
                item = (f"{grad_op} grads{tag} s{g} ({params / 1e6:.0f}M params)" if named else "",
                        comm_plan(scenario, grad_op, params * grad_bytes, axis))
                if par.overlap_grad_reduce:
                    grad_buckets[(g, unit)] = grad_buckets.get((g, unit), ()) + (item,)
                else:
                    after_backward[g] = after_backward.get(g, ()) + (item,)
            fwd_params = tuple(reversed(unit_params))
            if zero in (1, 2):
                for first, params in _gather_buckets(fwd_params, size):
                    item = (f"all_gather params{tag} s{g} ({params / 1e6:.0f}M)" if named else "",
                            comm_plan(scenario, "all_gather", params * param_bytes, axis))
                    if par.overlap_param_gather:
                        param_gathers[(g, first)] = param_gathers.get((g, first), ()) + (item,)
                    else:
                        after_optimizer[g] = after_optimizer.get(g, ()) + (item,)
    return DpPlan(grad_buckets, after_backward, param_gathers, after_optimizer)


def zero3_impl(scenario: Scenario) -> str:
    """The ZeRO-3 implementation that runs: torch FSDP when parallel.fsdp.version is set, else the framework's."""
    version = scenario.parallel.fsdp_version
    return f"fsdp{version}" if version else scenario.framework.zero3


def _reduce_bytes(reduce_dtype: str, dtype: str) -> int:
    return 4 if reduce_dtype == "fp32" or dtype == "fp32" else 2


def zero3_plan(scenario: Scenario, work: StepWork) -> Zero3Plan:
    """Gathers and reduce-scatters of every ZeRO-3 unit (a stage's embedding, layers, output head)."""
    par = scenario.parallel
    impl = zero3_impl(scenario)
    deepspeed = impl == "deepspeed"
    param_bytes = activation_bytes(scenario.training.dtype)
    grad_bytes = _reduce_bytes("bf16" if deepspeed else scenario.framework.grad_reduce_dtype,
                               scenario.training.dtype)
    hsdp = par.hsdp_replicas > 1
    shard_axis = zero3_shard_axis(scenario)
    shard_ranks = par.dp * par.cp // par.hsdp_replicas
    edp = par.edp

    def plan(op: str, size_bytes: float, axis: str) -> CollectivePlan:
        return zero3_collective(scenario, op, size_bytes, axis)

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
            if dense and shard_ranks > 1:
                items.append((f"all_gather params s{g}.{u} ({dense / 1e6:.0f}M)",
                              plan("all_gather", dense * param_bytes, shard_axis)))
            if expert:  # expert weights are sharded over the expert-data-parallel group
                items.append((f"all_gather expert params s{g}.{u} ({expert / 1e6:.0f}M)",
                              plan("all_gather", expert * param_bytes, "edp")))
            if items and par.offload_params:  # ZeRO-Infinity: the shards first come up from host memory
                shard = (dense / max(1, shard_ranks) + expert / max(1, edp)) * param_bytes
                items.insert(0, (f"h2d param shards s{g}.{u}", host_copy_plan(scenario, shard)))
            if items:
                gather[(g, u)] = tuple(items)
        groups = [(stage.unit_params, shard_axis, shard_ranks, "")]
        if any(stage.unit_expert_params):
            groups.append((stage.unit_expert_params, "edp", edp, " experts"))
        bucket = DS_REDUCE_BUCKET_PARAMS if deepspeed else 1
        for unit_params, axis, ranks, tag in groups:
            for b, params in _buckets(unit_params, bucket):
                if not params or ranks == 1 and not hsdp:
                    continue
                items = [(f"reduce_scatter grads{tag} s{g}.{b} ({params / 1e6:.0f}M)",
                          plan("reduce_scatter", params * grad_bytes, axis))] if ranks > 1 else []
                if hsdp and axis == shard_axis:
                    items.append((f"all_reduce grads{tag} s{g}.{b} over replicas",
                                  comm_plan(scenario, "all_reduce", params * grad_bytes / shard_ranks,
                                            "fsdp_replicate")))
                reduce[(g, b)] = reduce.get((g, b), ()) + tuple(items)
    prefetch = 1 if deepspeed else par.fsdp_prefetch
    return Zero3Plan(impl, prefetch, zero3_backward_gathers(scenario, largest), gather, reduce)


def zero3_backward_gathers(scenario: Scenario, largest_unit_params: int) -> int:
    """Gathers of a unit's parameters in each backward (module docstring): DeepSpeed re-gathers for
    the recomputed forward when a unit exceeds stage3_max_reuse_distance; FSDP keeps the forward's
    parameters when reshard_after_forward is off."""
    par = scenario.parallel
    if zero3_impl(scenario) == "deepspeed":
        return 2 if par.recompute == "full" and largest_unit_params > DS_MAX_REUSE_DISTANCE_PARAMS else 1
    return 1 if par.reshard_after_forward else 0


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


def _units_in_bucket(unit_params: tuple[int, ...], last: int, params: int) -> int:
    acc, n = 0, 0
    for u in range(last, -1, -1):
        acc += unit_params[u]
        n += 1
        if acc >= params:
            break
    return n
