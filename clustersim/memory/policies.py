"""Which recompute policy each layer of each pipeline stage runs (docs/memory.md).

* ``recompute: none | selective | selective-op | full`` applies to every layer.
* ``recompute: full`` with Megatron's ``recompute_method`` (megatron/core/recompute.py,
  per model chunk of ``num_layers_per_pipeline_rank`` layers): ``uniform`` checkpoints groups of
  ``recompute_num_layers`` consecutive layers (the group's input is kept, all its layers are
  recomputed together in the backward); ``block`` checkpoints the first ``recompute_num_layers``
  layers of the chunk one by one and stores the rest without recompute.
* ``recompute_every: N`` (torchtitan's layer-wise selective AC, torchtitan/distributed/
  activation_checkpoint.py at 8a6c9fe6e ``_apply_ac_to_transformer_block``): a counter runs over
  the transformer blocks a rank wraps, in order; blocks whose count is a multiple of N are fully
  recomputed, the others run the base policy.

Per layer the result is one of ``none``, ``selective``, ``selective-op``, ``full`` (a checkpoint
starts here and keeps the layer's input) or ``full-inner`` (a later layer of a uniform group:
recomputed, keeps nothing).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from clustersim.parallel.layout import ParallelLayout
from clustersim.parallel.pipeline import layout_stage_layers


@dataclass(frozen=True, slots=True)
class RankPolicies:
    """The layers one pipeline rank holds, counted by policy, and the widest recompute group."""

    counts: tuple[tuple[str, int], ...]   # (policy, layers), sorted by policy name
    group_layers: int                     # layers one full-recompute checkpoint spans (uniform method)

    def count(self, policy: str) -> int:
        return dict(self.counts).get(policy, 0)


def chunk_policies(layout: ParallelLayout, layers: int, first_count: int = 0) -> tuple[str, ...]:
    """Policies of the ``layers`` layers of one model chunk; ``first_count`` blocks of the same
    rank came before it (for ``recompute_every``)."""
    base = layout.recompute
    out: list[str]
    if base == "full" and layout.recompute_method == "block":
        n = layout.recompute_num_layers
        out = ["full" if i < n else "none" for i in range(layers)]
    elif base == "full":
        n = max(1, layout.recompute_num_layers)
        out = ["full" if i % n == 0 else "full-inner" for i in range(layers)]
    else:
        out = [base] * layers
    every = layout.recompute_every
    if every:
        out = ["full" if (first_count + i + 1) % every == 0 else p for i, p in enumerate(out)]
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def stage_policies(layout: ParallelLayout, num_layers: int) -> tuple[tuple[str, ...], ...]:
    """Per global stage ``g = chunk * pp + rank``: the policy of each of its layers, in order."""
    counts = layout_stage_layers(layout, num_layers)
    out: list[tuple[str, ...]] = [()] * len(counts)
    for r in range(layout.pp):
        before = 0
        for c in range(layout.virtual_stages):
            g = c * layout.pp + r
            out[g] = chunk_policies(layout, counts[g], before)
            before += counts[g]
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def rank_policies(layout: ParallelLayout, num_layers: int, rank: int) -> RankPolicies:
    """What pipeline rank ``rank`` holds, by policy (RankPolicies)."""
    per_stage = stage_policies(layout, num_layers)
    tally: dict[str, int] = {}
    for c in range(layout.virtual_stages):
        for p in per_stage[c * layout.pp + rank]:
            tally[p] = tally.get(p, 0) + 1
    group = 1
    if layout.recompute == "full" and layout.recompute_method == "uniform":
        chunk = max(len(per_stage[c * layout.pp + rank]) for c in range(layout.virtual_stages))
        group = max(1, min(layout.recompute_num_layers, chunk))
    return RankPolicies(tuple(sorted(tally.items())), group)


def uniform_policies(layout: ParallelLayout) -> bool:
    """True when every layer runs ``layout.recompute`` (no partial recompute configured)."""
    return layout.recompute_every == 0 and (
        layout.recompute != "full" or (layout.recompute_method == "uniform" and layout.recompute_num_layers == 1))


__all__ = ["RankPolicies", "chunk_policies", "rank_policies", "stage_policies", "uniform_policies"]
