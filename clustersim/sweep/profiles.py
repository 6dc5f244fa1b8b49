"""What the screen needs from a pipeline schedule: its memory profile and the shape of the bound.

``schedule_profile`` reads a schedule (``parallel.pipeline.build_schedule`` on its stage graph)
once per (schedule, pp, micro-batches, virtual stages, layers): per pipeline rank the layers it
holds and the activations in flight as the memory plan counts them
(``plan.memory_plan.layers_in_flight``, ``chunks_in_flight``), which ranks can hold the peak
memory, and what the bound's pipeline term reads (chunk 0's layers per rank, whether every rank
ends with chunk 0's backward, the forward chains a zero-bubble or DualPipe rank first awaits:
``programs.start_paths``). A pure function of integers, memoised for every run alike.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from clustersim.parallel.pipeline import build_schedule, model_split, stage_graph
from clustersim.plan.memory_plan import chunks_in_flight, layers_in_flight
from clustersim.sweep.programs import StartPath, start_paths


@dataclass(frozen=True, slots=True)
class ScheduleProfile:
    """What memory and the bound need from a schedule: per rank (layers held, activations in
    flight as the engine counts them), chunk-0 layers per rank, and whether the bound's backward
    chain holds (every rank ends with chunk 0's backward of one micro-batch)."""

    ranks: tuple[tuple[int, float], ...]
    chunk0_layers: tuple[int, ...]
    first_layers: int  # layers of global stage 0 (with the embedding) and of the last (with the output)
    last_layers: int
    plain_chunks: tuple[tuple[tuple[int, int], ...], ...]  # per rank: (layers, how many chunks) of its
                                                          # chunks without embedding or output
    backward_chain: bool
    check_ranks: tuple[int, ...]  # the ranks that can hold the peak memory
    moe_held: tuple[int, ...] = ()   # MoE layers among each rank's layers
    firsts: tuple[bool, ...] = ()    # ranks holding the embedding (model stage 0)
    lasts: tuple[bool, ...] = ()     # ranks holding the output head (last model stage)
    fill: bool = True                # rank r waits for the first forward through ranks < r (GPipe/1F1B/interleaved)
    share: float = 1.0               # micro-batches through each chunk / all (DualPipe: each direction's half)
    ends: tuple[tuple[float, float], ...] = ()  # per rank: in flight on its embedding's / head's chunk (0: none)
    # without ``fill``: per rank, the forward chains its first action waits for (programs.start_paths)
    starts: tuple[tuple[StartPath, ...], ...] = ()
    least_layers: int = 0            # the fewest layers any rank holds (Screen.wait_floor_s)
    least_moe_layers: int = 0        # the fewest MoE layers any rank holds (its moe_held)


def profile_micro_batches(schedule: str, pp: int, num_micro_batches: int) -> int:
    """Micro-batches whose schedule has the same memory profile as ``num_micro_batches``: GPipe
    holds all (counted in closed form), 1F1B at most pp - r on rank r, interleaved 1F1B peaks
    during its warm-up of fewer than 2 pp micro-batches (Narayanan et al. 2021 §2.2; checked
    against the full schedules in tests/sweep/test_screen.py). The zero-bubble and DualPipe
    schedules are built in full."""
    cap = {"gpipe": 2, "1f1b": pp, "interleaved-1f1b": 2 * pp}.get(schedule, num_micro_batches)
    return min(num_micro_batches, cap)


@functools.lru_cache(maxsize=65536)
def schedule_profile(schedule: str, pp: int, num_micro_batches: int, virtual_stages: int,
                     layers: int, moe_flags: tuple[bool, ...] | None = None, mtp_layers: int = 0) -> ScheduleProfile:
    """The memory and bound profile of a schedule (see ScheduleProfile); ``moe_flags``: whether
    each layer is MoE, in order (``ModelSpec.moe_layer_flags``, i.e. ``is_moe_layer``; None: every
    layer counts as MoE, what a dense model's unused count is)."""
    m = profile_micro_batches(schedule, pp, num_micro_batches)
    if m != num_micro_batches:
        short = schedule_profile(schedule, pp, m, virtual_stages, layers, moe_flags, mtp_layers)
        if schedule == "gpipe":  # every forward runs before any backward: all micro-batches in flight
            ranks = tuple((held, float(num_micro_batches)) for held, _ in short.ranks)
            ends = tuple((float(num_micro_batches) if f else 0.0, float(num_micro_batches) if la else 0.0)
                         for f, la in zip(short.firsts, short.lasts, strict=True))
            return replace(short, ranks=ranks, ends=ends)
        return short
    actions = build_schedule(schedule, pp, num_micro_batches, virtual_stages)
    graph = stage_graph(schedule, pp, virtual_stages, num_micro_batches)
    model_counts = model_split(graph, layers, mtp_layers)
    counts = tuple(model_counts[graph.model_stage[g]] for g in range(graph.num_stages))
    starts = [sum(model_counts[:k]) for k in range(len(model_counts))]
    last_model = graph.num_model_stages - 1
    ranks, moe_held, firsts, lasts, ends = [], [], [], [], []
    for r in range(pp):
        ms = graph.rank_model_stages(r)
        held = sum(model_counts[k] for k in ms)
        ranks.append((held, layers_in_flight(actions[r], r, graph, counts) / held))
        ends.append(rank_ends(actions[r], ms, last_model))
        moe_held.append(held if moe_flags is None
                        else sum(moe_flags[i] for k in ms for i in range(starts[k], starts[k] + model_counts[k])))
        firsts.append(0 in ms)
        lasts.append(last_model in ms)
    old = schedule in ("gpipe", "1f1b", "interleaved-1f1b")
    last = [a[-1] for a in actions]
    chain = old and all(a.kind == "B" and a.chunk == 0 and a.micro_batch == last[0].micro_batch for a in last)
    plain = []
    for r in range(pp):
        sizes: dict[int, int] = {}
        for c in range(graph.chunks):
            g = graph.stage(r, c)
            if graph.model_stage[g] not in (0, last_model):
                sizes[counts[g]] = sizes.get(counts[g], 0) + 1
        plain.append(tuple(sorted(sizes.items())))
    return ScheduleProfile(tuple(ranks), tuple(counts[graph.stage(r, 0)] for r in range(pp)), model_counts[0],
                           model_counts[-1], tuple(plain), chain, check_ranks(ranks, firsts, lasts),
                           tuple(moe_held), tuple(firsts), tuple(lasts), old,
                           0.5 if schedule == "dualpipe" else 1.0, tuple(ends),
                           () if old else start_paths(schedule, pp, num_micro_batches, virtual_stages, layers,
                                                      mtp_layers),
                           least_layers=min(h for h, _ in ranks), least_moe_layers=min(moe_held))


def rank_ends(actions, model_stages: tuple[int, ...], last_model: int) -> tuple[float, float]:
    """Micro-batches in flight on a rank's chunks of model stage 0 and of the last model stage
    (``plan.memory_plan.chunks_in_flight``; 0 where the rank holds neither)."""
    def peak(stage: int) -> float:
        return chunks_in_flight(actions, [c for c, m in enumerate(model_stages) if m == stage], len(model_stages))
    return peak(0), peak(last_model)


def check_ranks(ranks: list[tuple[int, float]], firsts: list[bool], lasts: list[bool]) -> tuple[int, ...]:
    """Ranks whose memory can be the peak: those with the embedding or the output head and the
    other ranks that no other such rank matches in both layers held and micro-batches in
    flight (memory grows with both: ``MemoryModel.peak_bytes``)."""
    keep = {r for r in range(len(ranks)) if firsts[r] or lasts[r]}
    middle = [(held, f, r) for r, (held, f) in enumerate(ranks) if r not in keep]
    for held, k, r in middle:
        if not any((h2 >= held and k2 >= k) and (h2, k2) != (held, k) or ((h2, k2) == (held, k) and r2 < r)
                   for h2, k2, r2 in middle):
            keep.add(r)
    return tuple(sorted(keep))
