"""``parallel.sequence_parallel`` left out: on for a MoE model with tp > 1 (Megatron-Core trains it
no other way), off otherwise; set to false there, exit 2 naming the field (docs/scenario.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustersim.cli import main
from clustersim.scenario import scenario_from_dict

HF = Path(__file__).resolve().parents[1] / "importers" / "hf_configs"


def _raw(model: dict, **parallel: object) -> dict:
    return {"name": "sp", "model": model, "cluster": {"preset": "dgx-h100", "nodes": 2},
            "parallel": {"pp": 1, "micro_batch": 1, "global_batch": 64, **parallel}}


MOE = {"preset": "mixtral-8x7b", "layers": 4}
DENSE = {"preset": "llama3-8b", "layers": 4}


@pytest.mark.parametrize("model,tp,expected", [(MOE, 2, True), (MOE, 1, False), (DENSE, 2, False), (DENSE, 1, False)])
def test_left_out_it_follows_the_model_and_tp(model: dict, tp: int, expected: bool) -> None:
    extra = {"ep": 8} if model is MOE else {}
    assert scenario_from_dict(_raw(model, tp=tp, **extra)).parallel.sequence_parallel is expected


@pytest.mark.parametrize("value", [True, False])
def test_a_stated_value_is_kept_where_it_is_allowed(value: bool) -> None:
    assert scenario_from_dict(_raw(DENSE, tp=2, sequence_parallel=value)).parallel.sequence_parallel is value


def test_stated_false_on_a_moe_model_with_tp_is_refused_by_name(tmp_path: Path, capsys) -> None:
    path = tmp_path / "moe.yaml"
    path.write_text(json.dumps(_raw(MOE, tp=2, ep=8, sequence_parallel=False)))
    with pytest.raises(SystemExit) as exc:
        main(["run", str(path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "parallel.sequence_parallel" in err and "got False" in err and "left out, it is on" in err


def test_a_published_moe_config_runs_with_tp_as_a_user_writes_it(tmp_path: Path, capsys) -> None:
    """Qwen3-30B-A3B's own config.json with TP 2 and no word on sequence parallelism: it runs
    (exit 0), with sequence parallelism on in the JSON's parallel block."""
    path = tmp_path / "qwen3.yaml"
    path.write_text(json.dumps({"name": "q3", "model": {"hf_config": str(HF / "Qwen3-30B-A3B" / "config.json"),
                                                        "seq_len": 4096},
                                "cluster": {"preset": "dgx-h100", "nodes": 2},
                                "parallel": {"tp": 2, "pp": 1, "ep": 8, "micro_batch": 1, "global_batch": 64}}))
    with pytest.raises(SystemExit) as exc:
        main(["run", str(path), "--engine", "analytical", "--json"])
    assert exc.value.code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["parallel"]["sequence_parallel"] is True and out["parallel"]["tp"] == 2
