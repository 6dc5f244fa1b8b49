"""The HF Trainer's stock DeepSpeed configs leave reduce_bucket_size, stage3_prefetch_bucket_size and
stage3_param_persistence_threshold "auto"; the Trainer fills them in from the model's hidden size h
(huggingface/transformers 02348331, src/transformers/integrations/deepspeed.py
HfTrainerDeepSpeedConfig.trainer_config_finalize: h x h; with ZeRO-3 0.9 x h x h and 10 x h). The
import refused "auto" for reduce_bucket_size with a message that did not mention it."""

from __future__ import annotations

import json

import pytest

from clustersim.errors import InputError
from clustersim.importers import finish, import_text

HF_Z3 = {"bf16": {"enabled": "auto"}, "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
         "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
         "zero_optimization": {"stage": 3, "overlap_comm": True, "reduce_bucket_size": "auto",
                               "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto"}}


def imported(cfg: dict, overrides: list[str] | None = None, model: str | None = "llama2-7b"):
    res = import_text("deepspeed-json", json.dumps(cfg), "ds.json", cluster="dgx-a100", nodes=4)
    return finish(res, overrides or [], model=model)


def test_the_hf_zero3_config_takes_the_trainers_values_from_the_hidden_size():
    res = imported(HF_Z3)
    assert res.scenario["parallel"]["dp_bucket_params"] == 4096 * 4096
    notes = " ".join(res.notes)
    assert "reduce_bucket_size \"auto\"" in notes and "16,777,216" in notes
    assert "15,099,494" in notes and "40,960" in notes     # 0.9 x 4096^2, 10 x 4096: named, not modelled


def test_below_stage_3_only_the_reduce_bucket_is_filled():
    cfg = {**HF_Z3, "zero_optimization": {**HF_Z3["zero_optimization"], "stage": 2}}
    res = imported(cfg, model="llama2-13b")
    assert res.scenario["parallel"]["dp_bucket_params"] == 5120 * 5120
    assert not any("15,099,494" in n or "0.9 x" in n for n in res.notes)


def test_the_users_bucket_wins():
    res = imported(HF_Z3, ["parallel.dp_bucket_params=1000"])
    assert res.scenario["parallel"]["dp_bucket_params"] == 1000
    assert not any("reduce_bucket_size \"auto\"" in n for n in res.notes)


def test_without_a_model_the_refusal_says_what_auto_needs():
    with pytest.raises(InputError) as err:
        imported(HF_Z3, model=None)
    assert "auto" in err.value.allowed and "hidden size" in err.value.allowed


def test_a_bad_bucket_names_auto_among_the_allowed():
    cfg = {**HF_Z3, "zero_optimization": {"stage": 2, "reduce_bucket_size": "big"}}
    with pytest.raises(InputError) as err:
        imported(cfg)
    assert err.value.field == "zero_optimization.reduce_bucket_size" and '"auto"' in err.value.allowed
