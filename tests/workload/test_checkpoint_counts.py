"""Parameter counts to the unit: the owner's config (or the preset of its shapes) against the
number of weights in the owner's checkpoint.

The checkpoint counts are the Hugging Face model API's ``safetensors.total`` of each repository
(https://huggingface.co/api/models/<repo>, field ``safetensors.total``): every tensor stored,
weights and buffers. The Llama 2 checkpoints also store each layer's 64-element rotary
``inv_freq`` buffer, which is not a parameter; it is subtracted below. clustersim counts RMSNorms as
one weight vector and LayerNorms as weight and bias (``ModelSpec.norm_width_params``), ignores the
biases of the projections (none in these families), and leaves the multi-token-prediction modules
out of ``model.params`` (``ModelSpec.main_params``; DeepSeek-V3's model card: "685B ... includes
671B of the Main Model weights and 14B of the Multi-Token Prediction (MTP) Module weights").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from clustersim.scenario import load_scenario
from clustersim.workload.hf_config import read_hf_config
from clustersim.workload.model_fields import model_from_fields
from clustersim.workload.model_summary import model_json
from clustersim.workload.presets import MODEL_PRESETS

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "importers" / "hf_configs"

# fixture config -> safetensors.total of the owner's repository
FROM_CONFIG = {
    "Llama-3.1-8B": 8_030_261_248,          # meta-llama/Llama-3.1-8B
    "Mistral-7B-v0.1": 7_241_732_096,       # mistralai/Mistral-7B-v0.1
    "Mixtral-8x7B-v0.1": 46_702_792_704,    # mistralai/Mixtral-8x7B-v0.1
    "Qwen3-30B-A3B": 30_532_122_624,        # Qwen/Qwen3-30B-A3B
}
# preset -> (safetensors.total, rotary buffers stored beside the weights)
FROM_PRESET = {
    "llama3-70b": (70_553_706_496, 0),           # meta-llama/Llama-3.1-70B
    "llama3-405b": (405_853_388_800, 0),         # meta-llama/Llama-3.1-405B
    "llama2-7b": (6_738_417_664, 32 * 64),       # meta-llama/Llama-2-7b-hf
    "llama2-13b": (13_015_866_880, 40 * 64),     # meta-llama/Llama-2-13b-hf
    "llama2-70b": (68_976_653_312, 80 * 64),     # meta-llama/Llama-2-70b-hf
}


@pytest.mark.parametrize("name", sorted(FROM_CONFIG))
def test_a_config_counts_what_its_checkpoint_stores(name: str) -> None:
    model = model_from_fields(name, {**read_hf_config(str(FIXTURES / name / "config.json")), "seq_len": 4096})
    assert model.main_params() == model.total_params() == FROM_CONFIG[name]


@pytest.mark.parametrize("name", sorted(FROM_PRESET))
def test_a_preset_counts_what_its_checkpoint_stores(name: str) -> None:
    stored, buffers = FROM_PRESET[name]
    assert model_from_fields(name, MODEL_PRESETS[name]).main_params() == stored - buffers


def test_norms_count_a_bias_only_for_layernorm() -> None:
    llama = model_from_fields("llama3-8b", MODEL_PRESETS["llama3-8b"])
    gpt = model_from_fields("gpt3-175b", MODEL_PRESETS["gpt3-175b"])
    assert (llama.norm_width_params(), gpt.norm_width_params()) == (4096, 2 * 12288)
    assert llama.norm_params() == 2 * 4096 and gpt.norm_params() == 4 * 12288


def test_mtp_modules_are_trained_but_not_in_the_owners_count() -> None:
    """DeepSeek-V3: 671B main model (its model card), the MTP module on top; active 37.55B per
    token (the card's "37B activated", embedding and output layer included)."""
    cfg = read_hf_config(str(FIXTURES / "DeepSeek-V3" / "config.json"))
    model = model_from_fields("deepseek-v3", {**cfg, "seq_len": 4096})
    assert model.mtp_layers == 1
    assert round(model.main_params() / 1e9, 2) == 671.03
    assert model.total_params() - model.main_params() == model.mtp_params() > 11e9
    assert round(model.active_params() / 1e9, 2) == 37.55


def test_the_model_block_gives_the_owners_count_and_the_mtp_modules_apart() -> None:
    """``run --json``'s ``model`` block (``model_json``) for DeepSeek-V3 as shipped."""
    model = model_json(load_scenario(ROOT / "scenarios" / "deepseek_v3_h800x2048.yaml").model)
    assert round(model["params"] / 1e9) == 671
    assert 11e9 < model["mtp_params"] < 14e9
