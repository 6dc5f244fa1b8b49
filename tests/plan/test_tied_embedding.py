"""Tied embeddings across the pipeline: the rank with the input embedding and the rank with the
output layer sum their copies' gradients after the backward (clustersim.plan.data_parallel)."""

from __future__ import annotations

import math

import pytest

from clustersim.api import estimate, simulate
from clustersim.plan.data_parallel import dp_plan
from clustersim.plan.dp_rules import grad_reduce_bytes
from clustersim.plan.stage_work import build_step_work
from clustersim.scenario import scenario_from_dict


def _scenario(tied: bool, schedule: str = "1f1b", dp: int = 2, **parallel: object):
    return scenario_from_dict({
        "model": {"preset": "megatron-1.7b", "tie_embeddings": tied},
        "cluster": {"preset": "dgx-a100", "nodes": 1},
        "parallel": {"tp": 2 // dp, "pp": 4, "dp": dp, "global_batch": 32, "schedule": schedule, **parallel}})


def _tied_items(sc) -> dict[int, tuple]:
    plan = dp_plan(sc, build_step_work(sc))
    return {g: tuple(i for i in items if "tied embedding" in i.name) for g, items in plan.after_backward.items()}


@pytest.mark.parametrize("dp", [1, 2])
def test_first_and_last_stage_sum_the_tied_embedding_gradient(dp):
    sc = _scenario(True, dp=dp)
    items = {g: its for g, its in _tied_items(sc).items() if its}
    assert sorted(items) == [0, 3]
    (item,) = items[0]
    assert item.plan.op == "all_reduce"
    assert item.plan.size_bytes == math.ceil(sc.model.vocab / sc.parallel.tp) * sc.model.hidden * grad_reduce_bytes(sc)
    untied = _scenario(False, dp=dp)
    assert not any(_tied_items(untied).values())
    # it costs time; with dp = 2 it runs alone in the event engine too, which then adds what the
    # closed form adds (with dp = 1 the two ranks' halves overlap in time on the same NVLink pair
    # and the event engine, which prices link contention, makes each slightly slower)
    added_closed = estimate(sc).step_time_s - estimate(untied).step_time_s
    assert added_closed > 0
    if dp == 2:
        added_event = simulate(sc).step_time_s - simulate(untied).step_time_s
        assert added_event == pytest.approx(added_closed, rel=1e-6)


def test_no_all_reduce_where_one_rank_holds_both_ends():
    assert not any(_tied_items(_scenario(True, schedule="zb-v")).values())   # the V puts both on rank 0
