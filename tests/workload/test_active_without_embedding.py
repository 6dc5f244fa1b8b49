"""``model.active_params_without_embedding``: the active count less an untied embedding table, the
convention of gpt-oss's model card (Table 1 of arXiv 2508.10925: 5.13B / 3.61B "active", the
unembedding counted, the embedding table not) and the one DeepSeek's "37B activated" rounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustersim.cli import main
from clustersim.scenario.loader import read_hf_config
from clustersim.workload.model_fields import model_from_fields
from clustersim.workload.presets import MODEL_PRESETS

HF = Path(__file__).resolve().parents[1] / "importers" / "hf_configs"


@pytest.mark.parametrize("family,published", [("gpt-oss-120b", 5.13e9), ("gpt-oss-20b", 3.61e9)])
def test_gpt_oss_cards_active_count_from_the_published_config(family: str, published: float) -> None:
    model = model_from_fields(family, {**read_hf_config(str(HF / family / "config.json")), "seq_len": 4096})
    assert abs(model.active_params_without_embedding() / published - 1) < 0.005
    assert model.active_params() - model.active_params_without_embedding() == model.vocab * model.hidden


def test_deepseek_v3_rounds_to_its_37b() -> None:
    model = model_from_fields("dsv3", {**read_hf_config(str(HF / "DeepSeek-V3" / "config.json")), "seq_len": 4096})
    assert round(model.active_params_without_embedding() / 1e9) == 37


def test_a_tied_table_stays_counted() -> None:
    """A tied embedding is the output layer too: every token multiplies by it."""
    tied = model_from_fields("tied", {**MODEL_PRESETS["llama3-8b"], "tie_embeddings": True})
    assert tied.active_params_without_embedding() == tied.active_params()


def test_the_json_model_block_and_the_readable_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "oss.yaml"
    path.write_text(json.dumps({"name": "oss", "model": {"hf_config": str(HF / "gpt-oss-20b" / "config.json"),
                                                         "seq_len": 4096},
                                "cluster": {"preset": "dgx-h100", "nodes": 2},
                                "parallel": {"ep": 8, "micro_batch": 1, "global_batch": 64, "zero_stage": 1,
                                             "recompute": "full"}}))
    for extra in (["--json"], []):
        with pytest.raises(SystemExit) as exc:
            main(["run", str(path), "--engine", "analytical", *extra])
        assert exc.value.code == 0
        out = capsys.readouterr().out
        if extra:
            block = json.loads(out)["model"]
            assert block["active_params"] - block["active_params_without_embedding"] == 201088 * 2880
        else:
            assert "active per token 4.19B (3.61B without the embedding table)" in out
