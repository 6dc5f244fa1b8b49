"""Data-parallel communication of one step: gradient buckets and parameter gathers (ZeRO 0-3).

Follows Megatron-core's DistributedDataParallel and distributed optimizer
(megatron/core/distributed/): gradients accumulate in fp32 ``main_grad`` buffers and are
reduced in fp32 (``accumulate_allreduce_grads_in_fp32``, on by default for bf16), in buckets of
``max(40M, 1M * dp)`` parameters launched as soon as a bucket's last gradient is ready during
the final micro-batch's backward (``overlap_grad_reduce``). ZeRO-0 all-reduces the gradients;
ZeRO-1/2 (the distributed optimizer) reduce-scatter them and all-gather the updated 16-bit
parameters, overlapped with the next forward pass when ``overlap_param_gather`` is set (the
first bucket is still exposed); ZeRO-3 also gathers each unit's parameters before its forward
and its backward (Rajbhandari et al. 2020, ZeRO, §5). Reductions span the dp x cp ranks.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from clustersim.collectives import CollectivePlan
from clustersim.engine.groups import comm_plan
from clustersim.engine.stages import StepWork, activation_bytes
from clustersim.scenario import Scenario

GRAD_BYTES = 4  # fp32 main grads (Megatron-core DistributedDataParallelConfig.grad_reduce_in_fp32 path)
Item = tuple[str, CollectivePlan]


@dataclass(frozen=True, slots=True)
class DpPlan:
    grad_buckets: dict[tuple[int, int], tuple[Item, ...]] = field(default_factory=dict)  # (stage, bwd unit)
    after_backward: tuple[Item, ...] = ()
    param_gathers: dict[tuple[int, int], tuple[Item, ...]] = field(default_factory=dict)  # (stage, fwd unit)
    after_optimizer: tuple[Item, ...] = ()
    zero3_unit_gather: dict[tuple[int, int], tuple[Item, ...]] = field(default_factory=dict)  # (stage, fwd unit)


def bucket_params(scenario: Scenario) -> int:
    par = scenario.parallel
    return par.dp_bucket_params or max(40_000_000, 1_000_000 * par.dp * par.cp)


def _buckets(unit_params: tuple[int, ...], size: int) -> list[tuple[int, int]]:
    """Close a bucket at the unit where the running sum reaches ``size``: [(last unit, params)]."""
    out, acc = [], 0
    for u, p in enumerate(unit_params):
        acc += p
        if acc >= size:
            out.append((u, acc))
            acc = 0
    if acc:
        out.append((len(unit_params) - 1, acc))
    return out


@functools.lru_cache(maxsize=4096)
def dp_plan(scenario: Scenario, work: StepWork) -> DpPlan:
    par = scenario.parallel
    if par.dp * par.cp == 1:
        return DpPlan()
    zero = par.zero_stage
    param_bytes = activation_bytes(scenario.training.dtype)
    size = bucket_params(scenario)
    grad_op = "all_reduce" if zero == 0 else "reduce_scatter"
    grad_buckets: dict[tuple[int, int], tuple[Item, ...]] = {}
    after_backward: list[Item] = []
    param_gathers: dict[tuple[int, int], tuple[Item, ...]] = {}
    after_optimizer: list[Item] = []
    zero3: dict[tuple[int, int], tuple[Item, ...]] = {}
    edp = par.dp * par.cp // par.ep
    for stage in work.stages:
        g = stage.index
        # dense parameters reduce over dp x cp; expert parameters over the expert-data-parallel
        # group (dp x cp / ep ranks), in buckets of their own (Megatron-core MoE)
        groups = [("dp_cp", stage.unit_params, "")]
        if edp > 1 and any(stage.unit_expert_params):
            groups.append(("edp", stage.unit_expert_params, " experts"))
        for axis, unit_params, tag in groups:
            for unit, params in _buckets(unit_params, size):
                item = (f"{grad_op} grads{tag} s{g} ({params / 1e6:.0f}M params)",
                        comm_plan(scenario, grad_op, params * GRAD_BYTES, axis))
                if par.overlap_grad_reduce:
                    grad_buckets[(g, unit)] = grad_buckets.get((g, unit), ()) + (item,)
                else:
                    after_backward.append(item)
            fwd_params = tuple(reversed(unit_params))
            if zero in (1, 2):
                for unit, params in _buckets(fwd_params, size):
                    first = unit - _units_in_bucket(fwd_params, unit, params) + 1
                    item = (f"all_gather params{tag} s{g} ({params / 1e6:.0f}M)",
                            comm_plan(scenario, "all_gather", params * param_bytes, axis))
                    if par.overlap_param_gather:
                        param_gathers[(g, first)] = param_gathers.get((g, first), ()) + (item,)
                    else:
                        after_optimizer.append(item)
            elif zero == 3:
                for unit, params in enumerate(fwd_params):
                    if params:
                        zero3[(g, unit)] = zero3.get((g, unit), ()) + ((f"all_gather params{tag} s{g}.{unit}",
                                            comm_plan(scenario, "all_gather", params * param_bytes, axis)),)
    return DpPlan(grad_buckets, tuple(after_backward), param_gathers, tuple(after_optimizer), zero3)


def _units_in_bucket(unit_params: tuple[int, ...], last: int, params: int) -> int:
    acc, n = 0, 0
    for u in range(last, -1, -1):
        acc += unit_params[u]
        n += 1
        if acc >= params:
            break
    return n
