"""DeepSpeed ``zero_optimization.contiguous_gradients: false`` (default true). Before, the import
listed it as "not modelled (DeepSpeed's defaults assumed)" at every stage, so a ZeRO-2 job was
priced with reduce-scatters (Llama-2-7B fp16 on 32 A100: 3.9061 s) although stage_1_and_2.py then
reduces each bucket by an all-reduce (reduce_ipg_grads -> buffered_reduce_fallback ->
allreduce_bucket: dist.all_reduce), twice the bytes, which clustersim does not price: it now exits 2
naming the key. At stage 3 the reduce-scatter is the same and the bucket's gradients, kept until
the bucket is reduced, take the skipped buffer's bytes at the backward's peak: a note says so."""

from __future__ import annotations

import json

import pytest

from clustersim.cli import main
from clustersim.errors import InputError
from clustersim.importers import finish, given_model, import_text


def _config(stage: int, **zero) -> dict:
    return {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4, "fp16": {"enabled": True},
            "zero_optimization": {"stage": stage, "contiguous_gradients": False, **zero}}


def _import(cfg: dict):
    return finish(import_text("deepspeed-json", json.dumps(cfg), "ds.json", cluster="dgx-a100", nodes=4,
                              model=given_model((), "llama2-7b")), [], "llama2-7b")


def _notes(res) -> list[str]:
    return [n for n in res.notes if "contiguous_gradients" in n]


@pytest.mark.parametrize("stage", [1, 2])
def test_stages_1_2_without_offload_exit_2_naming_the_key(stage, tmp_path, capsys):
    with pytest.raises(InputError) as exc:
        _import(_config(stage))
    assert exc.value.field == "zero_optimization.contiguous_gradients" and "all-reduce" in str(exc.value.allowed)
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(_config(stage)))
    with pytest.raises(SystemExit) as sysexit:
        main(["import", "deepspeed-json", str(path), "--cluster", "dgx-a100", "--nodes", "4", "--model", "llama2-7b"])
    assert sysexit.value.code == 2 and "zero_optimization.contiguous_gradients" in capsys.readouterr().err


def test_stage_3_and_where_deepspeed_ignores_it_say_why_it_costs_nothing():
    notes = _notes(_import(_config(3)))
    assert len(notes) == 1 and "no effect" in notes[0] and "reduce-scatters either way" in notes[0]
    offload = _notes(_import(_config(2, offload_optimizer={"device": "cpu"})))
    assert len(offload) == 1 and "forces it on" in offload[0]
    stage0 = _notes(_import(_config(0)))
    assert len(stage0) == 1 and "ZeRO optimizer only" in stage0[0]
    assert not any("not modelled" in n for n in notes + offload + stage0)
