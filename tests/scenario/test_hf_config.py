"""`model: {hf_config: PATH}` reads a Hugging Face config.json from disk."""

from __future__ import annotations

import json
from pathlib import Path

from clustersim.scenario import scenario_from_dict
from clustersim.workload.presets import MODEL_PRESETS

# The fields of meta-llama/Meta-Llama-3-8B's config.json that clustersim reads.
LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
             "intermediate_size": 14336, "max_position_embeddings": 8192, "num_attention_heads": 32,
             "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
             "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def test_llama3_config_matches_the_preset(tmp_path: Path) -> None:
    path = tmp_path / "Meta-Llama-3-8B" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(LLAMA3_8B))
    base = {"cluster": {"preset": "dgx-h100", "nodes": 1}, "parallel": {"tp": 8, "global_batch": 8}}
    from_hf = scenario_from_dict({**base, "model": {"hf_config": str(path)}}).model
    preset = scenario_from_dict({**base, "model": {"preset": "llama3-8b"}}).model
    assert from_hf.name == "Meta-Llama-3-8B"
    for field in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "ffn_act", "vocab", "seq_len"):
        assert getattr(from_hf, field) == getattr(preset, field), field
    assert MODEL_PRESETS["llama3-8b"]["ffn_act"] == "swiglu"


def test_explicit_fields_override_the_hf_config(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA3_8B))
    sc = scenario_from_dict({"model": {"hf_config": str(path), "seq_len": 4096},
                             "cluster": {"preset": "dgx-h100", "nodes": 1}, "parallel": {"tp": 8, "global_batch": 8}})
    assert sc.model.seq_len == 4096 and sc.model.layers == 32


def test_mixtral_config_is_a_mixture_of_experts(tmp_path: Path) -> None:
    cfg = {**LLAMA3_8B, "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    sc = scenario_from_dict({"model": {"hf_config": str(path)}, "cluster": {"preset": "dgx-h100", "nodes": 1},
                             "parallel": {"tp": 1, "dp": 8, "ep": 8, "global_batch": 8}})
    assert (sc.model.moe_experts, sc.model.moe_top_k) == (8, 2)
