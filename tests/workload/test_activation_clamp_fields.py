"""model.activation_clamp and model.moe.expert_bias: gpt-oss's presets and HF configs set them, bad
values stop with exit 2 naming the field and what is allowed."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from clustersim.errors import InputError
from clustersim.scenario import load_scenario
from clustersim.workload.hf_config import read_hf_config
from clustersim.workload.model_fields import model_from_fields
from clustersim.workload.presets import MODEL_PRESETS
from tests.conftest import preset

OSS_CONFIG = Path(__file__).resolve().parents[1] / "importers" / "hf_configs" / "gpt-oss-20b" / "config.json"


@pytest.mark.parametrize("name", ["gpt-oss-20b", "gpt-oss-120b"])
def test_gpt_oss_presets_clamp_at_7_and_carry_expert_biases(name: str) -> None:
    model = preset(name)
    assert model.activation_clamp == 7.0 and model.moe_expert_bias


def test_other_presets_have_neither() -> None:
    for name in MODEL_PRESETS:
        if not name.startswith("gpt-oss"):
            model = preset(name)
            assert model.activation_clamp == 0.0 and not model.moe_expert_bias, name


def test_the_hf_import_reads_swiglu_limit_into_the_clamp(tmp_path: Path) -> None:
    cfg = json.loads(OSS_CONFIG.read_text())
    assert cfg["swiglu_limit"] == 7.0
    fields = read_hf_config(str(OSS_CONFIG))
    assert fields["activation_clamp"] == 7.0 and fields["moe"]["expert_bias"] is True
    sc = load_scenario(None, ["model.preset=null", f"model.hf_config={OSS_CONFIG}", "parallel.tp=1", "cluster.nodes=1",
                                "parallel.pp=1", "parallel.dp=8", "parallel.ep=8"])
    assert sc.model.activation_clamp == 7.0 and sc.model.moe_expert_bias
    cfg["swiglu_limit"] = 5.5
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert read_hf_config(str(tmp_path / "config.json"))["activation_clamp"] == 5.5
    del cfg["swiglu_limit"]   # GptOssConfig's default (transformers: swiglu_limit=7.0)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert read_hf_config(str(tmp_path / "config.json"))["activation_clamp"] == 7.0


@pytest.mark.parametrize("value", ["7", -1.0, True, None])
def test_a_bad_swiglu_limit_is_refused_by_name(tmp_path: Path, value) -> None:
    cfg = json.loads(OSS_CONFIG.read_text())
    cfg["swiglu_limit"] = value
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError) as exc:
        read_hf_config(str(tmp_path / "config.json"))
    assert exc.value.field.endswith("swiglu_limit")


@pytest.mark.parametrize("value,allowed", [
    (-1.0, "a number >= 0"), ("abc", "a number >= 0"), (math.nan, "a number >= 0"), (True, "a number >= 0"),
])
def test_model_fields_refuse_a_bad_clamp(value, allowed: str) -> None:
    with pytest.raises(InputError) as exc:
        model_from_fields("m", {**MODEL_PRESETS["gpt-oss-20b"], "activation_clamp": value})
    assert exc.value.field == "model.activation_clamp" and allowed in str(exc.value)


def test_a_clamp_needs_a_gated_activation_and_expert_biases_need_experts() -> None:
    with pytest.raises(InputError) as exc:
        model_from_fields("m", {**MODEL_PRESETS["gpt3-175b"], "activation_clamp": 7.0})
    assert exc.value.field == "model.activation_clamp" and "swiglu, geglu" in str(exc.value)
    with pytest.raises(InputError) as exc:
        model_from_fields("m", {**MODEL_PRESETS["llama3-8b"], "moe": {"expert_bias": True}})
    assert exc.value.field == "model.moe.expert_bias"


@pytest.mark.parametrize("value,allowed", [("-1", "a number >= 0"), ("abc", "a number"), ("true", "a number")])
def test_the_cli_exits_2_naming_the_field(value: str, allowed: str) -> None:
    out = subprocess.run([sys.executable, "-m", "clustersim", "run", "--set", "model.preset=gpt-oss-20b",
                          "--set", f"model.activation_clamp={value}"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stdout[-300:] + out.stderr
    assert "model.activation_clamp" in out.stderr and allowed in out.stderr and "Traceback" not in out.stderr
