"""The bound's terms beside the pipeline's compute, each priced by the plan's own rule.

Every number here comes from the function of ``clustersim.plan`` that decides it for the
engines, called with the bound's (coarser) inputs: a layer's fewest parameters, a rank's
parameters summed from its layers, the fastest pipeline boundary.

* a pipeline transfer: ``plan.comm_plans.pp_link_plan`` of every boundary, the fastest standing
  for every hop (``p2p_s``);
* ZeRO-3: each unit's parameter gathers, ``plan.zero3.zero3_unit_gathers``, and how often a
  backward gathers, ``plan.zero3.zero3_backward_gathers`` (``extra``);
* rank 0's data-parallel tail (``tail_s``): which collectives wait for the end of the backward
  or follow the step is ``plan.data_parallel.grads_after_backward`` and ``params_after_step``;
  a gradient reduction is ``plan.data_parallel.grad_bucket`` (ZeRO-3:
  ``plan.zero3.zero3_grad_reduce``), a parameter gather ``plan.data_parallel.param_bucket``;
* a rank's optimizer step: ``plan.optimizer_step.optimizer_step_s`` of its parameters.

Each is cached in the run's ``SweepMemo`` at the fewest integers it depends on.
"""

from __future__ import annotations

from dataclasses import replace

from clustersim.parallel.layout import ParallelLayout
from clustersim.plan.comm_plans import pp_link_plan
from clustersim.plan.data_parallel import (
    grad_bucket,
    grads_after_backward,
    grads_every_micro_batch,
    param_bucket,
    params_after_step,
)
from clustersim.plan.optimizer_step import optimizer_step_s
from clustersim.plan.zero3 import (
    zero3_backward_gathers,
    zero3_grad_reduce,
    zero3_shard_axis,
    zero3_shard_ranks,
    zero3_unit_gathers,
)
from clustersim.scenario import Scenario
from clustersim.sweep.memo import SweepMemo
from clustersim.sweep.pipe_bound import Extra
from clustersim.sweep.profiles import ScheduleProfile
from clustersim.sweep.unit_times import UnitTimes


class StepTerms:
    """The bound's per-layout terms of one base scenario (module docstring)."""

    def __init__(self, base: Scenario, memo: SweepMemo) -> None:
        self.base, self.memo = base, memo

    def grid(self, p: ParallelLayout) -> Scenario:
        """The layout as the plan prices its groups: its schedule does not change them."""
        return replace(self.base, parallel=replace(p, schedule="1f1b", virtual_stages=1))

    def extra(self, layout: ParallelLayout, u: UnitTimes) -> Extra:
        """ZeRO-3 gathers and the pipeline transfer of this layout.

        A unit's gathers all run on the rank's one data-parallel stream (``engine.recurrence``):
        its dense parameters over the shard group and, in a MoE layer, its experts' over the
        expert-data-parallel group (``plan.zero3.zero3_unit_gathers``), one after the other, so a
        layer's gather takes at least the two collectives' sum at the least parameters of any layer."""
        p = layout
        key = (p.tp, p.cp, p.pp, p.dp, p.ep, p.expert_tp, p.zero_stage == 3, p.recompute, u.p2p_bytes,
               u.layer_params, u.layer_expert_params)
        x = self.memo.extra.get(key)
        if x is None:
            # the fastest pipeline boundary stands for every hop (a bound)
            p2p = self.p2p_s(p, u.p2p_bytes)
            if p.zero_stage == 3 and p.dp * p.cp > 1:
                grid = self.grid(p)

                def gather(params: int, experts: int = 0) -> float:
                    return sum((plan.time_s for plan in zero3_unit_gathers(grid, params, experts) if plan is not None), 0.0)

                largest = max(u.layer_params + u.layer_expert_params, u.first_params, u.last_params)
                x = Extra(gather(u.layer_params, u.layer_expert_params), gather(u.first_params),
                          gather(u.last_params), p2p, zero3_backward_gathers(grid, largest))
            else:
                x = Extra(p2p_s=p2p)
            self.memo.extra[key] = x
        return x

    def p2p_s(self, p: ParallelLayout, size_bytes: float) -> float:
        """The fastest pipeline boundary's transfer of ``size_bytes`` (``plan.comm_plans.pp_link_plan``
        of each boundary): it depends on the layout only through the GPUs per stage and the depth."""
        if p.pp == 1:
            return 0.0
        stride = p.tp * p.cp * p.dp
        key = (stride, p.pp, size_bytes)
        t = self.memo.p2p.get(key)
        if t is None:
            cluster = self.base.cluster
            t = self.memo.p2p[key] = min(pp_link_plan(cluster, size_bytes, stride, p.pp, r).time_s
                                         for r in range(p.pp))
        return t

    def tail_s(self, layout: ParallelLayout, u: UnitTimes, profile: ScheduleProfile) -> float:
        """Data-parallel work of rank 0 that can only start once its last backward unit (the
        embedding) is done and that the optimizer step waits for, or that follows the step
        (``plan.data_parallel``): without overlap, the reduction of all its gradients (at least one
        bucket of their total size: a collective's time is concave in its size, so the
        buckets take no less); with overlap, the reduction of the last bucket, which holds at
        least the embedding's gradients; without overlapped parameter gathers, the gather of
        all its parameters after the step. ZeRO-3 reduce-scatters the embedding's gradients."""
        p = layout
        if p.dp * p.cp == 1:
            return 0.0
        held0 = profile.ranks[0][0]
        params0 = held0 * u.layer_params + u.first_params + (u.last_params if p.pp == 1 else 0)
        key = (p.tp, p.cp, p.pp, p.dp, p.ep, p.zero_stage, p.overlap_grad_reduce, p.overlap_param_gather,
               params0, u.first_params)
        t = self.memo.tail.get(key)
        if t is None:
            grid = self.grid(p)
            t = 0.0
            if p.zero_stage == 3:
                if not self.base.model.is_moe and u.first_params and zero3_shard_ranks(p) > 1:
                    t = zero3_grad_reduce(grid, u.first_params, zero3_shard_axis(grid)).time_s
            elif not self.base.model.is_moe:
                reduced = params0 if grads_after_backward(p) else min(u.first_params, params0)
                t = grad_bucket(grid, reduced).time_s if reduced else 0.0
                if params_after_step(p):
                    t += param_bucket(grid, params0).time_s
            self.memo.tail[key] = t
        return t

    def grad_stream_s(self, layout: ParallelLayout, u: UnitTimes, profile: ScheduleProfile) -> float:
        """Data-parallel work of rank 0 that its optimizer step waits for where ZeRO-2 reduces every
        micro-batch's gradients (``plan.data_parallel.grads_every_micro_batch``): one reduction of
        all its gradients per micro-batch (at least one bucket of their total size each: a
        collective's time is concave in its size), one after another on its stream, and, without
        overlapped parameter gathers, the gather after the step (``blocked_kernels_s`` adds rank
        0's kernels where they wait for the reductions). 0 where the rule does not apply, and
        for MoE models (expert gradients reduce over their own group: ``StreamTerms``)."""
        p = layout
        if self.base.model.is_moe or not grads_every_micro_batch(p):
            return 0.0
        held0 = profile.ranks[0][0]
        params0 = held0 * u.layer_params + u.first_params + (u.last_params if p.pp == 1 else 0)
        key = ("every", p.tp, p.cp, p.pp, p.dp, p.ep, p.num_micro_batches, p.overlap_param_gather, params0)
        t = self.memo.tail.get(key)
        if t is None:
            grid = self.grid(p)
            t = p.num_micro_batches * grad_bucket(grid, params0).time_s
            if params_after_step(p):
                t += param_bucket(grid, params0).time_s
            self.memo.tail[key] = t
        return t

    def blocked_kernels_s(self, layout: ParallelLayout, u: UnitTimes, profile: ScheduleProfile) -> float:
        """Rank 0's own kernels (each micro-batch's forward and backward of the layers it holds, at
        the cheaper kind's unit times, and of its embedding) where they wait for ZeRO-2's every
        reduction, which the framework runs on the compute stream (no ``overlap_grad_reduce``):
        they add to ``grad_stream_s``; 0 elsewhere."""
        p = layout
        if not grads_after_backward(p) or not grads_every_micro_batch(p) or self.base.model.is_moe:
            return 0.0
        last = u.last_f_s + u.last_b_s if p.pp == 1 else 0.0
        held0 = profile.ranks[0][0]
        return p.num_micro_batches * (held0 * (u.layer_f_s + u.layer_b_s) + u.first_f_s + u.first_b_s + last)

    def optimizer_s(self, layout: ParallelLayout, u: UnitTimes, profile: ScheduleProfile) -> float:
        """Rank 0's optimizer step (``plan.stage_work``: its parameters, before ZeRO sharding); for
        the schedules without the backward chain (zero-bubble, DualPipe), where the step ends with
        some rank's optimizer after all its work, the step of the rank holding the fewest layers
        (no embedding or head counted): every rank's own step takes at least that long."""
        if profile.backward_chain:  # rank 0 holds the embedding, and the head only when pp == 1
            return self.rank_optimizer_s(layout, u, profile, 0)
        return min(self.step_s(layout, *_layers_params(u, held, m))
                   for (held, _), m in zip(profile.ranks, profile.moe_held, strict=True))

    def rank_optimizer_s(self, layout: ParallelLayout, u: UnitTimes, profile: ScheduleProfile, rank: int) -> float:
        """Pipeline rank ``rank``'s optimizer step, at most the engine's (its layers, the
        embedding and the head where it holds them; layers at the cheaper kind's parameters)."""
        (held, _), m = profile.ranks[rank], profile.moe_held[rank] if self.base.model.is_moe else 0
        params, experts = _layers_params(u, held, m)
        params += (u.first_params if profile.firsts[rank] else 0) + (u.last_params if profile.lasts[rank] else 0)
        return self.step_s(layout, params, experts)

    def step_s(self, layout: ParallelLayout, params: int, expert_params: int = 0) -> float:
        """The optimizer step of a rank holding ``params`` parameters, ``expert_params`` of them
        experts' (``plan.optimizer_step``): Adam (or the host's) over the ZeRO shard, the passes
        over the whole gradient buffer and the gradient norm's all-reduce (all monotone in the
        parameters; a layer of the cheaper kind counted with its own experts keeps the shard at
        most the engine's: a MoE layer's dense part over dp plus its experts over edp <= dp is at
        least its total over dp, more than a dense layer's)."""
        key = (params, expert_params, layout.dp, layout.cp, layout.edp, layout.hsdp_replicas, layout.zero_stage,
               layout.offload_optimizer, layout.num_gpus)
        opt = self.memo.optimizer.get(key)
        if opt is None:
            opt = self.memo.optimizer[key] = optimizer_step_s(replace(self.base, parallel=layout), params, expert_params)
        return opt


def _layers_params(u: UnitTimes, held: int, moe: int) -> tuple[int, int]:
    """(parameters, of them experts') of ``held`` layers, ``moe`` of them MoE layers, each at its
    kind's parameters with its experts (``UnitTimes.moe_all_params`` / ``layer_all_params``)."""
    return (moe * u.moe_all_params + (held - moe) * u.layer_all_params,
            moe * u.moe_all_expert_params + (held - moe) * u.layer_all_expert_params)
