"""ZB-2p through the plan and both timing models: the schedule is ordered by the plan's own stage
times (clustersim.plan.schedule_costs), the engines run that order, and the memory model counts
the micro-batches it holds."""

from __future__ import annotations

import math

import pytest

from clustersim.api import estimate, simulate
from clustersim.parallel.pipeline import build_schedule, max_in_flight
from clustersim.plan.actions import plan_actions, step_schedule
from clustersim.plan.schedule_costs import schedule_costs
from clustersim.plan.stage_work import build_step_work
from tests.engine.test_schedule_bubbles import _chunk_times, _scenario, fast_link  # noqa: F401 (fixture)


def test_zb_2p_is_ordered_by_the_plans_stage_times(fast_link) -> None:  # noqa: F811
    sc = _scenario("zb-2p", 1)
    costs = schedule_costs(sc)
    f, b, w = _chunk_times(sc)
    assert costs.forward[1] == int(f * 1e6) and costs.backward_input[1] == int(b * 1e6)
    assert costs.backward_weight[1] == int(w * 1e6)
    sched = step_schedule(sc)
    assert sched == build_schedule("zb-2p", 4, 16, costs=costs)
    assert [[a.label for a in acts] for acts in plan_actions(sc, build_step_work(sc))] == \
        [[str(a) for a in acts] for acts in sched]
    assert schedule_costs(_scenario("zb-h1", 1)) is None


def test_engines_agree_and_zb_2p_beats_zb_h1(fast_link) -> None:  # noqa: F811
    steps = {}
    for s in ("1f1b", "zb-h1", "zb-2p"):
        sc = _scenario(s, 1)
        steps[s] = simulate(sc).step_time_s
        # nothing contends: the closed-form twin agrees with the event engine
        assert math.isclose(estimate(sc).step_time_s, steps[s], rel_tol=1e-6), s
    assert steps["zb-2p"] < steps["zb-h1"] < steps["1f1b"]


def test_zb_2p_holds_more_than_1f1b_and_at_most_twice(fast_link) -> None:  # noqa: F811
    sc = _scenario("zb-2p", 1)
    held = max(max_in_flight(acts) for acts in step_schedule(sc))
    assert held > 4
    act = {s: max(m.activations for m in simulate(_scenario(s, 1)).memory_by_stage) for s in ("1f1b", "zb-2p")}
    assert act["1f1b"] < act["zb-2p"] <= act["1f1b"] * 2 * 1.02


def test_zb_2p_counts_memory_as_what_b_and_w_free(fast_link) -> None:  # noqa: F811
    """The heuristic's memory weights are the memory model's (F +1, B -(1 - w), W -w; w the share a
    layer's weight-gradient GEMMs still read), and the reported activations count the same."""
    from clustersim.memory.activations import weight_gradient_share
    from clustersim.plan.memory_plan import in_flight, scenario_kernels, schedule_memory

    sc = _scenario("zb-2p", 1)
    w = weight_gradient_share(sc.model, sc.parallel, sc.training.dtype, kernels=scenario_kernels(sc))
    assert 0 < w < 1
    mem = schedule_costs(sc).memory
    assert mem == schedule_memory(sc) == (10**6, round(w * 10**6) - 10**6, -round(w * 10**6))
    assert schedule_memory(_scenario("zb-h1", 1)) is None
    sched = step_schedule(sc)
    share = -mem[2] / mem[0]
    counted = max(max(sum(p) for p in in_flight(acts, 1, share).peaks) for acts in sched)
    whole = max(max_in_flight(acts) for acts in sched)
    assert counted < whole   # a micro-batch between its B and its W counts at w, not 1
    act = {s: max(m.activations for m in simulate(_scenario(s, 1)).memory_by_stage) for s in ("1f1b", "zb-2p")}
    assert act["zb-2p"] == pytest.approx(act["1f1b"] * counted / 4, rel=0.02)
