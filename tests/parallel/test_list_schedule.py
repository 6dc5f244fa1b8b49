"""The list-scheduling kernel (clustersim.parallel.list_schedule): its rule on toy programs, its
monotonicity (max-plus), rank order independence, release/floor/delays, and deadlocks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.parallel.list_schedule import list_schedule
from clustersim.parallel.pipeline import build_schedule, dry_run


def _one_f_one_b_events(pp: int, m: int):
    """1F1B on ``pp`` ranks as kernel events: F of stage s, micro-batch i is event s*m + i, its
    backward (pp + s)*m + i; F awaits the previous stage's F, B the next stage's B."""
    needs, sends = [], []
    for r, acts in enumerate(build_schedule("1f1b", pp, m)):
        nd, sd = [], []
        for a in acts:
            i = a.micro_batch
            if a.kind == "F":
                nd.append(((r - 1) * m + i,) if r else ())
                sd.append((r * m + i,))
            else:
                nd.append(((pp + r + 1) * m + i,) if r < pp - 1 else ())
                sd.append(((pp + r) * m + i,))
        needs.append(nd)
        sends.append(sd)
    return needs, sends, 2 * pp * m


def test_toy_pipeline_with_transfers():
    """1F1B over 2 ranks, 2 micro-batches, F 1 s and B 2 s, transfers 0.5 s: rank 1 runs F0
    1.5-2.5, B0 2.5-4.5, F1 4.5-5.5, B1 5.5-7.5; rank 0 F0 0-1, F1 1-2, B0 5-7, B1 8-10."""
    needs, sends, n = _one_f_one_b_events(2, 2)
    durations = [[1.0 if a.kind == "F" else 2.0 for a in acts] for acts in build_schedule("1f1b", 2, 2)]
    run = list_schedule(needs, sends, durations, n, delay=0.5)
    assert run.complete
    assert run.clock == (10.0, 7.5)
    assert run.starts[0] == [0.0, 1.0, 5.0, 8.0]
    assert run.starts[1] == [1.5, 2.5, 4.5, 5.5]
    # the same per-action delays give the same times
    delays = [[0.5] * len(d) for d in durations]
    assert list_schedule(needs, sends, durations, n, delay=delays).clock == run.clock


def test_release_and_floor():
    """A forward released at 3 and ending no earlier than 4 (a gate), on one rank."""
    run = list_schedule([[(), ()]], [[(), ()]], [[1.0, 2.0]], 0, release=[[3.0, 0.0]], floor=[[4.5, 0.0]])
    assert run.starts[0] == [3.0, 4.5]
    assert run.ends[0] == [4.5, 6.5]


def test_deadlock_stops_where_the_input_never_arrives():
    run = list_schedule([[(1,)], [(0,)]], [[(0,)], [(1,)]], [[1.0], [1.0]], 2)
    assert not run.complete
    assert run.ran == (0, 0)
    assert run.arrivals == [None, None]


@settings(max_examples=60, deadline=None)
@given(pp=st.integers(1, 5), m=st.integers(1, 6), seed=st.integers(0, 10**6),
       bump=st.floats(0.0, 2.0), delay=st.floats(0.0, 1.0))
def test_max_plus_monotone_and_order_free(pp, m, seed, bump, delay):
    """Lengthening any action never shortens any end (the bound's argument, clustersim.sweep.replay),
    and visiting the ranks in reverse gives the same times."""
    import random

    rng = random.Random(seed)
    needs, sends, n = _one_f_one_b_events(pp, m)
    durations = [[rng.uniform(0.1, 2.0) for _ in nd] for nd in needs]
    base = list_schedule(needs, sends, durations, n, delay)
    r, i = rng.randrange(pp), rng.randrange(len(durations[0]))
    longer = [list(d) for d in durations]
    longer[r][i] += bump
    more = list_schedule(needs, sends, longer, n, delay)
    assert all(b <= a for a, b in zip(more.clock, base.clock, strict=True))
    back = list_schedule(needs[::-1], [
        [tuple(e) for e in sd] for sd in sends[::-1]], durations[::-1], n, delay)
    assert back.clock[::-1] == base.clock


def test_dry_run_is_the_kernel_on_unit_times():
    """``dry_run`` of 1F1B equals the kernel on the same events without transfers."""
    pp, m = 4, 6
    needs, sends, n = _one_f_one_b_events(pp, m)
    acts = build_schedule("1f1b", pp, m)
    durations = [[1.0 if a.kind == "F" else 2.5 for a in rank] for rank in acts]
    run = list_schedule(needs, sends, durations, n)
    dry = dry_run(acts, pp, m, 1, 1.0, 2.5)
    assert dry.makespan == max(run.clock)
    assert dry.start == tuple(tuple(s) for s in run.starts)


def test_closed_form_without_streams_is_the_kernel():
    """Where the closed form's actions have fixed durations (one data-parallel replica, no
    ZeRO-3, no pairs: nothing on the rank's streams), its recurrence gives the kernel's times with
    each action's contention-free total as its duration and its boundary's transfer as the delay
    (docs/engine.md, "The closed form's recurrence and the list-scheduling kernel")."""
    from clustersim.engine.recurrence import Recurrence
    from clustersim.plan.step_plan import build_plan
    from clustersim.scenario import load_scenario

    for schedule, v in (("1f1b", 1), ("interleaved-1f1b", 2), ("gpipe", 1)):
        s = load_scenario(None, ["model.preset=llama2-7b", "model.layers=16", "cluster.preset=dgx-h100",
                                 "cluster.nodes=2", "parallel.tp=2", "parallel.pp=8", "parallel.dp=1",
                                 "parallel.micro_batch=1", "parallel.global_batch=16",
                                 f"parallel.schedule={schedule}", f"parallel.virtual_stages={v}"])
        plan = build_plan(s)
        rec = Recurrence(plan)
        rec.run_to_end()
        closed = tuple(st.clock for st in rec.ranks)
        events: dict[object, int] = {}
        needs = [[(events.setdefault(a.needs, len(events)),) if a.needs is not None else () for a in rk.actions]
                 for rk in plan.ranks]
        sends = [[tuple(events.setdefault(k, len(events)) for k, _ in a.sends) for a in rk.actions]
                 for rk in plan.ranks]
        durations = [[rk.totals[(a.stage, a.part)].time_s for a in rk.actions] for rk in plan.ranks]
        delays = [[rk.send_at_s[a.sends[0][1]] if a.sends else 0.0 for a in rk.actions] for rk in plan.ranks]
        held = [rk.blocks_from for rk in plan.ranks]
        run = list_schedule(needs, sends, durations, len(events), delays, blocks_from=held)
        assert run.complete
        # Megatron-Core's sends (frameworks.blocking_from): every one, or the interleaved cool-down's
        last_f = [max(i for i, a in enumerate(rk.actions) if a.kind == "F") for rk in plan.ranks]
        assert held == ([0] * 8 if schedule != "interleaved-1f1b" else [f + 1 for f in last_f])
        # to rounding: the closed form adds a final backward's units one by one
        assert run.clock == pytest.approx(closed, rel=1e-12)


def test_a_blocking_send_holds_its_rank_until_it_arrives():
    """Two actions on one rank, the first sending with a 0.5 s transfer: blocking, the second
    starts at 1.5 s (Megatron's send_forward_recv_backward waits); overlapped, at 1 s."""
    free = list_schedule([[(), ()]], [[(0,), ()]], [[1.0, 1.0]], 1, delay=0.5)
    held = list_schedule([[(), ()]], [[(0,), ()]], [[1.0, 1.0]], 1, delay=0.5, blocks_from=[0])
    assert free.starts[0] == [0.0, 1.0] and held.starts[0] == [0.0, 1.5]
    assert held.ends[0][0] == 1.0 and held.clock == (2.5,)
