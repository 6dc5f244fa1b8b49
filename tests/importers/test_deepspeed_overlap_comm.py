"""zero_optimization.overlap_comm is imported as DeepSpeed runs it (deepspeedai/DeepSpeed edaa722,
runtime/engine.py _configure_zero_optimizer): read by the ZeRO optimizers only, off under a
PipelineModule below stage 3, honoured at stage 1 since DeepSpeed 0.13.0 (PR #4887). It was mapped
to parallel.overlap_grad_reduce true wherever the config said so, which priced a reduction
overlapped with the backward that DeepSpeed runs after it."""

from __future__ import annotations

import json

from clustersim.importers import finish, import_text

FP16 = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8,
        "fp16": {"enabled": True}}


def imported(cfg: dict, parallel: dict | None = None):
    res = import_text("deepspeed-json", json.dumps(cfg), "ds.json", cluster="dgx-a100", nodes=None,
                      parallel=parallel)
    return finish(res, [f"parallel.{k}={v}" for k, v in (parallel or {}).items()], model="llama2-7b")


def test_stage_0_ignores_overlap_comm():
    """Stage 0 builds no ZeRO optimizer: the engine all-reduces after the backward (allreduce_gradients
    -> buffered_allreduce_fallback)."""
    res = imported({**FP16, "zero_optimization": {"stage": 0, "overlap_comm": True}})
    assert res.scenario["parallel"]["overlap_grad_reduce"] is False
    assert any("overlap_comm true ignored" in n and "stage 0" in n for n in res.notes)


def test_the_bf16_optimizer_ignores_overlap_comm():
    cfg = {**FP16, "fp16": {"enabled": False}, "bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "fp32"},
           "zero_optimization": {"stage": 1, "overlap_comm": True}}
    res = imported(cfg)
    assert res.scenario["framework"] == "deepspeed-bf16"
    assert res.scenario["parallel"]["overlap_grad_reduce"] is False
    assert any("BF16_Optimizer" in n and "overlap_comm true ignored" in n for n in res.notes)


def test_a_pipeline_module_turns_overlap_comm_off():
    """engine.py: "Pipeline parallelism does not support overlapped communication, will be disabled."."""
    res = imported({**FP16, "pipeline": {"stages": 2}, "zero_optimization": {"stage": 1, "overlap_comm": True}})
    assert res.scenario["parallel"]["pp"] == 2
    assert res.scenario["parallel"]["overlap_grad_reduce"] is False
    assert any("PipelineModule" in n for n in res.notes)
    res = imported({**FP16, "zero_optimization": {"stage": 1, "overlap_comm": True}}, parallel={"pp": 2})
    assert res.scenario["parallel"]["overlap_grad_reduce"] is False


def test_stage_1_keeps_overlap_comm_and_says_since_when():
    """Stage 1 honours overlap_comm since DeepSpeed 0.13.0 (PR #4887 removed engine.py's "Overlap and
    contiguous grads are meaningless in stage 1 and are ignored")."""
    res = imported({**FP16, "zero_optimization": {"stage": 1, "overlap_comm": True}})
    assert res.scenario["parallel"]["overlap_grad_reduce"] is True
    assert any("0.13.0" in n and "overlap_grad_reduce=false" in n for n in res.notes)
    res = imported({**FP16, "zero_optimization": {"stage": 2, "overlap_comm": False}})
    assert res.scenario["parallel"]["overlap_grad_reduce"] is False
    assert not any("overlap_comm" in n for n in res.notes)
