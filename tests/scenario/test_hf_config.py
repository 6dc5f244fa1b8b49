"""`model: {hf_config: PATH}` reads a Hugging Face config.json from disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustersim.errors import InputError
from clustersim.scenario import scenario_from_dict
from clustersim.workload.hf_config import DEFAULT_SEQ_LEN
from clustersim.workload.presets import MODEL_PRESETS

# meta-llama/Meta-Llama-3-8B's config.json, the keys that give the shape (no model_type: the
# architecture names the family)
LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
             "intermediate_size": 14336, "max_position_embeddings": 8192, "num_attention_heads": 32,
             "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
             "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
BASE = {"cluster": {"preset": "dgx-h100", "nodes": 1}, "parallel": {"tp": 8, "global_batch": 8}}


def _write(tmp_path: Path, cfg: dict, name: str = "Meta-Llama-3-8B") -> Path:
    path = tmp_path / name / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(cfg))
    return path


def test_llama3_config_matches_the_preset(tmp_path: Path) -> None:
    path = _write(tmp_path, LLAMA3_8B)
    from_hf = scenario_from_dict({**BASE, "model": {"hf_config": str(path), "seq_len": 8192}}).model
    preset = scenario_from_dict({**BASE, "model": {"preset": "llama3-8b"}}).model
    assert from_hf.name == "Meta-Llama-3-8B"
    for field in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "ffn_act", "vocab", "seq_len"):
        assert getattr(from_hf, field) == getattr(preset, field), field
    assert from_hf.total_params() == preset.total_params()
    assert MODEL_PRESETS["llama3-8b"]["ffn_act"] == "swiglu"


def test_seq_len_is_a_job_setting_never_max_position_embeddings(tmp_path: Path) -> None:
    path = _write(tmp_path, {**LLAMA3_8B, "max_position_embeddings": 131072})
    stated = scenario_from_dict({**BASE, "model": {"hf_config": str(path), "seq_len": 2048}}).model
    assert stated.seq_len == 2048 and not any("defaulted" in n for n in stated.notes)
    defaulted = scenario_from_dict({**BASE, "model": {"hf_config": str(path)}}).model
    assert defaulted.seq_len == DEFAULT_SEQ_LEN == 4096
    assert any("seq_len defaulted to 4096" in n for n in defaulted.notes)


def test_mixtral_config_is_a_mixture_of_experts(tmp_path: Path) -> None:
    cfg = {**LLAMA3_8B, "architectures": ["MixtralForCausalLM"], "num_local_experts": 8, "num_experts_per_tok": 2,
           "vocab_size": 32000}
    path = _write(tmp_path, cfg)
    sc = scenario_from_dict({"model": {"hf_config": str(path)}, "cluster": {"preset": "dgx-h100", "nodes": 1},
                             "parallel": {"tp": 1, "dp": 8, "ep": 8, "global_batch": 8}})
    assert (sc.model.moe_experts, sc.model.moe_top_k) == (8, 2)


def test_a_key_of_another_family_is_refused_by_name(tmp_path: Path) -> None:
    """num_local_experts is no Llama key: refused, never read as if it were, never dropped."""
    path = _write(tmp_path, {**LLAMA3_8B, "num_local_experts": 8})
    with pytest.raises(InputError) as exc:
        scenario_from_dict({**BASE, "model": {"hf_config": str(path)}})
    assert exc.value.field.endswith("num_local_experts")
