"""A multimodal config's vision tower: Llama 4's counted in ``model.params`` as Meta counts it
(109B / 400B), reported apart as ``model.vision_params`` and never simulated; Gemma 3's not
counted (its report gives the 27B language model apart from the vision encoder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustersim.cli import main
from clustersim.scenario import scenario_from_dict
from clustersim.scenario.loader import read_hf_config

HF = Path(__file__).resolve().parent / "hf_configs"


def _scenario(config: Path) -> dict:
    return {"name": "mm", "model": {"hf_config": str(config), "seq_len": 4096},
            "cluster": {"preset": "dgx-h100", "nodes": 16},
            "parallel": {"tp": 4, "ep": 16, "zero_stage": 1, "recompute": "full", "global_batch": 512}}


def _run(path: Path, capsys, *extra: str) -> str:
    with pytest.raises(SystemExit) as exc:
        main(["run", str(path), "--engine", "analytical", *extra])
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_llama4_scout_total_as_meta_counts_it(tmp_path: Path, capsys) -> None:
    path = tmp_path / "scout.yaml"
    path.write_text(json.dumps(_scenario(HF / "Llama-4-Scout-17B-16E" / "config.json")))
    block = json.loads(_run(path, capsys, "--json"))["model"]
    assert block["vision_params"] == 871_932_416
    assert abs(block["params"] / 109e9 - 1) < 0.01                         # Meta: "109B total"
    assert abs((block["params"] - block["vision_params"]) / 109e9 - 1) > 0.01   # the language model alone is not
    assert "params include a vision tower of 0.87B, not simulated" in " ".join(_run(path, capsys).split())


def test_the_tower_is_not_simulated(tmp_path: Path) -> None:
    """Step time and memory are the language model's: the same with the tower's count taken out."""
    from clustersim.api import estimate

    raw = _scenario(HF / "Llama-4-Scout-17B-16E" / "config.json")
    with_tower = estimate(scenario_from_dict(raw))
    fields = read_hf_config(raw["model"]["hf_config"])
    fields.pop("vision_params")
    plain = estimate(scenario_from_dict({**raw, "model": {**fields, "seq_len": 4096}}))
    assert with_tower.step_time_s == plain.step_time_s
    assert with_tower.memory.peak_bytes_per_gpu == plain.memory.peak_bytes_per_gpu


def test_gemma3_tower_is_not_counted() -> None:
    assert "vision_params" not in read_hf_config(str(HF / "gemma-3-27b-pt" / "config.json"))


def test_a_broken_llama4_vision_config_is_refused_by_name(tmp_path: Path, capsys) -> None:
    cfg = json.loads((HF / "Llama-4-Scout-17B-16E" / "config.json").read_text())
    cfg["vision_config"]["hidden_size"] = -1
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps(_scenario(tmp_path / "config.json")))
    with pytest.raises(SystemExit) as exc:
        main(["run", str(path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "vision_config.hidden_size" in err and "got -1" in err and "a positive number" in err
