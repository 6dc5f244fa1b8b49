"""Per-GPU memory of each pipeline rank, with the activations in flight taken from the schedule."""

from __future__ import annotations

from clustersim.compute.conventions import resolve_attention
from clustersim.memory import MemoryReport, memory_report
from clustersim.memory.activations import gpu_kernels
from clustersim.memory.policies import rank_policies
from clustersim.memory.saved import Kernels
from clustersim.parallel.pipeline import Action, layout_stage_layers
from clustersim.scenario import Scenario


def layers_in_flight(actions: tuple[Action, ...], rank: int, pp: int, counts: tuple[int, ...]) -> int:
    """Peak number of (layer, micro-batch) activations held at once: a forward adds its chunk's
    layers, the matching backward frees them."""
    held = peak = 0
    for a in actions:
        layers = counts[a.chunk * pp + rank]
        held += layers if a.kind == "F" else -layers
        peak = max(peak, held)
    return peak


def chunk_in_flight(actions: tuple[Action, ...], chunk: int) -> int:
    """Peak number of micro-batches of one model chunk whose activations are held at once (the
    embedding's and the loss's tensors live only as long as their own chunk's)."""
    held = peak = 0
    for a in actions:
        if a.chunk == chunk:
            held += 1 if a.kind == "F" else -1
            peak = max(peak, held)
    return peak


def scenario_kernels(scenario: Scenario) -> Kernels:
    """How the scenario's kernels keep tensors on the GPU: its attention kernel, and fused
    element-wise ops unless the framework runs them eagerly without torch.compile."""
    elementwise = "fused" if scenario.training.compile else scenario.framework.elementwise
    return gpu_kernels(resolve_attention(scenario.training.attention, scenario.cluster.gpu.name), elementwise)


def rank_memory(scenario: Scenario, schedule: tuple[tuple[Action, ...], ...]) -> tuple[MemoryReport, ...]:
    """One MemoryReport per pipeline rank."""
    par = scenario.parallel
    counts = layout_stage_layers(par, scenario.model.layers)
    kernels = scenario_kernels(scenario)
    out = []
    for r in range(par.pp):
        layers = sum(counts[c * par.pp + r] for c in range(par.virtual_stages))
        in_flight = layers_in_flight(schedule[r], r, par.pp, counts) / layers
        ends = (chunk_in_flight(schedule[r], 0) if r == 0 else 0,
                chunk_in_flight(schedule[r], par.virtual_stages - 1) if r == par.pp - 1 else 0)
        out.append(memory_report(scenario.model, par, scenario.cluster, scenario.training.dtype,
                                 layers, in_flight, r == 0, r == par.pp - 1, scenario.training.attention,
                                 framework=scenario.framework, kernels=kernels,
                                 policies=rank_policies(par, scenario.model.layers, r), stage=r,
                                 ends_in_flight=ends))
    return tuple(out)


_SEVERITY = {"fits": 0, "tight": 1, "does-not-fit": 2}


def worst_stage(memories: tuple[MemoryReport, ...]) -> MemoryReport:
    """The pipeline rank that decides the verdict: the worst verdict, then the highest peak."""
    return max(memories, key=lambda m: (_SEVERITY[m.verdict], m.peak_bytes_per_gpu, -m.stage))
