"""Balancing a job over mixed GPUs (pure functions): layers per pipeline stage, micro-batches per replica.

A pipeline runs at the pace of its slowest stage (the steady state of 1F1B or GPipe repeats
every ``max_p T_p`` seconds, Narayanan et al. 2021 §2.2) and a data-parallel step at the pace of
its slowest replica (they meet at the gradient reduction). On mixed GPUs an even split leaves
the faster parts idle, so:

* ``balance_layers``: give stage ``p`` ``n_p`` layers so that ``max_p (e_p + n_p t_p)`` is as small
  as possible, ``t_p`` being one layer's forward + backward time on the stage's GPUs and ``e_p``
  its fixed work (embedding, output layer and loss). Adding layers one at a time to the stage
  whose time grows least is optimal for this min-max problem with costs linear in ``n_p``
  (identical jobs on uniform machines: the greedy "earliest finish" rule, Horowitz and Sahni
  1976). With interleaving, rank ``p`` runs ``v`` chunks, so its total is balanced and then split
  as evenly as possible over its chunks. Every stage keeps at least one layer per chunk.
* ``balance_micro_batches``: give replica ``d`` ``m_d`` micro-batches so that
  ``max_d (m_d + pp - 1) b_d`` is as small as possible, ``b_d`` being the replica's slowest stage
  per micro-batch (the pipeline formula of Narayanan et al. 2021 §2.2.1: ``(m + pp - 1)`` slots of
  the bottleneck stage); same greedy rule, in steps of ``step`` micro-batches (the interleaved
  schedule needs a multiple of ``pp``).

Frameworks that support uneven splits: Megatron-LM ``--decoder-first-pipeline-num-layers`` /
``--decoder-last-pipeline-num-layers`` and custom pipeline layouts; uneven per-replica batches need
a framework that weights each replica's gradient by its sample count (as heterogeneous-training
systems such as HetPipe, Park et al. 2020, and Whale, Jia et al. 2022, do).
"""

from __future__ import annotations

from collections.abc import Sequence

from clustersim.errors import InputError
from clustersim.parallel.split import empty_ranks
from clustersim.parallel.stage_graph import StageGraph, stage_graph


def balance_layers(layers: int, per_layer_s: Sequence[float], fixed_s: Sequence[float],
                   virtual_stages: int = 1) -> tuple[int, ...]:
    """Layers of each global stage (``len(per_layer_s) * virtual_stages`` entries, stage order
    ``chunk * pp + rank``). ``per_layer_s[p]`` and ``fixed_s[p]`` are per pipeline rank."""
    pp = len(per_layer_s)
    if pp == 0 or len(fixed_s) != pp:
        raise ValueError("per_layer_s and fixed_s need one entry per pipeline rank")
    if any(t <= 0 for t in per_layer_s):
        raise ValueError(f"per-layer times must be > 0, got {list(per_layer_s)}")
    v = virtual_stages
    if layers < pp * v:
        raise InputError("parallel.pp", pp, f"pp * virtual_stages ({pp * v}) <= model.layers ({layers})")
    totals = [v] * pp
    for _ in range(layers - pp * v):
        # ties: the rank nearer the middle, then the lower index (as stage_layers: first and last
        # stages also run the embedding and the output layer)
        p = min(range(pp), key=lambda r: (fixed_s[r] + (totals[r] + 1) * per_layer_s[r],
                                           -min(r, pp - 1 - r), r))
        totals[p] += 1
    out = [0] * (pp * v)
    for p, n in enumerate(totals):
        base, extra = divmod(n, v)
        for c in range(v):
            out[c * pp + p] = base + (1 if c < extra else 0)
    return tuple(out)


def balance_micro_batches(total: int, per_micro_batch_s: Sequence[float], pp: int, step: int = 1) -> tuple[int, ...]:
    """Micro-batches of each replica (summing to ``total``), multiples of ``step``."""
    dp = len(per_micro_batch_s)
    if dp == 0 or any(b <= 0 for b in per_micro_batch_s):
        raise ValueError(f"per-micro-batch times must be > 0, got {list(per_micro_batch_s)}")
    if total % step or total < dp * step:
        raise InputError("parallel.global_batch", total,
                         f"at least {step} micro-batches per replica and a multiple of {step} in all "
                         f"({dp} replicas)")
    counts = [step] * dp
    for _ in range((total - dp * step) // step):
        d = min(range(dp), key=lambda r: ((counts[r] + step + pp - 1) * per_micro_batch_s[r], r))
        counts[d] += step
    return tuple(counts)


def check_layers_per_stage(counts: Sequence[int], layers: int, stages: int, pp: int = 0,
                           virtual: bool = False, graph: StageGraph | None = None) -> tuple[int, ...]:
    """An explicit ``parallel.layers_per_stage``: one entry per model stage, each >= 0, summing to the
    layers, with no pipeline rank left holding nothing: a rank without a decoder layer must hold model
    stage 0 (the embedding) or the last one (the output layer and the loss), the rule of a framework
    split too (clustersim.parallel.split.empty_ranks): ``[0, 16, 16, 0]`` on pp 4 is Megatron-Core's
    ``--pipeline-model-parallel-layout E|t*16|t*16|L``, and ``Et|(tt|)*30mL`` for DeepSeek-V3 on PP8 x VP4
    a chunk of embedding alone (megatron/core/transformer/pipeline_parallel_layer_layout.py,
    Megatron-Bridge's DeepSeek-V3 H100 performance recipe). ``graph``: the schedule's stage graph
    (the loader passes it); without it the stages are ``chunk * pp + rank`` on ``pp`` ranks (0: one
    stage per rank), or with ``virtual`` a V schedule's (zb-v, dualpipe-v: ``stages = 2 pp``, rank r
    holding stages r and 2 pp - 1 - r)."""
    out = tuple(counts)
    v_shape = bool(pp and stages == 2 * pp and virtual)
    if graph is None:
        ranks = pp or stages
        graph = stage_graph("zb-v", pp) if v_shape else \
            stage_graph("interleaved-1f1b" if stages > ranks else "1f1b", ranks, max(1, stages // ranks))
    order = f"one per model stage, {graph.stage_order}"
    allowed = (f"{stages} counts ({order}), each >= 0, summing to model.layers ({layers}), that leave every "
               "pipeline rank a decoder layer, the embedding (the first stage) or the loss (the last stage)")
    if len(out) != stages or graph.num_model_stages != stages or any(not isinstance(n, int) or n < 0 for n in out) \
            or sum(out) != layers:
        raise InputError("parallel.layers_per_stage", list(counts), allowed)
    empty = empty_ranks(graph, out)
    if empty:
        raise InputError("parallel.layers_per_stage", list(counts), f"{allowed} (rank {empty[0]} would hold nothing)")
    return out
