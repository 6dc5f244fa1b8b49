"""What `clustersim run` does with a pipeline split the user states: a multi-chunk layout under the
default schedule, a stated schedule it contradicts, and the fields a too-fine split names."""

from __future__ import annotations

import json

import pytest

from clustersim.cli import main

# Llama-3-8B (32 layers) on 4 DGX H100: tp 2, pp 4, dp 4, the schedule left out
SCENARIO = """name: pp-test
framework: megatron-core
model: {preset: llama3-8b, seq_len: 4096}
cluster: {preset: dgx-h100, nodes: 4}
parallel: {tp: 2, pp: 4, dp: 4, micro_batch: 1, global_batch: 64}
"""
EIGHT_STAGES = "Et*3|t*4|t*4|t*4|t*4|t*4|t*4|t*5,L"


@pytest.fixture()
def base(tmp_path) -> str:
    path = tmp_path / "pp.yaml"
    path.write_text(SCENARIO)
    return str(path)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["run", *argv])
    out = capsys.readouterr()
    return int(exc.value.code), out.out, out.err


def test_layout_of_two_stages_per_rank_runs_interleaved_under_the_default_schedule(base, capsys) -> None:
    code, out, err = _run([base, "--set", f"parallel.pipeline_layout={EIGHT_STAGES}", "--json"], capsys)
    assert code == 0, err
    par = json.loads(out)["parallel"]
    assert (par["schedule"], par["virtual_stages"]) == ("interleaved-1f1b", 2)
    assert par["layers_per_stage"] == [3, 4, 4, 4, 4, 4, 4, 5]
    # the same as stating the schedule
    code, stated, err = _run([base, "--set", f"parallel.pipeline_layout={EIGHT_STAGES}", "--set",
                              "parallel.schedule=interleaved-1f1b", "--json"], capsys)
    assert code == 0, err
    assert json.loads(stated)["step_time_s"] == json.loads(out)["step_time_s"]


def test_layout_of_two_stages_per_rank_with_a_stated_1f1b_names_the_schedule(base, capsys) -> None:
    code, _, err = _run([base, "--set", f"parallel.pipeline_layout={EIGHT_STAGES}", "--set", "parallel.schedule=1f1b"],
                        capsys)
    assert code == 2
    assert "parallel.schedule: got '1f1b'" in err and "interleaved-1f1b" in err and "2 per pipeline rank" in err


def test_layout_not_a_multiple_of_pp_says_so(base, capsys) -> None:
    code, _, err = _run([base, "--set", "parallel.pipeline_layout=Et*3|t*4|t*4|t*4|t*4|t*4|t*8,L"], capsys)
    assert code == 2
    assert "parallel.pipeline_layout" in err and "a multiple of pp (4)" in err and "it has 7" in err


def test_too_many_weighted_stages_name_virtual_stages_not_pp(base, capsys) -> None:
    code, _, err = _run([base, "--set", "parallel.account_for_embedding=true", "--set", "parallel.account_for_loss=true",
                         "--set", "parallel.schedule=interleaved-1f1b", "--set", "parallel.virtual_stages=9"], capsys)
    assert code == 2
    assert "parallel.virtual_stages: got 9" in err and "at most 8" in err and "parallel.pp" not in err
    assert "pp (4) x 9" in err


def test_too_many_weighted_stages_without_chunks_name_pp_with_its_value(base, capsys) -> None:
    code, _, err = _run([base, "--set", "model.layers=10", "--set", "parallel.account_for_embedding=true",
                         "--set", "parallel.pp=16", "--set", "parallel.dp=1", "--set", "parallel.tp=2"], capsys)
    assert code == 2
    assert "parallel.pp: got 16" in err and "at most 11" in err
