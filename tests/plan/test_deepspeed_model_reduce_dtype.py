"""DeepSpeed reduces the gradients in the model's dtype unless ``communication_data_type`` says
otherwise (deepspeed/runtime/engine.py ``DeepSpeedEngine.communication_data_type``: fp16 for an fp16
job, bf16 for bf16, fp32 for fp32; handed to zero/stage_1_and_2.py and zero/stage3.py). Before
``frameworks.model_reduce_dtype`` the deepspeed entries said bf16 whatever the job, so an imported
fp16 DeepSpeed job reported ``"grad_reduce_dtype": "bf16"`` in run --json (the bytes were 2 either way)."""

from __future__ import annotations

import json

import pytest

from clustersim.api import simulate
from clustersim.frameworks import grad_reduce_dtype, load_framework
from clustersim.importers import finish, given_model, import_text
from clustersim.plan.dp_rules import grad_reduce_bytes
from clustersim.scenario import scenario_from_dict


@pytest.mark.parametrize("framework", ["deepspeed", "deepspeed-bf16"])
@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_deepspeed_reduces_in_the_model_dtype(framework, zero):
    fw = load_framework(framework)
    got = {dtype: grad_reduce_dtype(zero, None, fw, dtype=dtype) for dtype in ("fp16", "bf16", "fp32", "fp8")}
    assert got == {"fp16": "fp16", "bf16": "bf16", "fp32": "fp32", "fp8": "bf16"}


def test_megatron_legacy_zero3_runs_deepspeeds_rule():
    """Megatron-LM 2021 hands ZeRO-3 to DeepSpeed: its reduce-scatter runs in the model dtype (an fp32
    job in fp32, where the rule said bf16); below ZeRO-3 Megatron's own fp32."""
    fw = load_framework("megatron-legacy")
    assert [grad_reduce_dtype(3, None, fw, dtype=d) for d in ("fp32", "fp16", "bf16")] == ["fp32", "fp16", "bf16"]
    assert grad_reduce_dtype(1, None, fw, dtype="bf16") == "fp32"


def _imported(stage: int, extra: dict | None = None):
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4, "fp16": {"enabled": True},
           "zero_optimization": {"stage": stage}, **(extra or {})}
    res = finish(import_text("deepspeed-json", json.dumps(cfg), "ds.json", cluster="dgx-a100", nodes=4,
                             model=given_model((), "llama2-7b")), [], "llama2-7b")
    return scenario_from_dict(res.scenario)


@pytest.mark.parametrize("stage", [2, 3])
def test_an_imported_fp16_deepspeed_job_reports_and_prices_fp16(stage):
    sc = _imported(stage)
    assert sc.training.dtype == "fp16" and sc.framework.name == "deepspeed"
    assert simulate(sc).to_json()["grad_reduce_dtype"] == "fp16"
    assert grad_reduce_bytes(sc) == 2
    # communication_data_type fp32 still reduces in fp32
    fp32 = _imported(stage, {"communication_data_type": "fp32"})
    assert simulate(fp32).to_json()["grad_reduce_dtype"] == "fp32" and grad_reduce_bytes(fp32) == 4
