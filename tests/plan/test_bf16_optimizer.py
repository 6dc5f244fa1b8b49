"""DeepSpeed's BF16_Optimizer (framework ``deepspeed-bf16``, clustersim/data/frameworks.yaml): its fp32
gradient accumulation after every micro-batch's backward and its all-reduce of the whole gradient."""

from __future__ import annotations

import math

from clustersim.api import estimate, simulate
from clustersim.compute import Op
from clustersim.plan.data_parallel import dp_plan
from clustersim.plan.dp_rules import grad_reduce_op
from clustersim.plan.optimizer_step import micro_batch_grad_pass_s
from clustersim.plan.stage_work import build_step_work
from clustersim.scenario import scenario_from_dict


def make(framework: str, mbs: int = 2, zero: int = 1, schedule: str = "1f1b", tp: int = 2, dp: int = 2, pp: int = 2):
    return scenario_from_dict({
        "framework": framework,
        "model": {"preset": "megatron-1.7b"},
        "cluster": {"preset": "dgx-a100", "nodes": 1},
        "parallel": {"tp": tp, "pp": pp, "dp": dp, "micro_batch": mbs, "global_batch": 16 * dp, "zero_stage": zero,
                     "schedule": schedule},
        "training": {"dtype": "bf16"}})


def _passes(work) -> list[list[Op]]:
    return [[op for unit in st.backward for op in unit if isinstance(op, Op) and op.name == "grad_accumulate_fp32"]
            for st in work.stages]


def test_every_stage_adds_its_gradients_into_fp32_once_per_micro_batch() -> None:
    sc = make("deepspeed-bf16")
    work = build_step_work(sc)
    for st, ops in zip(work.stages, _passes(work), strict=True):
        assert len(ops) == 1 and ops[0] is st.backward[-1][-1]      # after the backward's last unit
        assert ops[0].bytes_moved == st.params * 18                 # cast 2 + 4, add 4 + 4 + 4
        assert ops[0].time_s == micro_batch_grad_pass_s(sc, st.params) > 0
        assert ops[0] in st.backward_weight[-1]                     # a split W action carries it
    # DeepSpeed's ZeRO optimizer accumulates in the 16-bit gradients: no such pass
    assert not any(_passes(build_step_work(make("deepspeed"))))


def test_the_pass_is_per_micro_batch_so_smaller_micro_batches_pay_it_more_often() -> None:
    def added(mbs: int) -> float:
        return simulate(make("deepspeed-bf16", mbs)).step_time_s - simulate(make("deepspeed", mbs)).step_time_s
    params = build_step_work(make("deepspeed-bf16")).stages[0].params
    one = micro_batch_grad_pass_s(make("deepspeed-bf16"), params)
    assert added(1) > added(4) > 0
    assert added(1) >= 8 * one     # 8 micro-batches per rank at least pay it on the critical path


def test_both_engines_run_it_alike() -> None:
    # one pipeline (no data-parallel traffic to contend with the sends): the engines agree exactly
    # (DeepSpeed's PipelineEngine runs 1F1B only: GPipe under deepspeed-bf16 is refused, test_framework_rule.py)
    for sc in (make("deepspeed-bf16", tp=4, dp=1), make("deepspeed-bf16", 1, tp=4, dp=1)):
        event, closed = simulate(sc), estimate(sc)
        assert math.isclose(event.step_time_s, closed.step_time_s, rel_tol=1e-9)


def test_zero1_all_reduces_the_whole_gradient() -> None:
    assert grad_reduce_op(make("deepspeed-bf16")) == "all_reduce"
    assert grad_reduce_op(make("deepspeed")) == "reduce_scatter"
    # ZeRO-2 is DeepSpeed's ZeRO optimizer (framework deepspeed; BF16_Optimizer has no stage 2)
    assert grad_reduce_op(make("deepspeed", zero=2, pp=1, dp=4)) == "reduce_scatter"
    plan = dp_plan(make("deepspeed-bf16"), build_step_work(make("deepspeed-bf16")))
    ops = {item.plan.op for items in plan.after_backward.values() for item in items}
    assert ops == {"all_reduce"}
    assert {item.plan.op for items in plan.after_optimizer.values() for item in items} == {"all_gather"}
