"""DualPipe and DualPipe-V (DeepSeek-V3, arXiv 2412.19437 §3.2.1; deepseek-ai/DualPipe
dualpipe/dualpipe.py and dualpipev.py ``step``), as action lists.

Both run the eight phases of the public implementation on rank ``r`` (``half`` = the rank's
distance from its end of the pipeline, ``n`` = ranks in a half):

1. ``nF0``: ``2 (n - half - 1)`` forwards of phase 0;
2. ``nF0F1``: ``half + 1`` (phase-0 F, phase-1 F);
3. ``nB1W1F1``: ``n - half - 1`` times phase-1 B (weight gradient deferred), one pending W, phase-1 F;
4. ``nF0B1F1B0`` (main): ``m/2 - 2n + half + 1`` times (phase-0 F & phase-1 B) then (phase-1 F &
   phase-0 B), each an overlapped forward-backward pair - except the first one on the middle ranks;
5. ``nB1F1B0``: ``n - half - 1`` times phase-1 B, then (phase-1 F & phase-0 B);
6. ``nB1B0``: ``half + 1`` times phase-1 B, phase-0 B, deferring weight gradients from the middle on;
7. ``nWB0``: ``n - half - 1`` times a pending W, then phase-0 B (deferred W);
8. ``nW``: the remaining Ws.

Deferred weight gradients run first-in first-out (``WeightGradStore`` is a queue). DualPipe:
``pp`` ranks, ``n = pp / 2``, ``m/2`` micro-batches per direction; phase ``p`` on the second half
of the ranks is direction ``p xor 1`` (``phase ^= is_in_second_half``); direction 1's
micro-batches are numbered ``m/2 .. m-1``. DualPipe-V: ``n = pp`` ranks, ``m`` micro-batches
through both chunks of the V (phase = chunk), the "middle rank" is the last.
"""

from __future__ import annotations

from clustersim.parallel.pipeline_data import Action


class _Builder:
    def __init__(self, rank: int, pp: int, m: int, dual: bool) -> None:
        self.ops: list[Action] = []
        self.dual = dual
        half_ranks = pp // 2 if dual else pp
        self.flip = dual and rank >= pp // 2
        self.half = min(rank, pp - 1 - rank) if dual else rank
        self.n = half_ranks
        self.per_dir = m // 2 if dual else m
        self.base = (0, m // 2) if dual else (0, 0)
        self.f = [0, 0]
        self.b = [0, 0]
        self.w_queue: list[tuple[int, int]] = []
        self.middle = (self.half == half_ranks - 1)

    def chunk(self, phase: int) -> int:
        return phase ^ 1 if self.flip else phase

    def fwd(self, phase: int, paired: bool = False) -> None:
        c = self.chunk(phase)
        self.ops.append(Action("F", c, self.base[c] + self.f[c], paired))
        self.f[c] += 1

    def bwd(self, phase: int, zb: bool = False) -> None:
        c = self.chunk(phase)
        mb = self.base[c] + self.b[c]
        self.ops.append(Action("B", c, mb))
        self.b[c] += 1
        if zb:
            self.w_queue.append((c, mb))

    def weight(self) -> None:
        c, mb = self.w_queue.pop(0)
        self.ops.append(Action("W", c, mb))

    def fwd_bwd(self, p0: int, p1: int) -> None:
        self.fwd(p0, paired=True)
        self.bwd(p1)


def dualpipe_actions(pp: int, rank: int, m: int, dual: bool = True) -> tuple[Action, ...]:
    """Rank ``rank``'s actions (``dual``: DualPipe, else DualPipe-V)."""
    s = _Builder(rank, pp, m, dual)
    n, half = s.n, s.half
    for _ in range((n - half - 1) * 2):                       # 1
        s.fwd(0)
    for _ in range(half + 1):                                 # 2
        s.fwd(0)
        s.fwd(1)
    for _ in range(n - half - 1):                             # 3
        s.bwd(1, zb=True)
        s.weight()
        s.fwd(1)
    for i in range(s.per_dir - 2 * n + half + 1):             # 4
        if i == 0 and s.middle:   # "we don't overlap these two chunks to further reduce bubble size"
            s.fwd(0)
            s.bwd(1)
        else:
            s.fwd_bwd(0, 1)
        s.fwd_bwd(1, 0)
    for _ in range(n - half - 1):                             # 5
        s.bwd(1)
        s.fwd_bwd(1, 0)
    zb = False
    for i in range(half + 1):                                 # 6
        if i == (half + 1) // 2 and half % 2 == 1:
            zb = True
        s.bwd(1, zb)
        if i == (half + 1) // 2 and half % 2 == 0:
            zb = True
        s.bwd(0, zb)
    for _ in range(n - half - 1):                             # 7
        s.weight()
        s.bwd(0, zb=True)
    for _ in range(half + 1):                                 # 8
        s.weight()
    assert not s.w_queue, "DualPipe: weight-gradient queue not empty"
    return tuple(s.ops)
