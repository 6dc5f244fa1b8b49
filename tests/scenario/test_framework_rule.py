"""What a framework runs at all (clustersim.frameworks.framework_refusal), one rule for the scenario
loader and the sweep's space: DeepSpeed's BF16_Optimizer has ZeRO 0-1 and no offload, DeepSpeed's
PipelineEngine runs 1F1B only, and DeepSpeed offloads the optimizer only with ZeRO > 0
(deepspeedai/DeepSpeed edaa722: runtime/engine.py _do_optimizer_sanity_check, runtime/pipe/schedule.py
TrainSchedule, runtime/zero/stage_1_and_2.py and stage3.py)."""

from __future__ import annotations

import pytest

from clustersim.api import SWEEP_EVALUATORS
from clustersim.errors import InputError
from clustersim.scenario import scenario_from_dict
from clustersim.sweep.runner import sweep_spec
from clustersim.sweep.space import count_layouts, enumerate_layouts

BASE = {"model": {"preset": "megatron-1.7b"}, "cluster": {"preset": "dgx-a100", "nodes": 1},
        "training": {"dtype": "bf16"}}


def load(framework: str, **par):
    return scenario_from_dict({**BASE, "framework": framework,
                               "parallel": {"tp": 1, "pp": 1, "dp": 8, "global_batch": 64, **par}})


@pytest.mark.parametrize(("framework", "par", "field"), [
    ("deepspeed-bf16", {"zero_stage": 2}, "parallel.zero_stage"),
    ("deepspeed-bf16", {"zero_stage": 3}, "parallel.zero_stage"),
    ("deepspeed-bf16", {"zero_stage": 1, "offload": {"optimizer": True}}, "parallel.offload.optimizer"),
    ("deepspeed", {"zero_stage": 0, "offload": {"optimizer": True}}, "parallel.offload.optimizer"),
    ("deepspeed", {"pp": 2, "dp": 4, "schedule": "interleaved-1f1b", "virtual_stages": 4}, "parallel.schedule"),
    ("deepspeed", {"pp": 2, "dp": 4, "schedule": "gpipe"}, "parallel.schedule"),
    ("deepspeed-bf16", {"pp": 2, "dp": 4, "zero_stage": 1, "schedule": "interleaved-1f1b", "virtual_stages": 2},
     "parallel.schedule"),
])
def test_the_loader_refuses_what_deepspeed_does_not_run(framework, par, field):
    with pytest.raises(InputError) as exc:
        load(framework, **par)
    assert exc.value.field == field


def test_what_deepspeed_runs_still_loads():
    load("deepspeed-bf16", zero_stage=1)
    load("deepspeed-bf16", zero_stage=0)
    load("deepspeed", zero_stage=1, offload={"optimizer": True})
    load("deepspeed", zero_stage=3, offload={"optimizer": True, "params": True})
    load("deepspeed", pp=2, dp=4, zero_stage=1, schedule="1f1b")
    # other frameworks keep their schedules
    load("megatron-core", pp=2, dp=4, schedule="interleaved-1f1b", virtual_stages=4)


@pytest.mark.parametrize("framework", ["deepspeed", "deepspeed-bf16"])
def test_the_sweep_enumerates_only_what_the_loader_accepts(framework):
    sc = load(framework, zero_stage=1)
    spec = sweep_spec(sc, evaluators=SWEEP_EVALUATORS)
    listed = list(enumerate_layouts(sc.model, sc.cluster, sc.parallel, spec.space))
    assert len(listed) == count_layouts(sc.model, sc.cluster, sc.parallel, spec.space)
    assert {p.schedule for p in listed if p.pp > 1} == {"1f1b"}
    if framework == "deepspeed-bf16":
        assert {p.zero_stage for p in listed} <= {0, 1}
    for p in listed[::7]:
        load(framework, tp=p.tp, pp=p.pp, dp=p.dp, cp=p.cp, zero_stage=p.zero_stage, micro_batch=p.micro_batch,
             schedule=p.schedule, virtual_stages=p.virtual_stages, recompute=p.recompute,
             sequence_parallel=p.sequence_parallel, offload={"optimizer": p.offload_optimizer})
