"""Any per-layer MoE layout, in both conventions: which layers are MoE is one function
(``ModelSpec.is_moe_layer``), the scenario states any layout (``model.moe.pattern`` beside the
first_dense_layers / every rule), and the importers map each framework's own rule exactly:

* DeepSeek (deepseek-ai/DeepSeek-V3 modeling_deepseek.py, DeepseekV3DecoderLayer): MoE when
  ``i >= first_k_dense_replace and i % moe_layer_freq == 0`` (counted from layer 0);
* Qwen2/3-MoE (transformers models/qwen3_moe/modeling_qwen3_moe.py, Qwen3MoeDecoderLayer): MoE when
  ``i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0`` (counted from 1);
* Llama 4 (transformers Llama4TextConfig / Llama4TextDecoderLayer): MoE when ``i in moe_layers``,
  which defaults to ``range(step - 1, layers, step)`` for ``interleave_moe_layer_step``;
* GLM-4 MoE (Glm4MoeDecoderLayer): MoE when ``i >= first_k_dense_replace``;
* Megatron-LM --moe-layer-freq (megatron/core/transformer/moe/moe_utils.py get_moe_layer_pattern):
  an int N is MoE on ``i % N == 0``; a list is the pattern.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustersim.errors import InputError
from clustersim.importers import finish, import_text
from clustersim.plan.stage_work import build_step_work
from clustersim.scenario import load_scenario
from clustersim.sweep.profiles import schedule_profile
from clustersim.workload.hf_config import read_hf_config
from clustersim.workload.model_fields import model_from_fields
from clustersim.workload.model_spec import moe_layer_fields
from clustersim.workload.presets import MODEL_PRESETS

FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "hf_configs"


def _hf(tmp_path: Path, name: str, change) -> dict:
    cfg = json.loads((FIXTURES / name / "config.json").read_text())
    change(cfg)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return read_hf_config(str(path))


def _model(fields: dict, name: str = "m"):
    return model_from_fields(name, {"seq_len": 4096, **fields})


def _flags(model) -> list[bool]:
    return [model.is_moe_layer(i) for i in range(model.layers)]


def test_the_rule_is_kept_where_it_states_the_pattern_and_the_pattern_is_stored_otherwise() -> None:
    assert moe_layer_fields([1] * 6) == {}
    assert moe_layer_fields([0, 0, 0, 1, 1, 1]) == {"first_dense_layers": 3}
    assert moe_layer_fields([0, 1] * 3) == {"every": 2}
    assert moe_layer_fields([0, 0, 0, 1, 0, 1]) == {"first_dense_layers": 3, "every": 2}
    assert moe_layer_fields([0, 0, 1, 0]) == {"every": 3}          # one MoE layer, none after it
    assert moe_layer_fields([1, 0] * 3) == {"pattern": [1, 0] * 3}  # DeepSeek / Megatron's i % 2 == 0
    assert moe_layer_fields([0] * 4) is None


def test_a_pattern_the_rule_states_is_the_same_model_as_the_rule() -> None:
    rule = load_scenario(None, ["model.preset=deepseek-v3"]).model
    stated = load_scenario(None, ["model.preset=deepseek-v3", f"model.moe.pattern={[0] * 3 + [1] * 58}"]).model
    assert stated == rule and stated.moe_pattern == ()


@pytest.mark.parametrize("preset, layers", [("deepseek-v3", 61), ("llama4-maverick", 48)])
def test_a_pattern_replaces_the_presets_rule(preset: str, layers: int) -> None:
    """deepseek-v3 (first_dense_layers 3) and llama4-maverick (every 2) with an explicit pattern were
    refused over the preset's value ("model.moe.first_dense_layers: got 3"), which the user never
    wrote: the pattern states every layer and replaces the preset's rule (docs/scenario.md); a rule
    written beside it is still checked."""
    pattern = [0, 0, 0] + [1, 0] * ((layers - 3) // 2) + [1] * ((layers - 3) % 2)
    model = load_scenario(None, [f"model.preset={preset}", f"model.moe.pattern={pattern}"]).model
    assert _flags(model) == [bool(x) for x in pattern]
    with pytest.raises(InputError) as exc:
        load_scenario(None, [f"model.preset={preset}", f"model.moe.pattern={pattern}", "model.moe.every=3"])
    assert exc.value.field == "model.moe.every" and exc.value.value == 3


def test_a_pattern_changes_the_counts_as_its_layers_say() -> None:
    """Mixtral with MoE on the even layers only (Megatron's --moe-layer-freq 2): 16 MoE and 16 dense
    layers (width ffn_hidden), counted layer by layer."""
    base = load_scenario(None, ["model.preset=mixtral-8x7b"]).model
    half = load_scenario(None, ["model.preset=mixtral-8x7b", f"model.moe.pattern={[1, 0] * 16}"]).model
    assert half.moe_pattern == (1, 0) * 16 and half.num_moe_layers == 16
    assert _flags(half) == [True, False] * 16
    assert half.main_params() == base.main_params() - 16 * (base.layer_params(True) - base.layer_params(False))
    dense_active = base.layer_params(False)
    assert half.active_params() == base.active_params() - 16 * (base.active_params() - base.end_params()) // 32 \
        + 16 * dense_active


@pytest.mark.parametrize("sets, field", [
    ([f"model.moe.pattern={[1, 0] * 15}"], "model.moe.pattern"),                 # 30 entries, 32 layers
    ([f"model.moe.pattern={[0] * 32}"], "model.moe.pattern"),                    # no MoE layer
    ([f"model.moe.pattern={[1, 0] * 16}", "model.moe.every=2"], "model.moe.every"),   # two different layouts
    ([f"model.moe.pattern={[1, 0] * 16}", "model.moe.first_dense_layers=1"], "model.moe.first_dense_layers"),
    ([f"model.moe.pattern={[1, 2] * 16}"], "model.moe.pattern"),                 # 0 or 1 only
])
def test_bad_patterns_are_refused_by_name(sets, field) -> None:
    with pytest.raises(InputError) as exc:
        load_scenario(None, ["model.preset=mixtral-8x7b", *sets])
    assert exc.value.field.startswith(field)   # a bad entry is named by its index (model.moe.pattern.1)


def test_a_dense_model_takes_no_pattern() -> None:
    with pytest.raises(InputError) as exc:
        load_scenario(None, ["model.preset=llama3-8b", f"model.moe.pattern={[1] * 32}"])
    assert exc.value.field == "model.moe.pattern"


def test_deepseek_moe_layer_freq_counts_from_layer_zero(tmp_path: Path) -> None:
    """DeepSeek-V3's file with moe_layer_freq 2: MoE on layers 4, 6, ..., 60 (i >= 3, i % 2 == 0),
    not the Llama-4 convention's 3, 5, ... (the key was refused before)."""
    fields = _hf(tmp_path, "DeepSeek-V3", lambda c: c.update(moe_layer_freq=2))
    model = _model(fields)
    assert _flags(model) == [i >= 3 and i % 2 == 0 for i in range(61)]
    assert model.num_moe_layers == 29
    # the file as published (moe_layer_freq 1): the rule, 58 MoE layers, 671B / 37B (arXiv 2412.19437)
    real = _model(read_hf_config(str(FIXTURES / "DeepSeek-V3" / "config.json")))
    assert real.moe_pattern == () and real.num_moe_layers == 58
    assert abs(real.main_params() / 671e9 - 1) < 0.01
    assert round(real.active_params_without_embedding() / 1e9) == 37   # "37B activated": 36.6B


def test_deepseek_moe_layer_freq_3_past_one_dense_layer(tmp_path: Path) -> None:
    fields = _hf(tmp_path, "DeepSeek-V3", lambda c: c.update(moe_layer_freq=3, first_k_dense_replace=1))
    assert _flags(_model(fields)) == [i >= 1 and i % 3 == 0 for i in range(61)]


def test_qwen_moe_mlp_only_layers_and_decoder_sparse_step(tmp_path: Path) -> None:
    """Qwen3-30B-A3B with its first two layers dense (mlp_only_layers) and every second layer MoE:
    the dense layers take intermediate_size (6144), the counts follow layer by layer."""
    fields = _hf(tmp_path, "Qwen3-30B-A3B", lambda c: c.update(mlp_only_layers=[0, 1], decoder_sparse_step=2))
    model = _model(fields)
    assert _flags(model) == [i > 1 and (i + 1) % 2 == 0 for i in range(48)]
    assert model.num_moe_layers == 23 and model.ffn_hidden == 6144
    only = _model(_hf(tmp_path, "Qwen3-30B-A3B", lambda c: c.update(mlp_only_layers=[5])))
    assert _flags(only) == [i != 5 for i in range(48)] and only.moe_pattern
    # as published (decoder_sparse_step 1, mlp_only_layers []): every layer, 30.5B / 3.3B (model card)
    real = _model(read_hf_config(str(FIXTURES / "Qwen3-30B-A3B" / "config.json")))
    assert real.moe_pattern == () and real.num_moe_layers == 48
    assert abs(real.main_params() / 30.5e9 - 1) < 0.01 and 3.3e9 <= real.active_params() < 3.4e9


def test_llama4_moe_layers_list_is_read_as_written(tmp_path: Path) -> None:
    fields = _hf(tmp_path, "Llama-4-Maverick-17B-128E", lambda c: c["text_config"].update(moe_layers=[0, 5, 9]))
    model = _model(fields)
    assert [i for i in range(48) if model.is_moe_layer(i)] == [0, 5, 9]
    # as published: moe_layers = 1, 3, ..., 47 (interleave_moe_layer_step 2): 400B / 17B (Meta's model card)
    real = _model(read_hf_config(str(FIXTURES / "Llama-4-Maverick-17B-128E" / "config.json")))
    assert real.moe_every == 2 and real.moe_pattern == () and real.num_moe_layers == 24
    assert abs(real.main_params() / 400e9 - 1) < 0.01 and 17e9 <= real.active_params() < 18e9


def test_glm45_first_k_dense_replace(tmp_path: Path) -> None:
    real = _model(read_hf_config(str(FIXTURES / "GLM-4.5" / "config.json")))
    assert _flags(real) == [i >= 3 for i in range(92)]


def _megatron(freq: str, layers: int = 8) -> dict:
    text = (f"python pretrain_gpt.py --num-layers {layers} --hidden-size 512 --num-attention-heads 8 "
            "--seq-length 1024 --vocab-size 32000 --tokenizer-type NullTokenizer --num-experts 8 "
            f"--moe-layer-freq {freq} --moe-token-dispatcher-type alltoall")
    return finish(import_text("megatron-args", text, "train.sh", cluster="dgx-h100", nodes=1), []).scenario


@pytest.mark.parametrize("freq, moe_at", [
    ("2", [0, 2, 4, 6]),                        # int N: i % N == 0 (get_moe_layer_pattern)
    ("3", [0, 3, 6]),
    ("1", list(range(8))),
    ("'[0]*2+[1,0,1]*2'", [2, 4, 5, 7]),        # a list: as written
    ("'[1,1,0,0]*2'", [0, 1, 4, 5]),
])
def test_megatron_moe_layer_freq_int_and_list_forms_are_exact(freq, moe_at) -> None:
    sc = _megatron(freq)
    model = load_scenario(None, [f"model={json.dumps(sc['model'])}"]).model
    assert [i for i in range(8) if model.is_moe_layer(i)] == moe_at


def test_every_consumer_asks_the_one_function() -> None:
    """Per-stage MoE layers in a pipeline (the plan's stages, hence memory) and the sweep's profiles
    follow ``is_moe_layer`` for an explicit pattern."""
    pattern = [1, 1, 0, 0, 0, 1, 0, 1] * 4
    sc = load_scenario(None, ["model.preset=mixtral-8x7b", f"model.moe.pattern={pattern}", "cluster.nodes=1",
                              "parallel.tp=1", "parallel.pp=4", "parallel.dp=2", "parallel.ep=2",
                              "parallel.sequence_parallel=false", "parallel.global_batch=16"])
    model = sc.model
    work = build_step_work(sc)
    start = 0
    for st in work.stages:
        assert st.moe_layers == sum(pattern[start:start + st.num_layers])
        start += st.num_layers
    prof = schedule_profile("1f1b", 4, 8, 1, model.layers, model.moe_layer_flags(), model.mtp_layers)
    assert prof.moe_held == tuple(sum(pattern[8 * r:8 * r + 8]) for r in range(4)) == (4, 4, 4, 4)
    skew = [1] * 8 + [0] * 8 + [1] * 16
    prof = schedule_profile("1f1b", 4, 8, 1, 32, tuple(bool(x) for x in skew), 0)
    assert prof.moe_held == (8, 0, 8, 8)


def test_run_json_shows_the_pattern_only_where_one_is_stored() -> None:
    from clustersim.workload.model_summary import model_json
    half = load_scenario(None, ["model.preset=mixtral-8x7b", f"model.moe.pattern={[1, 0] * 16}"]).model
    assert model_json(half)["moe"]["pattern"] == [1, 0] * 16
    assert "pattern" not in model_json(model_from_fields("d", MODEL_PRESETS["deepseek-v3"]))["moe"]


@pytest.mark.parametrize("sets", [["model.moe.pattern=" + str([0, 0, 0, 0] + [1, 0] * 28 + [1])], []])
def test_the_reports_moe_block_reads_back_as_the_same_model(sets) -> None:
    """`run --json`'s model.moe (workload.model_summary.model_json) is a scenario's model.moe: with a
    pattern it gave first_dense_layers beside it, which a scenario refused next to the pattern; the
    block now gives the pattern or the rule, and reading it back gives the same model."""
    from clustersim.workload.model_summary import model_json

    model = load_scenario(None, ["model.preset=deepseek-v3", *sets]).model
    moe = model_json(model)["moe"]
    assert ("pattern" in moe) == bool(sets) and ("first_dense_layers" in moe) != bool(sets)
    stated = {k: moe[k] for k in ("pattern", "first_dense_layers", "every") if k in moe}
    again = load_scenario(None, ["model.preset=deepseek-v3", *(f"model.moe.{k}={v}" for k, v in stated.items())]).model
    assert _flags(again) == _flags(model) and again.total_params() == model.total_params()
