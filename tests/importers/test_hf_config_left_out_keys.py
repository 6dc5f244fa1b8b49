"""What the HF config reader does with a key left out or out of range: a config class's default
with a note (where the class default is certain), else exit 2 naming the key of the file that the
user must fix (docs/compute.md, "Hugging Face configs"). The windows of every family follow one
rule; a query_width beside a file checks the file's heads, it never changes them."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from clustersim.errors import InputError
from clustersim.scenario import scenario_from_dict

HERE = Path(__file__).resolve().parent / "hf_configs"
BASE = {"cluster": {"preset": "dgx-h100", "nodes": 1}, "parallel": {"tp": 8, "global_batch": 8}}


def _edited(tmp_path: Path, name: str, **edits) -> Path:
    """The fixture ``name`` with ``edits`` on its language model (``"DEL"`` removes the key)."""
    cfg = copy.deepcopy(json.loads((HERE / name / "config.json").read_text()))
    inner = cfg.get("text_config", cfg)
    for key, value in edits.items():
        if value == "DEL":
            inner.pop(key)
        else:
            inner[key] = value
    path = tmp_path / name / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cfg))
    return path


def _run_json(*sets: str) -> subprocess.CompletedProcess:
    args = ["run", "--json"]
    for s in ("model.preset=null", "cluster.nodes=1", "parallel.tp=8", "parallel.pp=1", "parallel.dp=1",
              "parallel.ep=1", "parallel.global_batch=8", *sets):
        args += ["--set", s]
    return subprocess.run([sys.executable, "-m", "clustersim", *args], capture_output=True, text=True, timeout=300)


def _model(path: Path, **model) -> object:
    return scenario_from_dict({**BASE, "model": {"hf_config": str(path), "seq_len": 4096, **model}}).model


def _refused(path: Path, key: str, **model) -> InputError:
    with pytest.raises(InputError) as exc:
        _model(path, **model)
    assert exc.value.field == f"model.hf_config ({path}): {key}", exc.value
    return exc.value


# -- MLP widths --------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "key", "cls", "width"), [
    ("gpt-oss-20b", "intermediate_size", "GptOssConfig", 2880),
    ("Llama-3.1-8B", "intermediate_size", "LlamaConfig", 11008),
    ("Qwen3-30B-A3B", "moe_intermediate_size", "Qwen3MoeConfig", 768),
])
def test_a_left_out_mlp_width_takes_the_class_default_and_says_so(tmp_path: Path, name, key, cls, width) -> None:
    """A width left out was 4 x hidden (the experts' too): gpt-oss-20b ran as a 78.2B model."""
    out = _run_json(f"model.hf_config={_edited(tmp_path, name, **{key: 'DEL'})}", "model.seq_len=4096")
    assert out.returncode in (0, 3), out.stderr
    model = json.loads(out.stdout)["model"]
    got = model["moe"]["expert_ffn_hidden"] if key == "moe_intermediate_size" or name == "gpt-oss-20b" \
        else model["ffn_hidden"]
    assert got == width
    assert f"{cls}'s defaults for keys the file leaves out: {key} {width}" in model["notes"]
    if name != "Llama-3.1-8B":   # the fixture states the class default: the same model
        whole = _model(HERE / name / "config.json")
        assert model["params"] == whole.main_params()


@pytest.mark.parametrize(("name", "key"), [
    ("DeepSeek-V3", "moe_intermediate_size"),    # DeepSeek's class says 1407, transformers' 2048
    ("Kimi-K2-Base", "moe_intermediate_size"),
    ("DeepSeek-V3", "intermediate_size"),
    ("Mistral-7B-v0.1", "intermediate_size"),
    ("Mixtral-8x7B-v0.1", "intermediate_size"),  # also the experts' width
    ("GLM-4.5-Air", "moe_intermediate_size"),
])
def test_a_left_out_mlp_width_without_a_certain_default_exits_2_naming_it(tmp_path: Path, name, key) -> None:
    path = _edited(tmp_path, name, **{key: "DEL"})
    out = _run_json(f"model.hf_config={path}", "model.seq_len=4096")
    assert out.returncode == 2, out.stdout[-300:]
    assert f"model.hf_config ({path}): {key}: got None" in out.stderr


# -- windows: one rule ---------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "key", "value"), [
    ("Mistral-7B-v0.1", "sliding_window", 0),          # was full attention
    ("Mixtral-8x7B-v0.1", "sliding_window", 0),
    ("Mistral-7B-v0.1", "sliding_window", -4096),
    ("Llama-4-Scout-17B-16E", "attention_chunk_size", 0),   # was full attention
    ("gpt-oss-20b", "sliding_window", 0),
    ("gemma-3-27b-pt", "sliding_window", 0),
    ("gemma-3-1b-pt", "sliding_window_pattern", 0),    # was every layer local
    ("gemma-3-1b-pt", "sliding_window_pattern", 1),    # was model.global_every: got 1
    ("gemma-3-27b-pt", "sliding_window_pattern", 100),  # past the 62 layers: was model.global_every
])
def test_a_window_or_pattern_out_of_range_exits_2_naming_the_key(tmp_path: Path, name, key, value) -> None:
    err = _refused(_edited(tmp_path, name, **{key: value}), key)
    assert err.value == value


@pytest.mark.parametrize(("name", "key"), [("Mistral-7B-v0.1", "sliding_window"),
                                           ("Llama-4-Scout-17B-16E", "attention_chunk_size")])
def test_a_null_window_is_still_no_window(tmp_path: Path, name, key) -> None:
    model = _model(_edited(tmp_path, name, **{key: None}))
    assert not model.has_local_attention


# -- MoE and MLA keys named as the file names them ----------------------------------------------

@pytest.mark.parametrize(("name", "key", "value"), [
    ("Qwen3-30B-A3B", "num_experts", "DEL"),          # was moe.experts: got None
    ("gpt-oss-20b", "num_local_experts", "DEL"),
    ("DeepSeek-V3", "n_routed_experts", "DEL"),
    ("DeepSeek-V3", "num_experts_per_tok", "DEL"),
    ("DeepSeek-V3", "num_experts_per_tok", 300),       # more than the 256 experts
    ("Mixtral-8x7B-v0.1", "num_experts_per_tok", "DEL"),
    ("DeepSeek-V3", "kv_lora_rank", "DEL"),           # was model.kv_lora_rank: got 0
    ("DeepSeek-V3", "qk_rope_head_dim", 0),
    ("Qwen3-30B-A3B", "moe_intermediate_size", 0),
])
def test_a_moe_or_mla_key_missing_or_out_of_range_is_named(tmp_path: Path, name, key, value) -> None:
    _refused(_edited(tmp_path, name, **{key: value}), key)


# -- query_width beside a file ---------------------------------------------------------------------

def test_query_width_beside_a_file_checks_its_heads() -> None:
    """Llama-3.1-8B states no head_dim: the file fixes it at hidden / heads = 128. A query_width of
    8192 made it 256 (and 4000 made it 125) instead of being refused as the check it is."""
    path = HERE / "Llama-3.1-8B"
    for width in (8192, 4000):
        with pytest.raises(InputError) as exc:
            _model(path, query_width=width)
        assert exc.value.field == "model.query_width" and "32 x 128 = 4096" in str(exc.value)
    assert _model(path, query_width=4096).head_dim == 128


def test_query_width_still_gives_the_head_width_of_plain_fields() -> None:
    """docs/scenario.md: without an hf_config or a head_dim, query_width sets head_dim."""
    model = scenario_from_dict({**BASE, "model": {"layers": 2, "hidden": 4096, "heads": 32, "vocab": 32000,
                                                  "seq_len": 4096, "query_width": 8192}}).model
    assert model.head_dim == 256


# -- DeepSeek's routers and the activations: one table each ---------------------------------------

@pytest.mark.parametrize("name", ["DeepSeek-V2", "DeepSeek-V3", "Kimi-K2-Base"])
def test_an_unknown_topk_method_exits_2_for_every_deepseek(tmp_path: Path, name) -> None:
    err = _refused(_edited(tmp_path, name, topk_method="foo"), "topk_method")
    assert ("noaux_tc" in str(err)) == (name != "DeepSeek-V2")


def test_the_hidden_act_error_lists_every_accepted_activation(tmp_path: Path) -> None:
    err = _refused(_edited(tmp_path, "Llama-3.1-8B", hidden_act="relu"), "hidden_act")
    for act in ("silu", "swish", "swiglu", "gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        assert act in str(err), act
    for act in ("swish", "gelu_new", "gelu_fast"):   # and each of them reads
        assert _model(_edited(tmp_path, "Llama-3.1-8B", hidden_act=act)).ffn_act in ("swiglu", "geglu")


# -- run --json's model.moe of a dense model -------------------------------------------------------

def test_a_dense_model_shows_a_zero_moe_block() -> None:
    """docs/output.md: model.moe is zeros for a dense model. Qwen3-30B-A3B with moe.experts 0 showed
    top_k 8 (and its first_dense_layers / shared experts would have shown too)."""
    out = _run_json(f"model.hf_config={HERE / 'Qwen3-30B-A3B'}", "model.moe.experts=0", "model.seq_len=4096")
    assert out.returncode in (0, 3), out.stderr
    assert json.loads(out.stdout)["model"]["moe"] == {"experts": 0, "top_k": 0, "shared_experts": 0,
                                                      "shared_ffn_hidden": 0, "expert_ffn_hidden": 0,
                                                      "first_dense_layers": 0, "every": 1, "moe_layers": 0}
    dsv3 = _run_json(f"model.hf_config={HERE / 'DeepSeek-V3'}", "model.moe.experts=0", "model.seq_len=4096",
                     "model.mtp_layers=0")
    assert dsv3.returncode in (0, 3), dsv3.stderr
    moe = json.loads(dsv3.stdout)["model"]["moe"]
    assert not any(v for k, v in moe.items() if k != "every")


# -- active parameters of a dense model with a vision tower ---------------------------------------

def test_a_dense_models_active_count_leaves_out_its_vision_tower() -> None:
    """Mistral-Small-3.1-24B: 24.01B with the Pixtral tower, 23.57B per text token (the tower does
    not run on text tokens). docs/output.md and docs/compute.md said active_params equals params for
    a dense model; they now say what the code counts."""
    out = _run_json(f"model.hf_config={HERE / 'Mistral-Small-3.1-24B-Instruct-2503'}", "model.seq_len=4096")
    assert out.returncode in (0, 3), out.stderr
    model = json.loads(out.stdout)["model"]
    assert model["active_params"] == model["params"] - model["vision_params"] == 23_572_403_200
    root = HERE.parents[2]
    row = next(line for line in (root / "docs" / "output.md").read_text().splitlines()
               if line.startswith("| `model.active_params` |"))
    assert "equal to `params` less `vision_params` for a dense model" in row
    compute = " ".join((root / "docs" / "compute.md").read_text().split())
    assert "equal to `params` less `vision_params` for a dense model" in compute


# -- later releases users will have -------------------------------------------------------------------

# fixture: (published total, what the owner counts as the total, published active or None)
RELEASES = {
    "Qwen3-30B-A3B-Instruct-2507": (30.5e9, "model card: '30.5B in total and 3.3B activated'", None),
    "DeepSeek-V3.1": (671e9, "671B (DeepSeek-V3's main model, MTP apart)", None),
    # zai-org: 355B / 32B; 'active' leaves out the embedding and the output matrix (docs/compute.md)
    "GLM-4.6": (355e9, "zai-org: '355B total / 32B active'", 32e9),
    # Kimi K2's total ('1T', technical report 1.04T) is 1.3% off (docs/compute.md); its 32.6B active is held
    "Kimi-K2-Instruct": (None, "technical report: 32.6B activated", 32.6e9),
}


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_later_releases_read_at_their_published_counts(name: str) -> None:
    total, source, active = RELEASES[name]
    out = _run_json(f"model.hf_config={HERE / name}", "model.seq_len=4096")
    assert out.returncode in (0, 3), out.stderr
    model = json.loads(out.stdout)["model"]
    if total is not None:
        assert abs(model["params"] / total - 1) <= 0.01, (model["params"] / 1e9, source)
    if active is not None:
        ours = model["active_params"]
        if name.startswith("GLM"):
            ours -= 2 * model["vocab"] * model["hidden"]
        assert abs(ours / active - 1) <= 0.01, (ours / 1e9, source)
    assert not any("defaults for keys the file leaves out" in n for n in model["notes"])
