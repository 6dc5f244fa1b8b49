"""Where a scenario's `model.hf_config` is looked for, and the model name it gives, as a user lays
files out: a scenario with its config.json beside it, run from another directory; a path relative to
the current directory (the rule before); a config inside the Hugging Face hub cache."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from clustersim.workload.hf_config import model_name

FIXTURE = Path(__file__).resolve().parents[1] / "importers" / "hf_configs" / "Qwen3-8B" / "config.json"
REPO = Path(__file__).resolve().parents[2]
SCENARIO = """model: {{hf_config: {path}, seq_len: 2048}}
cluster: {{preset: dgx-h100, nodes: 2}}
parallel: {{tp: 2, pp: 1, dp: 8, micro_batch: 1, global_batch: 64}}
"""


def _run(cwd: Path, scenario: str) -> dict:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "clustersim", "run", scenario, "--json"], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_config_beside_the_scenario_is_found_from_another_directory(tmp_path: Path) -> None:
    job = tmp_path / "qwen3-job"
    job.mkdir()
    shutil.copy(FIXTURE, job / "config.json")
    (job / "scenario.yaml").write_text(SCENARIO.format(path="config.json"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = _run(elsewhere, str(job / "scenario.yaml"))
    assert out["model"]["name"] == "qwen3-job" and out["model"]["layers"] == 36


def test_a_path_relative_to_the_current_directory_still_reads(tmp_path: Path) -> None:
    (tmp_path / "models" / "Qwen3-8B").mkdir(parents=True)
    shutil.copy(FIXTURE, tmp_path / "models" / "Qwen3-8B" / "config.json")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "scenario.yaml").write_text(SCENARIO.format(path="models/Qwen3-8B/config.json"))
    out = _run(tmp_path, "jobs/scenario.yaml")
    assert out["model"]["name"] == "Qwen3-8B" and out["model"]["layers"] == 36


def test_the_hub_cache_gives_the_repository_name(tmp_path: Path) -> None:
    snap = tmp_path / "hub" / "models--Qwen--Qwen3-8B" / "snapshots" / ("0123456789abcdef" * 2 + "01234567")
    assert model_name(str(snap / "config.json")) == "Qwen/Qwen3-8B"
    assert model_name(str(tmp_path / "Qwen3-8B" / "config.json")) == "Qwen3-8B"


def test_a_model_folder_or_a_cached_repository_id_reads_its_config(tmp_path: Path, monkeypatch) -> None:
    from clustersim.workload.hf_config import read_hf_config
    folder = tmp_path / "Qwen3-8B"
    folder.mkdir()
    shutil.copy(FIXTURE, folder / "config.json")
    expected = read_hf_config(str(FIXTURE))
    assert read_hf_config(str(folder)) == expected
    repo = tmp_path / "hub" / "models--Qwen--Qwen3-8B"
    for commit in ("a" * 40, "b" * 40):
        (repo / "snapshots" / commit).mkdir(parents=True)
    shutil.copy(FIXTURE, repo / "snapshots" / ("a" * 40) / "config.json")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40 + "\n")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert read_hf_config("Qwen/Qwen3-8B") == expected
    assert model_name("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"


def test_an_uncached_repository_id_is_refused_by_name(tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HF_HUB_CACHE": str(tmp_path / "empty")}
    (tmp_path / "s.yaml").write_text(SCENARIO.format(path="Qwen/Qwen3-8B"))
    out = subprocess.run([sys.executable, "-m", "clustersim", "run", "s.yaml"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "model.hf_config" in out.stderr and "Qwen/Qwen3-8B" in out.stderr
    assert "local Hugging Face cache" in out.stderr and "Traceback" not in out.stderr
