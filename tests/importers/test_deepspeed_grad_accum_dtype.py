"""DeepSpeed ``data_types.grad_accum_dtype`` at ZeRO-3: stage3.py allocates its flat buffer of every
gradient partition in that dtype (``grad_partitions_flat_buffer = torch.zeros(..., dtype=
self.gradient_accumulation_dtype)``) and casts each reduce-scattered partition to it after a reduction
that still runs in ``communication_data_type`` (``__avg_scatter_grads``). Before
``training.grad_accum_dtype`` the import only noted it and priced 16-bit partitions: Llama-2-7B bf16
ZeRO-3 on 32 A100 held 0.392 GiB of gradients per GPU where DeepSpeed holds 0.784 GiB."""

from __future__ import annotations

import json

import pytest

from clustersim.api import simulate
from clustersim.cli import main
from clustersim.importers import finish, given_model, import_text
from clustersim.plan.dp_rules import grad_reduce_bytes
from clustersim.scenario import scenario_from_dict


def _import(stage: int, accum: str | None, dtype: str = "bf16"):
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4, dtype: {"enabled": True},
           "zero_optimization": {"stage": stage}}
    if accum is not None:
        cfg["data_types"] = {"grad_accum_dtype": accum}
    return finish(import_text("deepspeed-json", json.dumps(cfg), "ds.json", cluster="dgx-a100", nodes=4,
                              model=given_model((), "llama2-7b")), [], "llama2-7b")


def _notes(res) -> list[str]:
    return [n for n in res.notes if "grad_accum_dtype" in n]


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_fp32_accumulation_at_stage_3_holds_fp32_gradient_partitions(dtype):
    res = _import(3, "fp32", dtype)
    assert res.scenario["training"]["grad_accum_dtype"] == "fp32"
    assert len(_notes(res)) == 1 and "not modelled" not in _notes(res)[0]
    fp32, own = scenario_from_dict(res.scenario), scenario_from_dict(_import(3, None, dtype).scenario)
    a, b = simulate(fp32).to_json()["memory"], simulate(own).to_json()["memory"]
    params = own.model.total_params()
    assert b["gradients"] == pytest.approx(2 * params / 32, rel=1e-3)     # 16-bit partitions over dp 32
    assert a["gradients"] == pytest.approx(4 * params / 32, rel=1e-3)     # fp32 partitions
    assert a["peak_bytes_per_gpu"] > b["peak_bytes_per_gpu"]
    # the reduction still runs in communication_data_type (the model's 16-bit dtype)
    assert grad_reduce_bytes(fp32) == grad_reduce_bytes(own) == 2
    # left out, or the model's own dtype: nothing mapped, nothing noted
    for accum in (None, dtype):
        res = _import(3, accum, dtype)
        assert "grad_accum_dtype" not in res.scenario["training"] and _notes(res) == []


def test_stage_2_says_it_is_not_modelled():
    res = _import(2, "fp32", "fp16")
    assert "grad_accum_dtype" not in res.scenario["training"]
    assert len(_notes(res)) == 1 and "not modelled" in _notes(res)[0]


SMALL = ["model.preset=megatron-1.7b", "cluster.preset=dgx-h100", "cluster.nodes=1", "parallel.dp=8",
         "parallel.global_batch=16", "framework=deepspeed"]


@pytest.mark.parametrize(("sets", "allowed"), [
    (["parallel.zero_stage=2", "training.grad_accum_dtype=fp32"], "DeepSpeed's ZeRO-3"),
    (["parallel.zero_stage=3", "parallel.fsdp.version=2", "training.grad_accum_dtype=fp32"], "DeepSpeed's ZeRO-3"),
    (["parallel.zero_stage=3", "training.dtype=fp32", "training.grad_accum_dtype=bf16"], "fp32 or left out"),
    (["parallel.zero_stage=3", "training.dtype=fp16", "training.grad_accum_dtype=bf16"], "fp32 or fp16"),
])
def test_a_grad_accum_dtype_that_does_not_apply_exits_2_naming_the_field(sets, allowed, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--json", *(x for s in SMALL + sets for x in ("--set", s))])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "training.grad_accum_dtype" in err and allowed in err, err
