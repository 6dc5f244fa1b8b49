"""Real config.json files of each family (tests/importers/hf_configs/, sources in its README) read
as `model: {hf_config: ...}`: the shape of the family's preset, every key classified, the keys
that change the cost in ways clustersim does not model refused by name (exit 2)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from clustersim.errors import InputError
from clustersim.workload.hf_config import read_hf_config
from clustersim.workload.hf_config_keys import MODEL_TYPES, WRAPPERS, key_table
from clustersim.workload.model_fields import model_from_fields
from clustersim.workload.presets import MODEL_PRESETS

HERE = Path(__file__).resolve().parent / "hf_configs"
CONFIGS = sorted(p.parent.name for p in HERE.glob("*/config.json"))
PRESET_OF = {"Llama-3.1-8B": "llama3-8b", "Mistral-7B-v0.1": "mistral-7b", "Mixtral-8x7B-v0.1": "mixtral-8x7b",
             "Qwen3-8B": "qwen3-8b", "Qwen3-32B": "qwen3-32b", "Qwen3-30B-A3B": "qwen3-30b-a3b",
             "Qwen3-235B-A22B": "qwen3-235b-a22b", "gpt-oss-20b": "gpt-oss-20b", "gpt-oss-120b": "gpt-oss-120b",
             "gemma-3-27b-pt": "gemma3-27b", "Llama-4-Scout-17B-16E": "llama4-scout",
             "Llama-4-Maverick-17B-128E": "llama4-maverick", "DeepSeek-V3": "deepseek-v3", "Kimi-K2-Base": "kimi-k2",
             "GLM-4.5": "glm-4.5", "GLM-4.5-Air": "glm-4.5-air",
             # later releases of the same architectures (README: written from the fixtures above)
             "Qwen3-30B-A3B-Instruct-2507": "qwen3-30b-a3b", "Kimi-K2-Instruct": "kimi-k2",
             "DeepSeek-V3.1": "deepseek-v3", "GLM-4.6": "glm-4.5"}
# Fixtures without a preset, against the owner's published count (Gemma 3 Technical Report, arXiv
# 2503.19786, Table 1: embedding + non-embedding parameters; the vision encoder apart)
PUBLISHED_ONLY = {"gemma-3-1b-pt": 302e6 + 698e6, "gemma-3-4b-pt": 675e6 + 3209e6, "gemma-3-12b-pt": 1012e6 + 10759e6,
                  # Google, "Introducing Gemma 3 270M" (2025-08-14): 170M embedding + 100M transformer blocks
                  "gemma-3-270m": 170e6 + 100e6,
                  # the Qwen model cards' 'Number of Parameters'
                  "Qwen2.5-7B": 7.61e9, "Qwen2.5-3B": 3.09e9,
                  "Qwen3-Coder-480B-A35B-Instruct": 480e9,   # '480B in total and 35B activated'
                  "Qwen1.5-MoE-A2.7B": 14.3e9,   # '14.3B parameters in total and 2.7B activated'
                  "Qwen2-57B-A14B": 57.41e9,     # Qwen2 blog (qwenlm.github.io/blog/qwen2), 'Params' row
                  # the DeepSeek model cards: '236B total parameters', '15.7B total parameters'
                  "DeepSeek-V2": 236e9, "DeepSeek-V2-Lite": 15.7e9,
                  "Qwen3-0.6B": 0.6e9,            # model card: 'Number of Parameters: 0.6B' (0.44B non-embedding)
                  "Llama-3.2-1B-Instruct": 1.23e9,  # Meta's Llama 3.2 model card: '1.23B'
                  # Hugging Face's model page, 'Model size 12.2B params' (Mistral's announcement: '12B')
                  "Mistral-Nemo-Base-2407": 12.2e9,
                  "Ministral-8B-Instruct-2410": 8_019_808_256,   # model card: 'Number of parameters 8,019,808,256'
                  # Mistral's card: '24 billion parameters', the Pixtral vision encoder included
                  "Mistral-Small-3.1-24B-Instruct-2503": 24e9,
                  "Mixtral-8x22B-v0.1": 141e9}    # Mistral, 'Cheaper, Better, Faster, Stronger': '141B'
# active counts of the MoE fixtures without a preset, where the owner publishes one
PUBLISHED_ACTIVE = {"Mixtral-8x22B-v0.1": 39e9,      # '39B active parameters out of 141B'
                    "Mistral-Small-3.1-24B-Instruct-2503": 23_572_403_200}   # dense: the text model, no tower
SHAPE = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "ffn_act", "vocab", "tie_embeddings",
         "attention", "qk_norm", "attention_pattern", "attention_window", "global_every", "attention_sinks",
         "sandwich_norm", "moe_experts", "moe_top_k", "moe_shared_experts", "moe_expert_ffn_hidden",
         "moe_first_dense_layers", "moe_every", "mtp_layers", "q_lora_rank", "kv_lora_rank", "activation_clamp",
         "moe_expert_bias", "moe_pattern")


def _cfg(name: str) -> dict:
    return json.loads((HERE / name / "config.json").read_text())


def test_one_fixture_per_family_and_a_readme_naming_each() -> None:
    families = set()
    for name in CONFIGS:
        cfg = _cfg(name)
        mt = cfg["model_type"]
        families.add(WRAPPERS.get(mt) or MODEL_TYPES[mt])
    assert families == {"llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "gpt_oss", "gemma3_text",
                        "llama4_text", "deepseek_v2", "deepseek_v3", "glm4_moe"}
    readme = (HERE / "README.md").read_text()
    assert all(name in readme for name in CONFIGS)


def test_every_fixture_is_checked_against_a_preset_or_a_published_count() -> None:
    assert set(CONFIGS) == set(PRESET_OF) | set(PUBLISHED_ONLY) and not set(PRESET_OF) & set(PUBLISHED_ONLY)


@pytest.mark.parametrize("name", sorted(PUBLISHED_ONLY))
def test_configs_without_a_preset_read_at_the_published_count(name: str) -> None:
    """google/gemma-3-4b-pt and -12b-pt leave head_dim, vocab_size (and the 4B the head counts) to
    Gemma3TextConfig's defaults: without them the 4B was refused and the count would be wrong."""
    model = model_from_fields(name, {**read_hf_config(str(HERE / name / "config.json")), "seq_len": 4096})
    if name.startswith("gemma"):
        assert model.head_dim == 256 and model.vocab in (262144, 262208)
    assert abs(model.total_params() / PUBLISHED_ONLY[name] - 1) <= 0.01, model.total_params() / 1e9
    if name in PUBLISHED_ACTIVE:
        assert abs(model.active_params() / PUBLISHED_ACTIVE[name] - 1) <= 0.01, model.active_params() / 1e9


def test_mistral3_reads_its_text_config_and_counts_the_pixtral_tower() -> None:
    """mistralai/Mistral-Small-3.1-24B-Instruct-2503 (model_type mistral3, transformers'
    Mistral3ForConditionalGeneration) was refused as an unknown model_type. Its language model is
    the text_config (a Mistral with head_dim 128 != 5120 / 32); Mistral's '24B' counts the Pixtral
    tower and projector, 438,958,080 parameters (the count a public copy of the file gives too)."""
    fields = read_hf_config(str(HERE / "Mistral-Small-3.1-24B-Instruct-2503" / "config.json"))
    assert (fields["layers"], fields["hidden"], fields["heads"], fields["kv_heads"], fields["head_dim"]) == \
        (40, 5120, 32, 8, 128)
    assert "attention_pattern" not in fields and not fields.get("tie_embeddings")   # sliding_window null; untied
    assert fields["vision_params"] == 438_958_080
    model = model_from_fields("m3", {**fields, "seq_len": 4096})
    assert model.total_params() == 23_572_403_200 + 438_958_080


@pytest.mark.parametrize("name", sorted(PRESET_OF))
def test_config_reads_as_the_family_preset(name: str) -> None:
    fields = read_hf_config(str(HERE / name / "config.json"))
    assert "seq_len" not in fields                  # never max_position_embeddings
    model = model_from_fields(name, {**fields, "seq_len": 4096})
    preset = model_from_fields(PRESET_OF[name], {**MODEL_PRESETS[PRESET_OF[name]], "seq_len": 4096})
    assert {f: getattr(model, f) for f in SHAPE} == {f: getattr(preset, f) for f in SHAPE}
    assert model.total_params() == preset.total_params()
    assert model.active_params() == preset.active_params()


@pytest.mark.parametrize("name", CONFIGS)
def test_every_key_is_classified(name: str) -> None:
    cfg = _cfg(name)
    family = MODEL_TYPES.get(cfg["model_type"])
    if family is None:   # multimodal: the language model is the text_config
        family, cfg = WRAPPERS[cfg["model_type"]], cfg["text_config"]
    table = key_table(family)
    assert set(cfg) <= set(table), sorted(set(cfg) - set(table))
    assert all(kind in ("modelled", "irrelevant", "refused") and why for kind, why in table.values())


def _refused(tmp_path: Path, name: str, change, field_end: str) -> InputError:
    cfg = copy.deepcopy(_cfg(name))
    change(cfg)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(InputError) as exc:
        read_hf_config(str(path))
    assert exc.value.field.startswith("model.hf_config") and exc.value.field.endswith(field_end), exc.value
    return exc.value


@pytest.mark.parametrize("name,change,field", [
    ("Qwen3-8B", lambda c: c.update(use_sliding_window=True), "use_sliding_window"),
    # per-layer MoE layouts are read (tests/workload/test_moe_layer_pattern.py); what stays refused:
    ("Qwen3-30B-A3B", lambda c: c.update(mlp_only_layers=list(range(48))), "mlp_only_layers"),   # no MoE layer
    ("Qwen3-30B-A3B", lambda c: c.update(mlp_only_layers=[48]), "mlp_only_layers"),              # no such layer
    ("Qwen3-8B", lambda c: c.update(attention_dropout=1.5), "attention_dropout"),
    ("Qwen3-8B", lambda c: c.update(hidden_dropout="0.1"), "hidden_dropout"),
    ("gemma-3-27b-pt", lambda c: c["text_config"].update(attn_logit_softcapping=50.0), "attn_logit_softcapping"),
    ("gemma-3-27b-pt", lambda c: c["text_config"].update(final_logit_softcapping=30.0), "final_logit_softcapping"),
    ("DeepSeek-V3", lambda c: c.update(moe_layer_freq=0), "moe_layer_freq"),
    ("gpt-oss-120b", lambda c: c.update(layer_types=["sliding_attention"] * 3 + ["full_attention"] * 33),
     "layer_types"),
    ("gpt-oss-120b", lambda c: c.update(experts_per_token=2), "experts_per_token"),
    # local layers with no window: named the scenario's global_every, a field the user never wrote
    ("gpt-oss-120b", lambda c: c.update(sliding_window=0), "sliding_window"),
    ("gemma-3-27b-pt", lambda c: c["text_config"].update(sliding_window=None), "sliding_window"),
    ("Llama-4-Maverick-17B-128E", lambda c: c["text_config"].update(moe_layers=[0, 5, 99]), "moe_layers"),
    ("Llama-4-Scout-17B-16E", lambda c: c["text_config"].update(no_rope_layers=[1, 1, 0] + [1] * 45), "no_rope_layers"),
    ("Llama-3.1-8B", lambda c: c.update(hidden_act="relu"), "hidden_act"),
    ("Llama-3.1-8B", lambda c: c.update(some_new_attention_trick=True), "some_new_attention_trick"),
    ("Llama-3.1-8B", lambda c: c.update(model_type="falcon"), "model_type"),
    ("gemma-3-27b-pt", lambda c: c.update(audio_config={}), "audio_config"),
    ("Qwen3-Coder-480B-A35B-Instruct", lambda c: c.update(shared_expert_intermediate_size=2048),
     "shared_expert_intermediate_size"),
    ("Qwen3-Coder-480B-A35B-Instruct", lambda c: c.update(use_qk_norm=False), "use_qk_norm"),
    # types: a JSON file says what it means ("32", 32.0 or true for a count were a traceback or a 1)
    ("Llama-3.1-8B", lambda c: c.update(num_hidden_layers="32"), "num_hidden_layers"),
    ("Llama-3.1-8B", lambda c: c.update(num_hidden_layers=32.0), "num_hidden_layers"),
    ("Llama-3.1-8B", lambda c: c.update(num_hidden_layers=True), "num_hidden_layers"),
    ("Llama-3.1-8B", lambda c: c.update(tie_word_embeddings="false"), "tie_word_embeddings"),
    ("Qwen3-30B-A3B", lambda c: c.update(num_experts=-128), "num_experts"),
    # a list or an object where a name belongs, a step of null or 0: were tracebacks (exit 1)
    ("Qwen3-8B", lambda c: c.update(model_type=["qwen3"]), "model_type"),
    ("Qwen3-8B", lambda c: c.update(hidden_act=["silu"]), "hidden_act"),
    ("gemma-3-27b-pt", lambda c: c["text_config"].update(hidden_activation={"name": "gelu"}), "hidden_activation"),
    ("Llama-4-Scout-17B-16E", lambda c: c["text_config"].update(interleave_moe_layer_step=None),
     "interleave_moe_layer_step"),
    ("Llama-4-Scout-17B-16E", lambda c: c["text_config"].update(interleave_moe_layer_step=0),
     "interleave_moe_layer_step"),
    ("Mistral-Small-3.1-24B-Instruct-2503", lambda c: c["vision_config"].update(hidden_size="1024"),
     "vision_config.hidden_size"),
    ("Mistral-Small-3.1-24B-Instruct-2503", lambda c: c.update(spatial_merge_size=0), "spatial_merge_size"),
    ("Mistral-Small-3.1-24B-Instruct-2503", lambda c: c["text_config"].update(model_type="llama"),
     "text_config.model_type"),
    ("Mistral-Small-3.1-24B-Instruct-2503", lambda c: c.update(audio_config={}), "audio_config"),
])
def test_keys_that_change_cost_unmodelled_are_refused_by_name(tmp_path: Path, name, change, field) -> None:
    _refused(tmp_path, name, change, field)


def test_a_nonzero_dropout_rate_is_modelled_as_dropout_masks(tmp_path: Path) -> None:
    """attention_dropout > 0 is read as dropout (masks written in the forward and kept for the
    backward, clustersim.compute.conventions): more activation memory and a slower step than the
    same config with 0, which keeps the family's convention (no dropout for these families)."""
    from clustersim.api import estimate
    from clustersim.scenario import scenario_from_dict

    cfg = copy.deepcopy(_cfg("Qwen3-8B"))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert "dropout" not in read_hf_config(str(path))
    cfg["attention_dropout"] = 0.1
    drop = tmp_path / "dropout.json"
    drop.write_text(json.dumps(cfg))
    assert read_hf_config(str(drop))["dropout"] is True

    def run(p: Path):
        return estimate(scenario_from_dict({"model": {"hf_config": str(p), "seq_len": 4096},
                                            "cluster": {"preset": "dgx-h100", "nodes": 1},
                                            "parallel": {"tp": 8, "micro_batch": 1, "global_batch": 8}}))

    plain, masked = run(path), run(drop)
    assert masked.step_time_s > plain.step_time_s
    assert masked.memory.peak_bytes_per_gpu > plain.memory.peak_bytes_per_gpu


def test_a_file_saved_by_save_pretrained_or_transformers_v5_reads_the_same(tmp_path: Path) -> None:
    """A fine-tune's own config.json carries _name_or_path; transformers v5 writes rope_parameters
    in place of rope_theta / rope_scaling. Neither changes the cost, and neither is refused."""
    cfg = _cfg("Llama-3.1-8B")
    rope = {"rope_theta": cfg.pop("rope_theta"), **cfg.pop("rope_scaling")}
    saved = {**cfg, "_name_or_path": "meta-llama/Llama-3.1-8B", "rope_parameters": rope}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(saved))
    assert read_hf_config(str(path)) == read_hf_config(str(HERE / "Llama-3.1-8B" / "config.json"))


def test_multimodal_gemma3_reads_its_text_config_with_the_class_defaults() -> None:
    fields = read_hf_config(str(HERE / "gemma-3-27b-pt" / "config.json"))
    assert fields["vocab"] == 262208 and fields["tie_embeddings"] is True      # Gemma3TextConfig defaults
    assert (fields["ffn_act"], fields["global_every"], fields["attention_window"]) == ("geglu", 6, 1024)


def test_gemma3_pattern_as_transformers_saves_it(tmp_path: Path) -> None:
    """transformers >= 4.53 saves Gemma 3's sliding_window_pattern as _sliding_window_pattern
    (google/gemma-3-270m's file): it was refused as an unknown key. Without layer_types it sets
    the pattern as sliding_window_pattern does."""
    cfg = _cfg("gemma-3-270m")
    assert cfg["_sliding_window_pattern"] == 6
    fields = read_hf_config(str(HERE / "gemma-3-270m" / "config.json"))
    assert (fields["global_every"], fields["attention_window"], fields["head_dim"]) == (6, 512, 256)
    cfg.pop("layer_types")
    cfg["_sliding_window_pattern"] = 3
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert read_hf_config(str(path))["global_every"] == 3


def test_llama4_chunked_attention_on_the_rope_layers_only() -> None:
    model = model_from_fields("scout", {**read_hf_config(str(HERE / "Llama-4-Scout-17B-16E" / "config.json")),
                                        "seq_len": 16384})
    assert [model.is_local_layer(i) for i in range(8)] == [True, True, True, False] * 2
    maverick = model_from_fields("m", {**read_hf_config(str(HERE / "Llama-4-Maverick-17B-128E" / "config.json")),
                                       "seq_len": 4096})
    assert maverick.num_moe_layers == 24 and [maverick.is_moe_layer(i) for i in range(4)] == [False, True] * 2


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clustersim", *args], capture_output=True, text=True, timeout=300)


def test_run_json_and_report_show_what_was_read(tmp_path: Path) -> None:
    cfg = str(HERE / "Qwen3-30B-A3B" / "config.json")
    common = ["--set", "model.preset=null", "--set", f"model.hf_config={cfg}", "--set", "cluster.nodes=2",
              "--set", "parallel.tp=1", "--set", "parallel.pp=1", "--set", "parallel.dp=16", "--set", "parallel.ep=8",
              "--set", "parallel.sequence_parallel=false", "--set", "parallel.global_batch=64"]
    out = _cli("run", "--json", *common)
    assert out.returncode in (0, 3), out.stderr
    model = json.loads(out.stdout)["model"]
    h, layers, expert = 2048, 48, 3 * 2048 * 768            # 48 layers, hidden 2048, SwiGLU experts of 768
    attention = h * (32 * 128 + 2 * 4 * 128) + 32 * 128 * h + 2 * 128   # Q, K, V, O and the per-head Q/K norms
    rest = h * 128 + 2 * h                                   # router, the two RMSNorms (a weight each)
    ends = 2 * 151936 * h + h                                # embedding, output layer, final norm
    # the checkpoint's own count (Hugging Face model API safetensors.total of Qwen/Qwen3-30B-A3B)
    assert model["params"] == layers * (attention + 128 * expert + rest) + ends == 30_532_122_624
    assert model["active_params"] == layers * (attention + 8 * expert + rest) + ends == 3_353_032_704
    assert model["mtp_params"] == 0
    assert (model["head_dim"], model["seq_len"], model["qk_norm"]) == (128, 4096, True)
    assert any("seq_len defaulted to 4096" in n for n in model["notes"])
    text = _cli("run", *common).stdout
    assert "seq_len defaulted to 4096" in text and "active per token 3.35B" in text and "heads 32/4 x 128" in text
    stated = _cli("run", "--json", *common, "--set", "model.seq_len=2048")
    assert json.loads(stated.stdout)["model"]["seq_len"] == 2048


@pytest.mark.parametrize(("name", "section", "key", "pattern", "window"), [
    ("Mistral-7B-v0.1", None, "sliding_window", "sliding", 4096),            # MistralConfig(sliding_window=4096)
    ("Llama-4-Scout-17B-16E", "text_config", "attention_chunk_size", "chunked", 8192),   # Llama4TextConfig
])
def test_a_left_out_window_takes_the_config_class_default(tmp_path: Path, name, section, key, pattern, window) -> None:
    """transformers fills a key the file leaves out from the config class; the reader took full
    attention instead (and an explicit null still means no window)."""
    cfg = json.loads((HERE / name / "config.json").read_text())
    inner = cfg[section] if section else cfg
    inner.pop(key, None)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    fields = read_hf_config(str(path))
    assert (fields["attention_pattern"], fields["attention_window"]) == (pattern, window)
