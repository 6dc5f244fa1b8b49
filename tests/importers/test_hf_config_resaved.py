"""The owners' config.json files as users hold them after `save_pretrained` (fine-tuned and quantised
copies on the Hub are re-saved by a current transformers, which writes derived keys and, from v5,
renames some), and malformed ones: the same model, or exit 2 naming the key; never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustersim.errors import InputError
from clustersim.scenario import scenario_from_dict
from clustersim.workload.hf_config import read_hf_config
from clustersim.workload.model_fields import model_from_fields

HERE = Path(__file__).resolve().parent / "hf_configs"


def _cfg(name: str) -> dict:
    return json.loads((HERE / name / "config.json").read_text())


def _params(cfg: dict, tmp_path: Path) -> tuple[int, int]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    model = model_from_fields("m", {**read_hf_config(str(path)), "seq_len": 4096})
    return model.total_params(), model.active_params()


def _maverick_resaved(cfg: dict) -> dict:
    text = dict(cfg["text_config"])
    nope = text.get("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(text["num_hidden_layers"])]
    text["layer_types"] = ["chunked_attention" if r else "full_attention" for r in nope]
    text["no_rope_layer_interval"] = 4
    return {**cfg, "text_config": text}


def _deepseek_resaved(cfg: dict) -> dict:
    return {**cfg, "qk_head_dim": cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"], "rope_interleave": True}


def _qwen3_moe_v5(cfg: dict) -> dict:
    out = {k: v for k, v in cfg.items() if k != "num_experts"}
    return {**out, "num_local_experts": cfg["num_experts"]}


@pytest.mark.parametrize("name,resave", [
    ("Llama-4-Maverick-17B-128E", _maverick_resaved),   # transformers 4.57: layer_types, no_rope_layer_interval
    ("DeepSeek-V3", _deepseek_resaved),                  # DeepseekV3Config: qk_head_dim, rope_interleave
    ("Qwen3-30B-A3B", _qwen3_moe_v5),                    # transformers v5: num_local_experts
    ("gpt-oss-20b", lambda c: {**c, "swiglu_alpha": 1.702}),   # transformers v5
    ("Qwen3-8B", lambda c: {k: v for k, v in c.items() if k != "head_dim"}),   # Qwen3Config default 128
])
def test_a_resaved_config_is_the_same_model(name, resave, tmp_path: Path) -> None:
    """Each of these was refused (exit 2 on a key transformers writes) or read at another width."""
    assert _params(resave(_cfg(name)), tmp_path) == _params(_cfg(name), tmp_path)


@pytest.mark.parametrize("name,edit,key", [
    ("Llama-3.1-8B", lambda c: {**c, "hidden_act": "relu2"}, "hidden_act"),   # was read as a 2-matrix MLP
    ("DeepSeek-V3", lambda c: {**c, "qk_head_dim": 100}, "qk_head_dim"),
    ("gpt-oss-20b", lambda c: {**c, "num_hidden_layers": 10**12}, "num_hidden_layers"),   # MemoryError before
    ("Llama-4-Maverick-17B-128E", lambda c: {**c, "text_config": {**c["text_config"], "moe_layers": 1}},
     "moe_layers"),                                                             # TypeError traceback before
    ("Llama-4-Maverick-17B-128E", lambda c: {**c, "text_config": {**c["text_config"], "num_hidden_layers": 10**12}},
     "num_hidden_layers"),
    ("Llama-4-Maverick-17B-128E",
     lambda c: {**c, "text_config": {**c["text_config"],
                                     "layer_types": ["full_attention"] * c["text_config"]["num_hidden_layers"]}},
     "layer_types"),
])
def test_a_malformed_config_is_refused_by_key(name, edit, key, tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(edit(_cfg(name))))
    with pytest.raises(InputError) as err:
        read_hf_config(str(path))
    assert err.value.field.endswith(key)


def test_an_unknown_family_is_named_before_its_non_finite_numbers(tmp_path: Path) -> None:
    """nemotron_h's published file holds `time_step_limit: [0.0, Infinity]`: it was refused for the
    number, not for being a family clustersim does not read."""
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "nemotron_h", "hidden_size": 4096, "time_step_limit": [0.0, Infinity]}')
    with pytest.raises(InputError) as err:
        read_hf_config(str(path))
    assert err.value.field.endswith("model_type") and err.value.value == "nemotron_h"


def test_a_config_replaces_the_preset_beside_it() -> None:
    """preset mixtral-8x7b with Mistral-7B's config.json ran as a 46.7B MoE named Mistral."""
    sc = scenario_from_dict({"model": {"preset": "mixtral-8x7b", "hf_config": str(HERE / "Mistral-7B-v0.1"),
                                       "seq_len": 4096},
                             "cluster": {"preset": "dgx-h100", "nodes": 1}, "parallel": {"tp": 8}})
    assert sc.model.moe_experts in (0, 1, None) and sc.model.total_params() == pytest.approx(7.24e9, rel=0.01)
    assert any("set aside" in n for n in sc.model.notes)
