"""The data-parallel rules that every model of the step shares: buckets, gradient bytes, ZeRO-3's implementation.

Gradient buckets of the framework's size (``frameworks.grad_bucket_params``: Megatron-Core's
``max(40M, 1M * dp * cp)``, DeepSpeed's and torchtitan's own, DeepSpeed ZeRO-3's ``reduce_bucket_size``,
or ``parallel.dp_bucket_params``), a bucket closing at the unit whose gradients fill it. The pure helpers keep a bounded ``functools.lru_cache``: they are pure
functions of tuples of integers, and the sweep's bounds plan many layouts with the same stages.
"""

from __future__ import annotations

import functools

from clustersim import frameworks
from clustersim.compute.dtypes import reduce_bytes
from clustersim.scenario import Scenario


def bucket_params(scenario: Scenario) -> int:
    """Parameters per gradient bucket (module docstring)."""
    return frameworks.grad_bucket_params(scenario.framework, scenario.parallel)


@functools.lru_cache(maxsize=65536)
def close_buckets(unit_params: tuple[int, ...], size: int) -> tuple[tuple[int, int], ...]:
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
def gather_buckets(fwd_params: tuple[int, ...], size: int) -> tuple[tuple[int, int], ...]:
    """The parameter gathers' buckets in forward order: ((first unit, params), ...)."""
    return tuple((unit - units_in_bucket(fwd_params, unit, params) + 1, params)
                 for unit, params in close_buckets(fwd_params, size))


def units_in_bucket(unit_params: tuple[int, ...], last: int, params: int) -> int:
    """How many units, counted back from ``last``, hold the bucket of ``params`` parameters that closes there."""
    acc, n = 0, 0
    for u in range(last, -1, -1):
        acc += unit_params[u]
        n += 1
        if acc >= params:
            break
    return n


def grad_reduce_op(scenario: Scenario) -> str:
    """The collective that reduces the gradients of ZeRO 0-2: ZeRO-0 (DDP) all-reduces them, the
    distributed optimizer (ZeRO-1/2) reduce-scatters them (each rank steps its shard), except a
    ZeRO-1 whose framework all-reduces the whole gradient before each rank steps its shard
    (``FrameworkSpec.zero1_grad_reduce``: DeepSpeed's BF16_Optimizer)."""
    zero = scenario.parallel.zero_stage
    if zero == 0 or (zero == 1 and scenario.framework.zero1_grad_reduce == "all_reduce"):
        return "all_reduce"
    return "reduce_scatter"


def zero3_impl(scenario: Scenario) -> str:
    """The ZeRO-3 implementation that runs (``frameworks.zero3_impl``)."""
    return frameworks.zero3_impl(scenario.parallel.fsdp_version, scenario.framework)


def grad_reduce_bytes(scenario: Scenario) -> int:
    """Bytes per gradient element in the data-parallel reduction: ``reduce_bytes`` of the dtype it
    runs in (``frameworks.grad_reduce_dtype``: the scenario's ``training.grad_reduce_dtype``, else the
    framework's, fp16 for an fp16 Megatron job)."""
    par, dtype = scenario.parallel, scenario.training.dtype
    return reduce_bytes(frameworks.grad_reduce_dtype(par.zero_stage, par.fsdp_version, scenario.framework,
                                                     par.grad_reduce_dtype, dtype=dtype), dtype)
