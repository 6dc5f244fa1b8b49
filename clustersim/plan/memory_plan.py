"""Per-GPU memory of each pipeline rank, with the activations in flight taken from the schedule."""

from __future__ import annotations

from clustersim.compute.conventions import resolve_attention
from clustersim.memory import MemoryReport, memory_report
from clustersim.memory.activations import gpu_kernels
from clustersim.memory.policies import RankPolicies, rank_policies, uniform_policies
from clustersim.memory.saved import Kernels
from clustersim.parallel.pipeline import Action, max_in_flight, split_weight_keys
from clustersim.parallel.stage_graph import StageGraph
from clustersim.plan.stage_work import build_step_work
from clustersim.scenario import Scenario


def layers_in_flight(actions: tuple[Action, ...], rank: int, graph: StageGraph, counts: tuple[int, ...]) -> int:
    """Peak number of (layer, micro-batch) activations held at once: a forward adds its chunk's
    layers; the backward frees them, or the W when the weight gradient is split off (the W still
    reads the inputs of the layers' GEMMs). ``counts``: layers of each global stage."""
    split = split_weight_keys(actions)
    held = peak = 0
    for a in actions:
        layers = counts[graph.stage(rank, a.chunk)]
        if a.kind == "F":
            held += layers
        elif a.kind == "W" or (a.chunk, a.micro_batch) not in split:
            held -= layers
        peak = max(peak, held)
    return peak


def chunk_in_flight(actions: tuple[Action, ...], rank: int, graph: StageGraph, work, model_stage: int) -> float:
    """Peak micro-batches in flight on the chunk(s) of ``rank`` that run ``model_stage`` (0 if
    none): the embedding's and the loss's tensors live only as long as their own chunk's."""
    chunks = [c for c in range(graph.chunks) if work.stages[graph.stage(rank, c)].model_stage == model_stage]
    if not chunks:
        return 0.0
    return float(max_in_flight(tuple(a for a in actions if a.chunk in chunks)))


def scenario_kernels(scenario: Scenario) -> Kernels:
    """How the scenario's kernels keep tensors on the GPU: its attention kernel, and fused
    element-wise ops unless the framework runs them eagerly without torch.compile."""
    elementwise = "fused" if scenario.training.compile else scenario.framework.elementwise
    return gpu_kernels(resolve_attention(scenario.training.attention, scenario.cluster.gpu.name), elementwise)


def rank_memory(scenario: Scenario, schedule: tuple[tuple[Action, ...], ...]) -> tuple[MemoryReport, ...]:
    """One MemoryReport per pipeline rank (DualPipe: its two chunks hold two model stages, the
    first and last ranks both the embedding and the output head)."""
    par = scenario.parallel
    work = build_step_work(scenario)
    graph = work.graph
    counts = tuple(st.num_layers for st in work.stages)
    last_model = graph.num_model_stages - 1
    kernels = scenario_kernels(scenario)
    out = []
    for r in range(par.pp):
        stages = [work.stages[graph.stage(r, c)] for c in range(graph.chunks)]
        layers = sum(st.num_layers for st in stages)
        moe = sum(st.moe_layers for st in stages)
        in_flight = layers_in_flight(schedule[r], r, graph, counts) / layers
        first = any(st.model_stage == 0 for st in stages)
        last = any(st.model_stage == last_model for st in stages)
        ends = (chunk_in_flight(schedule[r], r, graph, work, 0) if first else 0.0,
                chunk_in_flight(schedule[r], r, graph, work, last_model) if last else 0.0)
        policies = RankPolicies(((par.recompute, layers),), 1) if uniform_policies(par) \
            else rank_policies(par, scenario.model.layers, r)
        out.append(memory_report(scenario.model, par, scenario.cluster, scenario.training.dtype,
                                 layers, in_flight, first, last, scenario.training.attention,
                                 framework=scenario.framework, kernels=kernels, policies=policies, stage=r,
                                 moe_layers=moe if scenario.model.is_moe else None,
                                 ends_in_flight=ends))
    return tuple(out)


_SEVERITY = {"fits": 0, "tight": 1, "does-not-fit": 2}


def worst_stage(memories: tuple[MemoryReport, ...]) -> MemoryReport:
    """The pipeline rank that decides the verdict: the worst verdict, then the highest peak."""
    return max(memories, key=lambda m: (_SEVERITY[m.verdict], m.peak_bytes_per_gpu, -m.stage))
