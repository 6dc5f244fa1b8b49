"""The 80% interval of the predicted peak, from the residuals of the validation table.

docs/memory.md's table compares the prediction with published runs (validation/published/
memory_runs.yaml; ``python benchmarks/memory_published.py`` prints it). The 10th and 90th
percentiles of ``published / predicted`` over the runs with a measured peak are RESIDUAL_Q10 and
RESIDUAL_Q90 (tests/memory/test_evidence.py recomputes them from the table and fails when they
drift). The interval of a GPU's peak is

* lo = (allocated peak + memory outside the allocator) x RESIDUAL_Q10: under memory pressure the
  caching allocator frees its cached blocks and retries before it fails
  (c10/cuda/CUDACachingAllocator.cpp ``malloc``: ``release_cached_blocks`` then retry), so a job
  whose allocations fit runs, with cudaMalloc retries, even if its usual fragmentation does not;
* hi = reserved peak x RESIDUAL_Q90.

Where the table holds no run like the scenario (no evidence: DeepSpeed, MoE, context parallelism,
FP8/FP4 training, host offload, HSDP replicas), both residual margins are widened by WIDEN.
"""

from __future__ import annotations

from clustersim.frameworks import FrameworkSpec
from clustersim.parallel.layout import ParallelLayout
from clustersim.workload.model_spec import ModelSpec

# percentiles of published / predicted over validation/published/memory_runs.yaml (2026-11-23)
RESIDUAL_Q10 = 0.981
RESIDUAL_Q90 = 1.043
# frameworks with measured runs in the table; megatron-legacy holds its states, buffers and loss as
# Megatron-Core does (frameworks.yaml) and its unfused attention core is measured exactly on CPU
# (validation/saved_tensors.py), so the Megatron-Core runs stand for it
FRAMEWORKS_WITH_EVIDENCE = ("megatron-core", "megatron-legacy", "torchtitan")
WIDEN = 2.0


def has_evidence(model: ModelSpec, layout: ParallelLayout, framework: FrameworkSpec, dtype: str = "bf16") -> bool:
    """Whether the table holds runs like this one: a framework it measured, dense, no context
    parallelism, 16-bit training (no FP8/FP4 row: docs/memory.md's torchtitan Float8 runs, outside
    the table, came out 11-25% above the prediction), nothing offloaded to the host and no HSDP
    replicas (none in the table)."""
    return (framework.name in FRAMEWORKS_WITH_EVIDENCE and not model.is_moe and layout.cp == 1
            and dtype in ("bf16", "fp16", "fp32") and layout.hsdp_replicas <= 1
            and not (layout.offload_optimizer or layout.offload_activations or layout.offload_params))


def interval_factors(model: ModelSpec, layout: ParallelLayout, framework: FrameworkSpec,
                     dtype: str = "bf16") -> tuple[float, float]:
    """(lo, hi) factors: lo on the allocated peak plus the memory outside the allocator, hi on
    the reserved peak (module docstring)."""
    lo, hi = RESIDUAL_Q10, RESIDUAL_Q90
    if not has_evidence(model, layout, framework, dtype):
        lo, hi = 1.0 - WIDEN * (1.0 - lo), 1.0 + WIDEN * (hi - 1.0)
    return min(lo, 1.0), max(hi, 1.0)
