"""ZB-2p (clustersim.parallel.zb_auto): the Zero Bubble paper's greedy schedule.

The expected orders are what the paper's own code (sail-sg/zero-bubble-pipeline-parallelism,
megatron/core/pipeline_parallel/auto_schedule.py at 6229e790, ``initial_solution``) returns for
the example at the bottom of that file, ``simple_schedule(4, 12, 5, 6, 4, 0, 14)`` (F, B, W costs
5, 6, 4, no p2p time, memory F +2, B -1, W -1, limit 14), read off its order index per stage."""

from __future__ import annotations

import random

import pytest

from clustersim.errors import InputError
from clustersim.parallel.pipeline import build_schedule, dry_run, max_in_flight, validate_schedule
from clustersim.parallel.zb_auto import FLAG_SETTINGS, StageCosts, _greedy, zb_auto

PAPER_EXAMPLE = ["FFFFFFFBWFBWFBBFBWFBWBFWWWBWBWBWBWBW",
                 "FFFFFBFBFBFBFBWFBWBFBWFBWBWBWWBWWWWW",
                 "FFFBFBFBFBFBFBFBFBWFBWBFBWWBWWWWWWWW",
                 "FBFBFBFBFBFBFBFBFBFBFBWFBWWWWWWWWWWW"]


def test_the_papers_example_order() -> None:
    got = zb_auto(4, 12, StageCosts.uniform(4, 5, 6, 4, 0), limit=14, mem=(2, -1, -1))
    assert ["".join(a.kind for a in acts) for acts in got.order] == PAPER_EXAMPLE
    assert got.span == 183
    # the micro-batches of each kind run in order on every rank
    for acts in got.order:
        for kind in "FBW":
            assert [a.micro_batch for a in acts if a.kind == kind] == list(range(12))


def _random_costs(rng: random.Random, pp: int) -> StageCosts:
    return StageCosts(tuple(rng.randint(1, 50) for _ in range(pp)), tuple(rng.randint(1, 60) for _ in range(pp)),
                      tuple(rng.randint(1, 40) for _ in range(pp)), rng.choice([0, rng.randint(0, 20)]))


def test_every_pass_respects_the_dependencies_and_the_memory_limit() -> None:
    """The paper's own checks at the end of ``manual_order`` (each end after its inputs' ends plus
    the p2p time plus its own cost), the 2 pp limit on micro-batches from F to W, and a schedule
    that clustersim's dry run completes."""
    rng = random.Random(7)
    checked = 0
    for _ in range(60):
        pp = rng.randint(2, 8)
        m = rng.randint(pp, 4 * pp)
        costs = _random_costs(rng, pp)
        cost = {"F": costs.forward, "B": costs.backward_input, "W": costs.backward_weight}
        for flags in FLAG_SETTINGS:
            try:
                g = _greedy(m, costs, (1, 0, -1), 2 * pp, *flags)
            except ValueError:
                continue
            end = {(a.kind, r, a.micro_batch): t
                   for r, acts in enumerate(g.order) for a, t in zip(acts, g.ends[r], strict=True)}
            for (kind, r, i), t in end.items():
                c = cost[kind][r]
                if kind == "F" and r > 0:
                    assert t >= end[("F", r - 1, i)] + costs.comm + c
                if kind == "B":
                    assert t >= end[("F", r, i)] + c
                    if r < pp - 1:
                        assert t >= end[("B", r + 1, i)] + costs.comm + c
                if kind == "W":
                    assert t >= end[("B", r, i)] + c
            assert all(max_in_flight(acts) <= 2 * pp for acts in g.order)
            dry_run(g.order, pp, m)
            checked += 1
    assert checked > 300


def test_equal_times_leave_no_bubble_on_any_rank() -> None:
    """With F = B = W and no p2p time each rank runs from its first F to its last W without a wait
    (Qi et al. 2024 §3: ZB-2p's bubble is near zero), holding more than 1F1B's pp micro-batches."""
    for pp, m in ((4, 12), (8, 24), (8, 64)):
        g = zb_auto(pp, m)
        assert g.span == 3 * m
        assert max(max_in_flight(acts) for acts in g.order) > pp


def test_build_schedule_zb_2p() -> None:
    costs = StageCosts((5, 5, 5, 7), (6, 6, 6, 8), (4, 4, 4, 5), 1)
    sched = build_schedule("zb-2p", 4, 16, costs=costs)
    assert sched == zb_auto(4, 16, costs).order
    validate_schedule(sched, 4, 16)
    assert build_schedule("zb-2p", 4, 16) == zb_auto(4, 16).order   # no costs: the paper's unit times
    with pytest.raises(InputError):
        build_schedule("zb-2p", 4, 16, 2)


def test_a_limit_too_small_is_refused() -> None:
    with pytest.raises(ValueError, match="no ZB schedule"):
        zb_auto(4, 8, limit=0.5)


def test_memory_weights_come_with_the_costs_and_the_limit_is_2p_fs() -> None:
    """``StageCosts.memory`` is the count the heuristic uses (limit 2 pp F's): scaled weights give the
    same order; a B that frees most of a micro-batch lets more forwards run ahead of their W."""
    costs = StageCosts.uniform(4, 5, 6, 4, 1)
    assert zb_auto(4, 16, costs._replace(memory=(10**6, 0, -10**6))).order == zb_auto(4, 16, costs).order
    loose = zb_auto(4, 16, costs._replace(memory=(10, -6, -4)))
    assert loose.order == zb_auto(4, 16, costs, mem=(10, -6, -4)).order
    for acts in loose.order:   # the count 10 per F, -6 per B, -4 per W never exceeds 2 pp F's
        held = 0
        for a in acts:
            held += {"F": 10, "B": -6, "W": -4}[a.kind]
            assert held <= 2 * 4 * 10
    assert max(max_in_flight(a) for a in loose.order) > 8   # F to W: more than 2 pp in flight
