"""ZeRO-3 without ``overlap_comm`` (``parallel.overlap_grad_reduce: false``): every unit's gradient
reduce-scatter runs on the compute stream and the next unit waits for it (clustersim.frameworks
``zero3_overlaps_reduce``; deepspeed/runtime/zero/stage3.py reduces on the default stream without
overlap_comm). Left out, ZeRO-3 overlaps, whatever the framework's default for ZeRO 0-2."""

from __future__ import annotations

import json

import pytest

from clustersim.api import estimate, simulate
from clustersim.importers import finish, given_model, import_text
from clustersim.plan.data_parallel import dp_plan
from clustersim.plan.stage_work import build_step_work
from clustersim.scenario import scenario_from_dict


def make(overlap: bool | None, framework: str = "deepspeed", zero: int = 3):
    parallel = {"dp": 64, "micro_batch": 4, "global_batch": 512, "zero_stage": zero}
    if overlap is not None:
        parallel["overlap_grad_reduce"] = overlap
    return scenario_from_dict({"framework": framework, "model": {"preset": "llama2-7b"},
                               "cluster": {"preset": "dgx-a100", "nodes": 8}, "parallel": parallel,
                               "training": {"dtype": "bf16"}})


def reduce_scatter_s(sc) -> float:
    """Seconds of every ZeRO-3 reduce-scatter of one step, each alone on its links."""
    z3 = dp_plan(sc, build_step_work(sc)).zero3
    assert z3 is not None
    per_micro_batch = sum(item.plan.time_s for items in z3.reduce.values() for item in items)
    return per_micro_batch * sc.parallel.num_micro_batches


def test_left_out_zero3_overlaps_even_where_the_framework_does_not_for_zero_1_and_2() -> None:
    assert make(None).parallel.zero3_overlap_reduce is True          # DeepSpeed's validator: stage == 3
    assert make(None).parallel.overlap_grad_reduce is False          # DeepSpeed's default below stage 3
    assert make(False).parallel.zero3_overlap_reduce is False
    assert make(True).parallel.zero3_overlap_reduce is True
    assert estimate(make(None)).step_time_s == estimate(make(True)).step_time_s


@pytest.mark.parametrize("engine", [estimate, simulate])
def test_without_overlap_the_compute_waits_for_every_reduce_scatter(engine) -> None:
    on, off = make(True), make(False)
    t_on, t_off = engine(on).step_time_s, engine(off).step_time_s
    rs = reduce_scatter_s(off)
    assert rs > 0.1
    # the reductions no longer hide behind the backward: at least most of their time is added
    assert t_off - t_on > 0.5 * rs
    # and no more than all of it
    assert t_off - t_on <= rs * (1 + 1e-9)
    assert engine(off).breakdown["dp_comm"] > engine(on).breakdown["dp_comm"]


def test_both_engines_agree_exactly_when_the_reduction_blocks() -> None:
    """Nothing overlaps the reductions then, so nothing contends: the closed form is exact."""
    off = make(False)
    assert simulate(off).step_time_s == pytest.approx(estimate(off).step_time_s, rel=1e-12)


def test_zero_1_and_2_keep_their_own_rule() -> None:
    for zero in (1, 2):
        assert estimate(make(False, zero=zero)).step_time_s == estimate(make(None, zero=zero)).step_time_s


def test_a_deepspeed_config_with_overlap_comm_false_is_priced_as_such() -> None:
    config = {"train_batch_size": 512, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
              "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}
    times = []
    for overlap in (None, True, False):
        zero = dict(config["zero_optimization"])
        if overlap is not None:
            zero["overlap_comm"] = overlap
        result = finish(import_text("deepspeed-json", json.dumps({**config, "zero_optimization": zero}), "ds.json",
                                    cluster="dgx-a100", nodes=8, model=given_model((), "llama2-7b")), [], "llama2-7b")
        times.append(estimate(scenario_from_dict(result.scenario)).step_time_s)
    left_out, on, off = times
    assert left_out == on < off
