"""Where each pipeline stage lives and where its activations go next: the stage graph of a schedule.

A *global stage* is one model chunk on one pipeline rank. The graph gives, for every global
stage, its (rank, chunk), the *model stage* it runs (which slice of the layers) and the global
stages before and after it on a micro-batch's path:

* GPipe, 1F1B, ZB-H1: one chunk per rank, stage ``r`` on rank ``r``.
* Interleaved 1F1B: rank ``r`` holds chunks ``r, r + pp, ...`` (Narayanan et al. 2021 §2.2.2).
* ZB-V and DualPipe-V: two chunks per rank in a V, stage ``r`` and stage ``2 pp - 1 - r``
  (Qi et al. 2024, arXiv 2401.10241 §6; torch.distributed.pipelining ``style="v"``), so rank 0
  holds the first and the last stage and the turn at rank ``pp - 1`` needs no transfer.
* DualPipe (DeepSeek-V3, arXiv 2412.19437 §3.2.1; deepseek-ai/DualPipe): two pipelines over the
  same ``pp`` model stages in opposite directions. Rank ``r`` holds model stage ``r`` (chunk 0,
  the forward-direction pipeline, fed at rank 0) and model stage ``pp - 1 - r`` (chunk 1, the
  reverse pipeline, fed at rank ``pp - 1``): two copies of the parameters. The first half of the
  micro-batches takes the first path, the second half the other. Global stages ``0 .. pp-1`` are
  the first path, ``pp .. 2pp-1`` the second (stage ``pp + k`` runs model stage ``k`` on rank
  ``pp - 1 - k``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


class _IndexMemo:
    """A slot for the graph's (rank, chunk) -> stage index, built once per graph (not a field:
    equality, hashing and ``replace`` do not see it)."""

    __slots__ = ("_index_memo",)


@dataclass(frozen=True, slots=True)
class StageGraph(_IndexMemo):
    pp: int
    chunks: int                              # chunks per rank
    placement: tuple[tuple[int, int], ...]   # global stage -> (rank, chunk)
    model_stage: tuple[int, ...]             # global stage -> model stage (slice of layers it runs)
    num_model_stages: int
    prev: tuple[int, ...]                    # global stage before this one on the path, -1 = first
    next: tuple[int, ...]                    # global stage after this one, -1 = last (loss)
    path_split: int = 0                      # DualPipe: micro-batches >= this take the second path

    @property
    def num_stages(self) -> int:
        return len(self.placement)

    def stage(self, rank: int, chunk: int) -> int:
        return self._index[(rank, chunk)]

    @property
    def _index(self) -> dict[tuple[int, int], int]:
        try:
            return self._index_memo
        except AttributeError:
            index = {rc: g for g, rc in enumerate(self.placement)}
            object.__setattr__(self, "_index_memo", index)  # frozen dataclass; the slot is ours
            return index

    def runs(self, rank: int, chunk: int, micro_batch: int) -> bool:
        """Whether micro-batch ``micro_batch`` passes through chunk ``chunk`` of ``rank``."""
        if not self.path_split:
            return True
        return (micro_batch >= self.path_split) == (chunk == 1)

    def copies(self, model_stage: int) -> int:
        """Global stages that run ``model_stage`` (2 for DualPipe: two parameter copies)."""
        return self.model_stage.count(model_stage)

    def rank_model_stages(self, rank: int) -> tuple[int, ...]:
        """The model stages rank ``rank`` holds parameters of, chunk by chunk."""
        return tuple(self.model_stage[self.stage(rank, c)] for c in range(self.chunks))

    @property
    def in_rank_order(self) -> bool:
        """Whether rank ``r`` holds model stages ``chunk * pp + r`` (GPipe, 1F1B, interleaved 1F1B,
        ZB-H1); a V or DualPipe graph does not."""
        return all(self.rank_model_stages(r) == tuple(c * self.pp + r for c in range(self.chunks))
                   for r in range(self.pp))

    @property
    def stage_order(self) -> str:
        """The order of the model stages, in words (a split's entries, ``parallel.layers_per_stage``,
        follow it)."""
        if self.in_rank_order:
            return "in stage order chunk * pp + rank"
        if self.num_model_stages == 2 * self.pp:
            return ("in the V's path order: stage s runs on rank s for s < pp and on rank 2 pp - 1 - s "
                    "after, so rank r holds stages r and 2 pp - 1 - r")
        return "in stage order: stage s runs on rank s and its reverse-path copy on rank pp - 1 - s"


def _linear(placement: list[tuple[int, int]], pp: int, chunks: int) -> StageGraph:
    n = len(placement)
    return StageGraph(pp, chunks, tuple(placement), tuple(range(n)), n, tuple(range(-1, n - 1)),
                      tuple(list(range(1, n)) + [-1]))


@lru_cache(maxsize=256)
def stage_graph(schedule: str, pp: int, virtual_stages: int = 1, num_micro_batches: int = 0) -> StageGraph:
    """The stage graph of ``schedule`` on ``pp`` ranks (see the module docstring)."""
    if schedule in ("zb-v", "dualpipe-v"):
        placement = [(g, 0) for g in range(pp)] + [(2 * pp - 1 - g, 1) for g in range(pp, 2 * pp)]
        return _linear(placement, pp, 2)
    if schedule == "dualpipe":
        placement = [(g, 0) for g in range(pp)] + [(pp - 1 - k, 1) for k in range(pp)]
        model_stage = tuple(range(pp)) * 2
        prev = tuple([-1] + list(range(pp - 1)) + [-1] + list(range(pp, 2 * pp - 1)))
        nxt = tuple(list(range(1, pp)) + [-1] + list(range(pp + 1, 2 * pp)) + [-1])
        return StageGraph(pp, 2, tuple(placement), model_stage, pp, prev, nxt, max(1, num_micro_batches // 2))
    v = virtual_stages if schedule == "interleaved-1f1b" else 1
    return _linear([(g % pp, g // pp) for g in range(pp * v)], pp, v)
