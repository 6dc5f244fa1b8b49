"""`clustersim import ... --out` writes a scenario that loads from anywhere: a relative
``--hf-config`` path is written relative to the written file (the loader looks beside the
scenario first, docs/scenario.md), not as typed where `import` ran."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clustersim.cli import main
from clustersim.scenario import load_scenario

HF = Path(__file__).resolve().parent / "hf_configs" / "Qwen3-8B" / "config.json"


def test_a_relative_hf_config_is_written_relative_to_the_out_file(tmp_path: Path, monkeypatch) -> None:
    work = tmp_path / "work"
    (work / "cfg").mkdir(parents=True)
    shutil.copy(HF, work / "cfg" / "config.json")
    (work / "ds.json").write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4,
                                              "bf16": {"enabled": True}, "zero_optimization": {"stage": 1}}))
    monkeypatch.chdir(work)
    with pytest.raises(SystemExit) as exc:
        main(["import", "deepspeed-json", "ds.json", "--hf-config", "cfg/config.json", "--cluster", "dgx-h100",
              "--nodes", "1", "--out", "out/imported.yaml"])
    assert exc.value.code == 0
    monkeypatch.chdir(tmp_path)                 # elsewhere: the written file still finds its config
    scenario = load_scenario(work / "out" / "imported.yaml")
    assert scenario.model.layers == 36          # Qwen3-8B
    assert "../cfg/config.json" in (work / "out" / "imported.yaml").read_text()


def test_the_printed_scenario_loads_as_it_is_redirected_to_a_file(tmp_path: Path, monkeypatch, capsys) -> None:
    """`clustersim import ... > job.yaml`: every line that is not the scenario is a YAML comment
    (the framework line of a config; also the measured step time of a log)."""
    (tmp_path / "ds.json").write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4,
                                                  "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["import", "deepspeed-json", "ds.json", "--model", "llama2-7b", "--cluster", "dgx-a100", "--nodes", "2"])
    assert exc.value.code == 0
    printed = capsys.readouterr().out
    assert "framework deepspeed" in printed
    (tmp_path / "job.yaml").write_text(printed)
    scenario = load_scenario(tmp_path / "job.yaml")
    assert scenario.parallel.zero_stage == 3 and scenario.parallel.dp == 16
