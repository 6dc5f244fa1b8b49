"""Zero-bubble schedules (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", arXiv 2401.10241).

The backward pass splits into B (the input gradient, which the previous stage waits for) and W
(the weight gradient, which nothing waits for), so W can fill the pipeline's idle time.

* **ZB-H1** (§2.1, Figure 3 top): 1F1B's warm-up (``pp - r - 1`` forwards on rank ``r``), then
  F, B pairs, with rank ``r`` holding back its first ``r`` weight gradients: in the steady state
  micro-batch ``i``'s B is followed by W of micro-batch ``i - r``. The held-back Ws run in the
  cool-down where 1F1B idles. Every rank keeps at most ``pp`` micro-batches in flight, 1F1B's
  peak, and the bubble shrinks to ``(pp - 1)(F + B - W)`` (a third of 1F1B's when F = B = W).
* **ZB-V** (§6): two chunks per rank in a V (clustersim.parallel.stage_graph), the order of
  torch.distributed.pipelining ``ScheduleZBVZeroBubble._calculate_single_rank_operations``:
  warm-up ``2(pp - r) - 1`` chunk-0 forwards, ``r`` (chunk-1 F, chunk-0 F) pairs, ``pp - r``
  chunk-1 (F, B, W); steady (chunk-0 F, B, W, chunk-1 F, B, W); cool-down B pairs then Ws. With
  F = B = W it has no bubble and holds 1F1B's activation memory.
"""

from __future__ import annotations

from clustersim.parallel.pipeline_data import Action


def zb_h1(pp: int, rank: int, m: int) -> tuple[Action, ...]:
    warmup = min(pp - rank - 1, m)
    delay = min(rank, m)
    out = [Action("F", 0, i) for i in range(warmup)]
    pending: list[int] = []
    for i in range(m - warmup):
        out += [Action("F", 0, warmup + i), Action("B", 0, i)]
        pending.append(i)
        if len(pending) > delay:
            out.append(Action("W", 0, pending.pop(0)))
    for i in range(m - warmup, m):
        out.append(Action("B", 0, i))
        pending.append(i)
        out.append(Action("W", 0, pending.pop(0)))
    out += [Action("W", 0, i) for i in pending]
    return tuple(out)


def zb_v(pp: int, rank: int, m: int) -> tuple[Action, ...]:
    n_micro = max(2 * pp - 1, m)
    ops: list[Action] = []
    f0 = f1 = b0 = b1 = 0

    def add(kind: str, chunk: int, mb: int) -> None:
        if mb < m:
            ops.append(Action(kind, chunk, mb))

    for _ in range(2 * (pp - rank) - 1):
        add("F", 0, f0)
        f0 += 1
    for _ in range(rank):
        add("F", 1, f1)
        f1 += 1
        add("F", 0, f0)
        f0 += 1
    for _ in range(pp - rank):
        add("F", 1, f1)
        f1 += 1
        add("B", 1, b1)
        add("W", 1, b1)
        b1 += 1
    while f1 < f0 or f0 < n_micro:
        if f0 < n_micro:
            add("F", 0, f0)
            f0 += 1
        add("B", 0, b0)
        add("W", 0, b0)
        b0 += 1
        add("F", 1, f1)
        f1 += 1
        add("B", 1, b1)
        add("W", 1, b1)
        b1 += 1
    w0, w1 = b0, b1
    for _ in range(rank):
        add("B", 0, b0)
        b0 += 1
        add("B", 1, b1)
        b1 += 1
    for _ in range(pp - rank):
        add("B", 0, b0)
        b0 += 1
        add("W", 0, w0)
        w0 += 1
    while w1 < b1:
        add("W", 1, w1)
        w1 += 1
    while w0 < b0:
        add("W", 0, w0)
        w0 += 1
    return tuple(ops)
