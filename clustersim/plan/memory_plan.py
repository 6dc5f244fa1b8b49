"""Per-GPU memory of each pipeline rank, with the activations in flight taken from the schedule."""

from __future__ import annotations

from typing import NamedTuple

from clustersim.compute.conventions import resolve_attention
from clustersim.memory import MemoryReport, memory_report
from clustersim.memory.activations import gpu_kernels, weight_gradient_share
from clustersim.memory.policies import RankPolicies, rank_policies, uniform_policies
from clustersim.memory.saved import Kernels
from clustersim.parallel.pipeline import COST_DRIVEN_SCHEDULES, Action, combined_1f1b, split_weight_keys
from clustersim.parallel.split import mtp_model_stage
from clustersim.parallel.stage_graph import StageGraph
from clustersim.plan.stage_work import build_step_work
from clustersim.scenario import Scenario

MEMORY_UNIT = 1_000_000   # one micro-batch's F in zb-2p's memory count (whole millionths keep its sums exact)


def schedule_memory(scenario: Scenario) -> tuple[int, int, int] | None:
    """What one micro-batch's F, B and W add to a rank's memory count, in millionths of F's, when
    the scenario's schedule is ordered by stage times and memory (zb-2p; None otherwise): F adds
    1, B frees ``1 - w``, W frees ``w``, ``w`` the share of a layer's activation its weight-gradient
    GEMMs still read (clustersim.memory.activations.weight_gradient_share). The heuristic orders by
    it (clustersim.plan.schedule_costs) and ``rank_memory`` counts the activations held by it."""
    par = scenario.parallel
    if par.schedule not in COST_DRIVEN_SCHEDULES:
        return None
    share = weight_gradient_share(scenario.model, par, scenario.training.dtype, kernels=scenario_kernels(scenario))
    w = round(share * MEMORY_UNIT)
    return (MEMORY_UNIT, w - MEMORY_UNIT, -w)


def held_after_b(memory: tuple[float, float, float] | None) -> float:
    """A micro-batch's share of its activation held between its B and its W under the count
    ``memory`` (``StageCosts.memory``, ``schedule_memory``; None: held whole, 1)."""
    return 1 if memory is None else -memory[2] / memory[0]


class InFlight(NamedTuple):
    """The activations one rank holds at its peaks, read off its actions once: per chunk, the
    micro-batches held right after each forward (when a count can have grown: a B or a W only
    frees), keeping only the points where no other point holds at least as much of every chunk.
    Any peak that weights the chunks by non-negative sizes (layers, the embedding's or the loss's
    chunk) is one of them."""

    peaks: tuple[tuple[float, ...], ...]


def in_flight(actions: tuple[Action, ...], chunks: int, after_b: float = 1, combined: bool = False) -> InFlight:
    """``actions``' peaks of activations held (``InFlight``): a forward adds one micro-batch to its
    chunk; the backward frees it; where the weight gradient is split off, the B frees ``1 -
    after_b`` of it and the W the rest, ``after_b`` what the W still reads (the inputs and output
    gradients of the layers' GEMMs; 1: held whole until the W, zb-h1's and zb-v's count).
    ``combined``: the pairs are Megatron-Core's combined 1F1B steps (``pipeline.combined_1f1b``),
    which run the forward's layers first to last and the backward's last to first, one of each at
    a time: the backward frees a layer as the forward stores one, so a pair holds what the rank
    held before it or after it (one layer more, not counted), not both micro-batches whole
    (docs/memory.md); DualPipe's pairs hold both."""
    split = split_weight_keys(actions)
    held = [0] * chunks
    points = {tuple(held)}
    for i, a in enumerate(actions):
        key = (a.chunk, a.micro_batch)
        if a.kind == "F":
            held[a.chunk] += 1
            if not (combined and a.paired):   # a combined pair's peak is counted after its backward
                points.add(tuple(held))
        elif key not in split:
            held[a.chunk] -= 1
        else:   # a split backward: the B frees what the W does not read, the W the rest
            held[a.chunk] -= after_b if a.kind == "W" else 1 - after_b
        if combined and i and actions[i - 1].paired:
            points.add(tuple(held))
    peaks: list[tuple[int, ...]] = []
    for p in sorted(points, key=lambda p: (-sum(p), p)):  # a point's dominators come before it
        if not any(all(x >= y for x, y in zip(q, p, strict=True)) for q in peaks):
            peaks.append(p)
    return InFlight(tuple(peaks))


def schedule_in_flight(schedule: tuple[tuple[Action, ...], ...], chunks: int,
                       after_b: float = 1, combined: bool = False) -> tuple[InFlight, ...]:
    """``in_flight`` of every rank of ``schedule`` (``chunks`` per rank: the stage graph's)."""
    return tuple(in_flight(acts, chunks, after_b, combined) for acts in schedule)


def _peak(held: InFlight, weights: list[int] | tuple[int, ...]) -> float:
    """Most of ``weights[c]`` per micro-batch of chunk ``c`` held at once."""
    return max(sum(w * n for w, n in zip(weights, p, strict=True)) for p in held.peaks)


def layers_in_flight(actions: tuple[Action, ...], rank: int, graph: StageGraph, counts: tuple[int, ...],
                     held: InFlight | None = None) -> float:
    """Peak number of (layer, micro-batch) activations held at once (``in_flight``). ``counts``:
    layers of each global stage; ``held``: ``in_flight(actions, graph.chunks)`` when known."""
    held = held or in_flight(actions, graph.chunks)
    return _peak(held, [counts[graph.stage(rank, c)] for c in range(graph.chunks)])


def chunk_in_flight(actions: tuple[Action, ...], rank: int, graph: StageGraph, work, model_stage: int,
                    held: InFlight | None = None) -> float:
    """Peak micro-batches in flight on the chunk(s) of ``rank`` that run ``model_stage`` (0 if
    none): the embedding's and the loss's tensors live only as long as their own chunk's."""
    chunks = [c for c in range(graph.chunks) if work.stages[graph.stage(rank, c)].model_stage == model_stage]
    return chunks_in_flight(actions, chunks, graph.chunks, held)


def chunks_in_flight(actions: tuple[Action, ...], chunks: list[int], n_chunks: int,
                     held: InFlight | None = None) -> float:
    """Peak micro-batches in flight on these chunks of a rank with ``n_chunks`` chunks (0 if
    none): ``chunk_in_flight`` once the chunks are known (the sweep's schedule profiles find them
    from the stage graph)."""
    if not chunks:
        return 0.0
    mask = [int(c in chunks) for c in range(n_chunks)]
    return float(_peak(held or in_flight(actions, n_chunks), mask))


def scenario_kernels(scenario: Scenario) -> Kernels:
    """How the scenario's kernels keep tensors on the GPU: its attention kernel, and fused
    element-wise ops unless the framework runs them eagerly without torch.compile."""
    elementwise = "fused" if scenario.training.compile else scenario.framework.elementwise
    return gpu_kernels(resolve_attention(scenario.training.attention, scenario.cluster.gpu.name), elementwise)


def rank_memory(scenario: Scenario, schedule: tuple[tuple[Action, ...], ...],
                held: tuple[InFlight, ...] | None = None) -> tuple[MemoryReport, ...]:
    """One MemoryReport per pipeline rank (DualPipe: its two chunks hold two model stages, the
    first and last ranks both the embedding and the output head; a rank the split leaves without a
    decoder layer holds only its embedding's and/or output layer's weights and activations). ``held``:
    ``schedule_in_flight(schedule, chunks, held_after_b(schedule_memory(scenario)))`` when the caller
    keeps it (zb-2p counts a micro-batch between its B and its W at the share its W reads, as its
    schedule was ordered by; the other schedules hold it whole)."""
    par = scenario.parallel
    work = build_step_work(scenario)
    graph = work.graph
    held = held or schedule_in_flight(schedule, graph.chunks, held_after_b(schedule_memory(scenario)),
                                      combined_1f1b(par.schedule, par.overlap_moe_expert_parallel_comm))
    counts = tuple(st.num_layers for st in work.stages)
    last_model = graph.num_model_stages - 1
    mtp_model = mtp_model_stage(par, graph.num_model_stages)   # where the MTP modules run (docs/parallel.md)
    kernels = scenario_kernels(scenario)
    out = []
    for r in range(par.pp):
        stages = [work.stages[graph.stage(r, c)] for c in range(graph.chunks)]
        layers = sum(st.num_layers for st in stages)
        moe = sum(st.moe_layers for st in stages)
        # a rank with no decoder layer (only the embedding and/or the loss, parallel.split) holds no
        # layer activations: only its ends' own, counted from ends_in_flight below
        in_flight = layers_in_flight(schedule[r], r, graph, counts, held[r]) / layers if layers else 0.0
        first = any(st.model_stage == 0 for st in stages)
        last = any(st.model_stage == last_model for st in stages)
        ends = (chunk_in_flight(schedule[r], r, graph, work, 0, held[r]) if first else 0.0,
                chunk_in_flight(schedule[r], r, graph, work, last_model, held[r]) if last else 0.0)
        # MTP modules placed off the last stage by a pipeline layout: their stage's own flag and in-flight
        # count (None: with the output and loss, activations.combine's default)
        mtp, mtp_in_flight = None, None
        if mtp_model != last_model:
            mtp = scenario.model.mtp_layers > 0 and any(st.model_stage == mtp_model for st in stages)
            mtp_in_flight = chunk_in_flight(schedule[r], r, graph, work, mtp_model, held[r]) if mtp else 0.0
        policies = RankPolicies(((par.recompute, layers),), 1) if uniform_policies(par) \
            else rank_policies(par, scenario.model.layers, r)
        out.append(memory_report(scenario.model, par, scenario.cluster, scenario.training.dtype,
                                 layers, in_flight, first, last, scenario.training.attention,
                                 framework=scenario.framework, kernels=kernels, policies=policies, stage=r,
                                 moe_layers=moe if scenario.model.is_moe else None,
                                 ends_in_flight=ends, mtp=mtp, mtp_in_flight=mtp_in_flight))
    return tuple(out)


_SEVERITY = {"fits": 0, "tight": 1, "does-not-fit": 2}


def worst_stage(memories: tuple[MemoryReport, ...]) -> MemoryReport:
    """The pipeline rank that decides the verdict: the worst verdict, then the highest peak."""
    return max(memories, key=lambda m: (_SEVERITY[m.verdict], m.peak_bytes_per_gpu, -m.stage))
