"""DeepSpeed-MoE: its MoE is model code (deepspeed.moe.layer.MoE), so a DeepSpeed config holds no MoE
setting. A MoE-looking key in the JSON is refused by name with what to do instead (state model.moe and
parallel.ep); the Megatron-DeepSpeed launch's --num-experts refusal says the same; and a deepspeed
framework scenario with model.moe, as that message describes, is timed."""

from __future__ import annotations

import json

import pytest

from clustersim import api
from clustersim.errors import InputError
from clustersim.importers import finish, import_text
from clustersim.importers.common import DEEPSPEED_MOE_INSTEAD
from clustersim.scenario import load_scenario

BASE = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4, "bf16": {"enabled": True},
        "zero_optimization": {"stage": 1}}


@pytest.mark.parametrize("key, value", [
    ("moe", {"enabled": True, "num_experts": 8, "ep_size": 8}),
    ("num_experts", 64),
    ("expert_parallel_size", 8),
    ("moe_expert_parallel_size", 8),
    ("ep_size", 4),
    ("use_residual", True),      # DeepSpeed-MoE layer arguments (deepspeed/moe/layer.py), listed as
    ("min_capacity", 4),         # ignored until 2026-11-28
    ("eval_capacity_factor", 1.0),
    ("noisy_gate_policy", "RSample"),
    ("use_tutel", True),
    ("k", 2),
])
def test_moe_keys_in_a_deepspeed_config_are_refused_with_what_to_do_instead(key, value) -> None:
    """Before: listed as an unknown key and ignored (the import exited 0 with a dense-or-preset model)."""
    with pytest.raises(InputError) as exc:
        finish(import_text("deepspeed-json", json.dumps({**BASE, key: value}), "ds.json", cluster="dgx-h100",
                           nodes=1), [])
    assert exc.value.field == key
    text = str(exc.value)
    for what in ("deepspeed.moe.layer.MoE", "model.moe.experts", "model.moe.top_k", "model.moe.capacity_factor",
                 "pad_to_capacity", "drop_tokens", "parallel.ep", "expert-data-parallel"):
        assert what in text, what


def test_megatron_deepspeed_experts_refusal_says_the_same() -> None:
    """A Megatron-DeepSpeed MoE launch is read (test_megatron_deepspeed_moe.py); one it cannot state,
    PR-MoE's pyramid of expert counts, is refused with the same advice."""
    line = ("deepspeed pretrain_gpt.py --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 "
            "--num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024 --micro-batch-size 4 "
            "--global-batch-size 256 --vocab-size 50257 --bf16 --deepspeed --num-experts 32 32 32 32 64 64 "
            "--moe-expert-parallel-size 8 --topk 1")
    with pytest.raises(InputError) as exc:
        finish(import_text("megatron-args", line, "cmd", cluster="dgx-h100", nodes=2), [])
    assert exc.value.field == "--num-experts" and DEEPSPEED_MOE_INSTEAD in str(exc.value)


def test_a_deepspeed_scenario_with_model_moe_is_timed() -> None:
    """The combination the message points to: framework deepspeed, model.moe with a capacity factor
    and padding (drop_tokens=True), expert parallelism over 8 of 64 data-parallel ranks."""
    sc = load_scenario(None, ["framework=deepspeed", "model.preset=mixtral-8x7b", "model.moe.capacity_factor=1.25",
                              "model.moe.pad_to_capacity=true", "cluster.preset=dgx-h100", "cluster.nodes=8",
                              "parallel.tp=1", "parallel.pp=1", "parallel.dp=64", "parallel.ep=8",
                              "parallel.zero_stage=1", "parallel.sequence_parallel=false", "parallel.micro_batch=1",
                              "parallel.global_batch=256", "parallel.recompute=full"])
    report = api.simulate(sc)
    assert report.step_time_s > 0 and report.breakdown["ep_comm"] > 0
