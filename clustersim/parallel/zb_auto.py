"""ZB-2p: the Zero Bubble paper's automatic schedule, its greedy heuristic over stage times.

Qi et al. 2024 ("Zero Bubble Pipeline Parallelism", arXiv 2401.10241, §3) search a per-rank order
of F (forward), B (input gradient) and W (weight gradient) for given per-stage times, a p2p time
and a per-rank memory limit: ZB-1p under 1F1B's activation memory (``p`` micro-batches), ZB-2p
under twice it (``2 p``). This module is that heuristic, written after the paper's code
(github.com/sail-sg/zero-bubble-pipeline-parallelism, megatron/core/pipeline_parallel/
auto_schedule.py at 6229e790, ``Graph.manual_order`` and ``initial_solution``): one greedy pass
per setting of three flags, the pass whose last rank finishes first kept (``zb_auto``). The
paper's runs used the heuristic alone: ``auto_schedule`` solves the ILP only ``if graph.nnodes < 0``
("Disabling ILP for now", the same on the ``arxiv`` branch at f68d3879), so there is no ILP here.

One greedy pass (``_greedy``), per micro-batch ``i`` in order:

* ``i = 0``: every rank runs F0; then, from the last rank up, each rank adds warm-up forwards while
  its clock is before the moment the gradient of micro-batch 0 can reach it (or, with
  ``bubble_before_first_b``, while one more forward still ends by then), within the memory limit;
  a rank keeps fewer warm-up forwards than the rank before it; then every rank runs B0, last rank
  first.
* ``i > 0``: each rank that has forwards left runs one, except (``prioritize_b``) a rank two
  forwards ahead of the next one whose forward would delay the next rank's B beyond what the
  largest bubble so far allows; a rank runs a forward only if the next ranks do. Before a forward
  or a B, a rank runs Ws while memory requires it, then Ws that end before its input arrives, then
  (``no_bubble_greedy``, or when the wait is larger than the largest bubble so far less its own)
  one more W that runs past the arrival. Rank 0 runs its pending Ws before its last B's.
* Then every rank runs its remaining Ws.

The memory count per rank is ``mem[kind]`` summed over the actions run (F adds, B and W free) and
stays within ``limit``. The paper's runs (``arxiv`` branch at f68d3879, zb_schedules.py
``get_zero_bubble_forward_backward_func``) count it by a formula per layer and s b, not a measurement:
``f_mem = 34 h + 5 a s``, ``w_mem = -32 h`` (what W still reads), ``b_mem = -f_mem - w_mem``, limit
ZERO_BUBBLE_MEM_LIMIT (``2 p``) x ``f_mem``; 6229e790 measures ``torch.cuda.memory_allocated()``
around F and B instead (``ScheduleTimers.conclusion``). The plan passes clustersim's own count, in
units of F: ``(1, -(1 - w), -w)``, ``w`` the memory model's share held from B to W
(clustersim.memory.activations.weight_gradient_share; 32 h / (34 h + 5 a s) for the paper's GPTs). Times are the paper's list schedule: an action ends at
``max(rank clock, input end + comm) + cost``; a rank's bubble sums its waits after its first F.

Differences from the paper's code, none of which changes an order it would build: actions, not
node ids; the paper's asserts that the times respect the dependencies are tests here
(tests/parallel/test_zb_auto.py). The ``arxiv`` branch's version takes one time per kind for all
stages (the median over ranks) and, in the first micro-batch, puts each rank's warm-up forwards
and B0 rank by rank from the last; 6229e790 takes per-stage times and puts all warm-up forwards
first, which this module follows (clustersim knows each stage's times).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from clustersim.parallel.pipeline_data import Action

F, B, W = 0, 1, 2
FLAG_SETTINGS = tuple((a, p, n) for a in (True, False) for p in (True, False) for n in (True, False))


class StageCosts(NamedTuple):
    """Per pipeline stage (rank) the time of one micro-batch's F, B (input gradient) and W
    (weight gradient), and the time of one p2p transfer; any unit, the same for all. ``memory``:
    what one micro-batch's F, B and W add to a rank's memory count (they sum to 0; any unit, the
    limit being ``2 pp`` F's): the default holds a micro-batch whole from its F to its W; the plan
    passes what B and W free (clustersim.plan.schedule_costs.schedule_memory)."""

    forward: tuple[float, ...]
    backward_input: tuple[float, ...]
    backward_weight: tuple[float, ...]
    comm: float = 0.0
    memory: tuple[float, float, float] = (1, 0, -1)

    @classmethod
    def uniform(cls, pp: int, f: float = 1, b: float = 1, w: float = 1, comm: float = 0,
                memory: tuple[float, float, float] = (1, 0, -1)) -> StageCosts:
        """The same times on every stage (default: the paper's first schedule, built with
        F = B = W = 1 and no p2p time before anything is profiled; zb_schedules.py
        ``update_schedule(scheduler, 1, 1, 1, 0)``)."""
        return cls((f,) * pp, (b,) * pp, (w,) * pp, comm, memory)


class Greedy(NamedTuple):
    """One greedy pass: each rank's actions in order, each action's end time (same shape) and
    the pass's length (the paper's ``best_time``: the longest span from a rank's first F's start to
    its last W's end)."""

    order: tuple[tuple[Action, ...], ...]
    ends: tuple[tuple[float, ...], ...]
    span: float


def _greedy(m: int, costs: StageCosts, mem: Sequence[float], limit: float,
            bubble_before_first_b: bool, prioritize_b: bool, no_bubble_greedy: bool) -> Greedy:
    """One pass of ``Graph.manual_order`` (auto_schedule.py at 6229e790, lines 124-339)."""
    pp = len(costs.forward)
    cost = (costs.forward, costs.backward_input, costs.backward_weight)
    comm = costs.comm
    done = [[0] * pp for _ in range(3)]               # f, b, w: actions of each kind run so far
    end = [0.0] * pp                                   # e: each rank's clock
    held = [0.0] * pp                                  # m: each rank's memory count
    fin = [[[0.0] * m for _ in range(pp)] for _ in range(3)]   # t: end of each (kind, rank, mb)
    bubble = [0.0] * pp                                # stage_bubble
    order: list[list[Action]] = [[] for _ in range(pp)]
    ends: list[list[float]] = [[] for _ in range(pp)]

    def put(j: int, k: int) -> None:
        i = done[k][j]
        c = cost[k][j]
        if held[j] + mem[k] > limit:
            raise ValueError("memory limit exceeded")   # the paper asserts
        t = no_wait = end[j] + c
        if k == F and j > 0:
            t = max(t, fin[F][j - 1][i] + comm + c)
        if k == B and j < pp - 1:
            t = max(t, fin[B][j + 1][i] + comm + c)
        if done[F][j] > 0:
            bubble[j] += t - no_wait
        end[j] = fin[k][j][i] = t
        held[j] += mem[k]
        done[k][j] += 1
        order[j].append(Action("FBW"[k], 0, i))
        ends[j].append(t)

    def w_before(j: int, arrive: float) -> None:
        """Ws before an action whose input arrives at ``arrive`` (lines 266-279 and 291-304)."""
        while done[W][j] < done[B][j] and end[j] + cost[W][j] <= arrive:
            put(j, W)
        if done[W][j] < done[B][j] and end[j] < arrive:
            if arrive - end[j] <= max(bubble) - bubble[j]:
                if no_bubble_greedy:
                    put(j, W)
            else:
                put(j, W)

    def w_for_memory(j: int, k: int) -> None:
        while held[j] + mem[k] > limit:
            if done[W][j] >= done[B][j]:
                raise ValueError("cannot fit the memory limit")
            put(j, W)

    for i in range(m):
        if i == 0:
            for j in range(pp):
                put(j, F)
            extra = [0] * pp
            last_t = 0.0
            for j in range(pp - 1, -1, -1):
                if j == pp - 1:
                    last_t = fin[F][j][0] + cost[B][j]
                    continue
                mem_j, clock = held[j], end[j]
                while done[F][j] + extra[j] < m and mem_j + mem[F] <= limit:
                    if bubble_before_first_b:
                        if clock + cost[F][j] > last_t + comm:
                            break
                    elif clock >= last_t + comm:
                        break
                    mem_j += mem[F]
                    clock += cost[F][j]
                    extra[j] += 1
                last_t = max(clock, last_t + comm) + cost[B][j]
            for j in range(1, pp):
                while extra[j] > 0 and extra[j] >= extra[j - 1] and done[F][j] + extra[j] < m:
                    extra[j] -= 1
            for j in range(pp):
                for _ in range(extra[j]):
                    put(j, F)
            for j in range(pp - 1, -1, -1):
                put(j, B)
            continue
        want = [0] * pp
        for j in range(pp):
            if done[F][j] >= m:
                continue
            if prioritize_b and j + 1 < pp and done[F][j] >= done[F][j + 1] + 2:
                next_fb = end[j + 1] + cost[F][j + 1] + cost[B][j + 1] + comm
                if end[j] >= next_fb:
                    continue
                w_cost, w_cnt = 0.0, 0
                with_w = held[j] + mem[F]
                while with_w > limit and done[W][j] + w_cnt < done[B][j]:
                    w_cost += cost[W][j]
                    with_w += mem[W]
                    w_cnt += 1
                if end[j] + cost[F][j] + w_cost <= next_fb:
                    want[j] = 1
                    continue
                if next_fb - end[j] <= max(bubble) - bubble[j]:
                    continue
            want[j] = 1
        for j in range(pp - 2, -1, -1):
            want[j] = min(want[j], want[j + 1])
        for j in range(pp):
            if not want[j]:
                continue
            w_for_memory(j, F)
            if j > 0:
                w_before(j, fin[F][j - 1][done[F][j]] + comm)
            put(j, F)
        for j in range(pp - 1, -1, -1):
            w_for_memory(j, B)
            if j + 1 < pp:
                w_before(j, fin[B][j + 1][i] + comm)
            if j == 0 and done[F][j] == m:
                while done[W][j] < done[B][j]:
                    put(j, W)
            put(j, B)
    for j in range(pp):
        if done[F][j] < m:
            # a rank after it ran all its forwards first, and "a rank runs a forward only if the next
            # ranks do" then holds this one back for good: the paper's pass leaves such forwards out
            raise ValueError(f"rank {j} is left {m - done[F][j]} forwards")
        while done[W][j] < m:
            put(j, W)
    span = max(fin[W][j][m - 1] - fin[F][j][0] + cost[F][j] for j in range(pp))
    return Greedy(tuple(map(tuple, order)), tuple(map(tuple, ends)), span)


def zb_auto(pp: int, m: int, costs: StageCosts | None = None, limit: float | None = None,
            mem: Sequence[float] | None = None) -> Greedy:
    """The paper's ``initial_solution`` (auto_schedule.py at 6229e790, lines 342-362): the greedy
    pass under each of the 8 flag settings, the shortest kept (the first of equals, in the
    paper's order of settings). ``costs``: per-stage times (None: ``StageCosts.uniform(pp)``);
    ``mem``: what F, B and W add to a rank's count (they sum to 0; None: ``costs.memory``, by
    default a micro-batch counted whole from its F to its W); ``limit``: the memory limit in units
    of ``mem`` (None: ``2 pp`` F's, ZB-2p: the paper's ``max_mem = 2 * p * mem_f``, efficiency.py
    and ZERO_BUBBLE_MEM_LIMIT x ``f_mem`` in zb_schedules.py on the ``arxiv`` branch)."""
    costs = costs or StageCosts.uniform(pp)
    mem = costs.memory if mem is None else tuple(mem)
    if len(costs.forward) != pp or len(costs.backward_input) != pp or len(costs.backward_weight) != pp:
        raise ValueError(f"stage costs for {len(costs.forward)} stages; expected pp = {pp}")
    if abs(sum(mem)) > 1e-9:
        raise ValueError(f"F, B and W memory {tuple(mem)} do not sum to 0")
    limit = 2 * pp * mem[F] if limit is None else limit
    best: Greedy | None = None
    failed = []
    for flags in FLAG_SETTINGS:
        try:
            got = _greedy(m, costs, mem, limit, *flags)
        except ValueError as e:   # the paper's code stops here; a setting that fails is left out
            failed.append(str(e))
            continue
        if best is None or got.span < best.span:
            best = got
    if best is None:
        raise ValueError(f"no ZB schedule for pp {pp}, {m} micro-batches, memory limit {limit}: {failed[0]}")
    return best
