"""DeepSpeed ``data_types.grad_accum_dtype: fp32`` at ZeRO-3 holds the gradient partitions in fp32
(stage3.py grad_partitions_flat_buffer); clustersim prices them in 16 bits, and the import says so
instead of dropping the key silently."""

from __future__ import annotations

import json

from clustersim.importers import finish, given_model, import_text


def _notes(stage: int, accum: str | None) -> list[str]:
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2, "bf16": {"enabled": True},
           "zero_optimization": {"stage": stage}}
    if accum is not None:
        cfg["data_types"] = {"grad_accum_dtype": accum}
    res = finish(import_text("deepspeed-json", json.dumps(cfg), "ds.json", cluster="dgx-a100", nodes=1,
                             model=given_model((), "llama2-7b")), [], "llama2-7b")
    return [n for n in res.notes if "grad_accum_dtype" in n]


def test_fp32_accumulation_at_stage_3_is_named_in_a_note() -> None:
    notes = _notes(3, "fp32")
    assert len(notes) == 1 and "not modelled" in notes[0] and "stage 3" in notes[0]


def test_no_note_without_it_or_below_stage_3() -> None:
    assert _notes(3, None) == []
    assert _notes(3, "bf16") == []
    assert _notes(2, "fp32") == []
