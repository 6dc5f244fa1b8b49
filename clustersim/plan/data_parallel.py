"""Data-parallel communication of one step: gradient buckets and parameter gathers (ZeRO 0-3).

Follows Megatron-core's DistributedDataParallel and distributed optimizer
(megatron/core/distributed/): gradients accumulate in ``main_grad`` buffers and are reduced in
the dtype of ``frameworks.grad_reduce_dtype`` (fp32 for Megatron, ``accumulate_allreduce_grads_in_fp32``
being forced on for bf16; fp16 for its fp16 jobs, where that flag is off by default; the training
dtype for DeepSpeed), in buckets of
the framework's bucket (``frameworks.grad_bucket_params``) launched as soon as a bucket's last gradient is ready during
the final micro-batch's backward (``overlap_grad_reduce``). ZeRO-0 all-reduces the gradients;
ZeRO-1/2 (the distributed optimizer) reduce-scatter them and all-gather the updated 16-bit
parameters, overlapped with the next forward pass when ``overlap_param_gather`` is set (the
first bucket is still exposed). Reductions span the dp x cp ranks.

ZeRO-3 runs as the implementation that the scenario names: clustersim.plan.zero3. The bucket
rules and the bytes per element are clustersim.plan.dp_rules and clustersim.compute.dtypes.

Tied embeddings across the pipeline: where the input embedding and the output layer that shares
its weights sit on different pipeline ranks, each holds a copy of the word embedding and the two
copies' gradients are summed after the backward, one all-reduce of ``V/tp x h`` gradients in the
reduction dtype between the two ranks (Megatron-Core ``finalize_model_grads`` ->
``_allreduce_word_embedding_grads`` over the embedding group, after the data-parallel reduction;
Megatron-LM 2021-23 ``optimizer.reduce_model_grads`` -> ``allreduce_embedding_grads``; DeepSpeed's
pipeline engine ``_exec_reduce_tied_grads``, just before its data-parallel reduction). It joins
the data-parallel tail of both ranks, after their gradient reductions.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from clustersim import frameworks
from clustersim.collectives import CollectivePlan
from clustersim.compute.dtypes import activation_bytes
from clustersim.parallel.layout import ParallelLayout
from clustersim.plan.comm_plans import Item, comm_plan, tied_embedding_plan
from clustersim.plan.dp_rules import (
    bucket_params,
    close_buckets,
    gather_buckets,
    grad_reduce_bytes,
    grad_reduce_op,
)
from clustersim.plan.stage_work import StepWork, build_step_work
from clustersim.plan.zero3 import Zero3Plan, zero3_plan
from clustersim.scenario import Scenario


class DpTail(NamedTuple):
    """What a rank does after its last backward, the data-parallel tail of its step: it launches
    the gradient reductions that did not overlap the backward (``reduce``), waits until every
    collective of its streams is done, steps the optimizer, then runs the parameter gathers that
    do not overlap the next forward (``gather``) one after another. Both engines run it as given."""

    reduce: tuple[Item, ...]
    optimizer_time_s: float
    gather: tuple[Item, ...]


@dataclass(frozen=True, slots=True)
class DpPlan:
    """Data-parallel collectives of one step, by where they start (module docstring)."""

    grad_buckets: dict[tuple[int, int], tuple[Item, ...]] = field(default_factory=dict)  # (stage, bwd unit)
    after_backward: dict[int, tuple[Item, ...]] = field(default_factory=dict)   # stage -> after the backward
    param_gathers: dict[tuple[int, int], tuple[Item, ...]] = field(default_factory=dict)  # (stage, fwd unit)
    after_optimizer: dict[int, tuple[Item, ...]] = field(default_factory=dict)  # stage -> after the step
    zero3: Zero3Plan | None = None
    # ZeRO-2 with several micro-batches (``grads_every_micro_batch``): every backward launches its
    # units' gradient buckets, not only a stage's last; ``blocking_reduce``: the compute waits for
    # each bucket's reduction (the framework reduces on the compute stream: no overlap_grad_reduce;
    # under ZeRO-3 each unit's reduce-scatter, ParallelLayout.zero3_overlap_reduce false)
    every_backward: bool = False
    blocking_reduce: bool = False

    def reduces(self, part: str, final: bool) -> bool:
        """``backward_reduces`` under this plan."""
        return backward_reduces(self.every_backward, part, final)

    def after_backward_of(self, stages: list[int]) -> tuple[Item, ...]:
        return tuple(item for g in stages for item in self.after_backward.get(g, ()))

    def after_optimizer_of(self, stages: list[int]) -> tuple[Item, ...]:
        return tuple(item for g in stages for item in self.after_optimizer.get(g, ()))

    def tail(self, stages: list[int], optimizer_time_s: float) -> DpTail:
        """The data-parallel tail of a rank holding global ``stages`` whose optimizer step takes
        ``optimizer_time_s``."""
        return DpTail(self.after_backward_of(stages), optimizer_time_s, self.after_optimizer_of(stages))


def backward_reduces(every_backward: bool, part: str, final: bool) -> bool:
    """Whether a backward action (``part`` B, Bi or W) launches its units' gradient buckets: a
    stage's last backward, or, where every micro-batch's gradients are reduced
    (``grads_every_micro_batch``: ``every_backward``), every one that produces weight gradients."""
    return final or (every_backward and part in ("B", "W"))


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
    """``dp_plan`` of the scenario's own work (memoised: a pure function of the frozen scenario)."""
    return _dp_plan(scenario, build_step_work(scenario))


def grads_after_backward(par: ParallelLayout) -> bool:
    """Whether the gradient buckets wait for the end of the backward (the rank's tail) rather
    than launch as each fills during the final micro-batch's backward (``overlap_grad_reduce``)."""
    return not par.overlap_grad_reduce


def grads_every_micro_batch(par: ParallelLayout) -> bool:
    """Whether every micro-batch's gradients are reduced as its backward produces them, not once
    after the last: ZeRO-2 keeps only its shard of the gradients, so it cannot accumulate whole
    ones over the micro-batches (DeepSpeed deepspeed/runtime/engine.py allreduce_gradients: "ZeRO
    stage >= 2 communicates during non gradient accumulation boundaries as well", stage_1_and_2.py
    reducing each bucket as it fills in every backward; FSDP2, pytorch PR 126166: accumulating
    sharded gradients "incurs the collective per microbatch backward but saves gradient memory",
    the other way, set_requires_gradient_sync(False), keeps whole gradients; Megatron-FSDP's
    optim_grads shards them "similar to ZeRO-2"). ZeRO-1 keeps whole gradients and reduces them
    once (Megatron's distributed optimizer)."""
    return par.zero_stage == 2 and par.dp * par.cp > 1 and par.num_micro_batches > 1


def zero3_grads_every_micro_batch(scenario: Scenario) -> bool:
    """Whether ZeRO-3 reduce-scatters each unit's gradients after its backward in every
    micro-batch (the implementations' rule: FSDP1/FSDP2 post-backward hooks, DeepSpeed's and
    Megatron-FSDP's per-bucket reduction), not once per step after the stage's last backward, as
    FSDP2 units inside torch.distributed.pipelining stages do (``frameworks.fsdp_in_pipeline_stage``,
    the rule the memory model's accumulated gradients read too)."""
    return not frameworks.fsdp_in_pipeline_stage(scenario.parallel, scenario.framework)


def params_after_step(par: ParallelLayout) -> bool:
    """Whether ZeRO-1/2's parameter gathers run after the optimizer step (the rank's tail) rather
    than beside the next forward (``overlap_param_gather``)."""
    return par.zero_stage in (1, 2) and not par.overlap_param_gather


@functools.lru_cache(maxsize=65536)
def grad_bucket(scenario: Scenario, params: int, axis: str = "dp_cp") -> CollectivePlan:
    """The reduction of one gradient bucket of ``params`` parameters over a group of ``axis``
    (ZeRO 0-2: the stage's collective, ``dp_rules.grad_reduce_op``, in the framework's gradient
    bytes): what ``dp_plan`` issues for every bucket, and the sweep's bounds for coarser ones.
    Memoised (a pure function of the frozen scenario): a step's buckets repeat one size."""
    return comm_plan(scenario, grad_reduce_op(scenario), params * grad_reduce_bytes(scenario), axis)


@functools.lru_cache(maxsize=65536)
def param_bucket(scenario: Scenario, params: int, axis: str = "dp_cp") -> CollectivePlan:
    """The all-gather of one bucket of ``params`` updated 16-bit parameters (ZeRO-1/2) over a
    group of ``axis``: what ``dp_plan`` issues for every bucket, and the sweep's bounds for coarser ones."""
    return comm_plan(scenario, "all_gather", params * activation_bytes(scenario.training.dtype), axis)


def _dp_plan(scenario: Scenario, work: StepWork, named: bool = True,
             stages: frozenset[int] | None = None) -> DpPlan:
    par = scenario.parallel
    tied = _tied_embedding_grads(scenario, work, named, stages)
    if par.dp * par.cp == 1:
        return DpPlan(after_backward=tied)
    zero = par.zero_stage
    if zero == 3:   # every unit's reduce-scatter, on the compute stream without zero3_overlap_reduce
        z3 = zero3_plan(scenario, work)
        if zero3_grads_every_micro_batch(scenario):
            return DpPlan(after_backward=tied, zero3=z3, blocking_reduce=not par.zero3_overlap_reduce)
        # once per step, after the stage's last backward: the rank's tail, in backward unit order
        after: dict[int, tuple[Item, ...]] = {}
        for (g, _), items in sorted(z3.reduce.items()):
            if stages is None or g in stages:
                after[g] = after.get(g, ()) + items
        for g, items in tied.items():
            after[g] = after.get(g, ()) + items
        return DpPlan(after_backward=after, zero3=replace(z3, reduce={}))
    size = bucket_params(scenario)
    grad_op = grad_reduce_op(scenario)
    every = grads_every_micro_batch(par)
    # ZeRO-2 reduces each bucket as it fills in every backward, on the compute stream where the
    # framework does not overlap the reduction (blocking_reduce), never once at the tail
    after, after_step = grads_after_backward(par) and not every, params_after_step(par)
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
            for unit, params in close_buckets(unit_params, size):
                item = Item(f"{grad_op} grads{tag} s{g} ({params / 1e6:.0f}M params)" if named else "",
                            grad_bucket(scenario, params, axis))
                if after:
                    after_backward[g] = after_backward.get(g, ()) + (item,)
                else:
                    grad_buckets[(g, unit)] = grad_buckets.get((g, unit), ()) + (item,)
            fwd_params = tuple(reversed(unit_params))
            if zero in (1, 2):
                for first, params in gather_buckets(fwd_params, size):
                    item = Item(f"all_gather params{tag} s{g} ({params / 1e6:.0f}M)" if named else "",
                                param_bucket(scenario, params, axis))
                    if after_step:
                        after_optimizer[g] = after_optimizer.get(g, ()) + (item,)
                    else:
                        param_gathers[(g, first)] = param_gathers.get((g, first), ()) + (item,)
    for g, items in tied.items():
        after_backward[g] = after_backward.get(g, ()) + items
    return DpPlan(grad_buckets, after_backward, param_gathers, after_optimizer, every_backward=every,
                  blocking_reduce=every and grads_after_backward(par))


def _tied_embedding_grads(scenario: Scenario, work: StepWork, named: bool,
                          stages: frozenset[int] | None) -> dict[int, tuple[Item, ...]]:
    """The tied word embedding's gradient all-reduce (module docstring), on the global stages
    that hold the input embedding and the output layer, where no rank holds both."""
    graph, model, par = work.graph, scenario.model, scenario.parallel
    if not model.tie_embeddings or par.pp == 1 or graph is None:
        return {}
    last = graph.num_model_stages - 1
    firsts = [g for g, m in enumerate(graph.model_stage) if m == 0]
    lasts = [g for g, m in enumerate(graph.model_stage) if m == last]
    if {graph.placement[g][0] for g in firsts} & {graph.placement[g][0] for g in lasts}:
        return {}
    elements = -(-model.vocab // par.tp) * model.hidden
    item = Item(f"all_reduce tied embedding grads ({elements / 1e6:.0f}M)" if named else "",
                tied_embedding_plan(scenario, elements * grad_reduce_bytes(scenario)))
    return {g: (item,) for g in (*firsts, *lasts) if stages is None or g in stages}
