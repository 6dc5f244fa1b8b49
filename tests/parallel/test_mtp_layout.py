"""A pipeline_layout puts the multi-token-prediction modules where Megatron-Core allows them
(megatron/core/transformer/pipeline_parallel_layer_layout.py validate_layer_layout): in the last
virtual stage of any rank, after every decoder layer, the loss last. They run, and are held, on
that stage; the loss's stage keeps their output-head passes."""

from __future__ import annotations

import json

import pytest

from clustersim.cli import main
from clustersim.importers import finish, import_text
from clustersim.scenario import scenario_from_dict

# Llama-3-8B (32 layers) with one MTP module on 4 DGX H100: tp 2, pp 4, dp 4, interleaved (the layouts have 2 chunks per rank)
SCENARIO = """name: mtp-layout
framework: megatron-core
model: {preset: llama3-8b, seq_len: 4096, mtp_layers: 1}
cluster: {preset: dgx-h100, nodes: 4}
parallel: {tp: 2, pp: 4, dp: 4, micro_batch: 1, global_batch: 64, schedule: interleaved-1f1b}
"""
HEAD = "Et*4|t*4|t*4|t*4|t*4|t*4|t*8"
STANDALONE = HEAD + ",m|L"      # MTP on rank 2's last chunk, the loss alone on rank 3's (Megatron's mtp_standalone)
WITH_LOSS = HEAD + "|mL"        # the same split, MTP beside the loss


@pytest.fixture()
def base(tmp_path) -> str:
    path = tmp_path / "mtp.yaml"
    path.write_text(SCENARIO)
    return str(path)


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["run", *argv])
    out = capsys.readouterr()
    return int(exc.value.code), out.out, out.err


def _json(base: str, layout: str, capsys) -> dict:
    code, out, err = _run([base, "--set", f"parallel.pipeline_layout={layout}", "--json"], capsys)
    assert code == 0, err
    return json.loads(out)


def test_mtp_on_an_earlier_rank_runs_and_is_held_there(base, capsys) -> None:
    standalone, with_loss = _json(base, STANDALONE, capsys), _json(base, WITH_LOSS, capsys)
    assert standalone["parallel"]["layers_per_stage"] == with_loss["parallel"]["layers_per_stage"] \
        == [4, 4, 4, 4, 4, 4, 8, 0]
    w_s = [p["weights"] for p in standalone["memory_parts_by_stage"]]
    w_l = [p["weights"] for p in with_loss["memory_parts_by_stage"]]
    moved = w_s[2] - w_l[2]
    assert moved > 0 and w_l[3] - w_s[3] == moved        # the MTP module's weights move from rank 3 to rank 2
    assert w_s[:2] == w_l[:2]
    a_s = [p["activations"] for p in standalone["memory_parts_by_stage"]]
    a_l = [p["activations"] for p in with_loss["memory_parts_by_stage"]]
    assert a_s[2] > a_l[2] and a_s[3] < a_l[3]          # and its layer's activations
    assert standalone["step_time_s"] != with_loss["step_time_s"]


def test_deepseek_v3_documented_layout_is_accepted(capsys) -> None:
    """Megatron-Core's documented DeepSeek-V3 layout (docs pipeline_parallel_layout.md): PP 16 x VPP 2,
    the MTP module alone on rank 14's second chunk, the loss alone on rank 15's."""
    sc = scenario_from_dict({
        "model": {"preset": "deepseek-v3"}, "cluster": {"preset": "dgx-h800", "nodes": 256},
        "parallel": {"tp": 1, "pp": 16, "dp": 128, "ep": 64, "zero_stage": 1, "global_batch": 16384,
                     "schedule": "interleaved-1f1b", "pipeline_layout": "Et*3|(tt|)*29,m|L"}})
    assert (sc.parallel.schedule, sc.parallel.virtual_stages) == ("interleaved-1f1b", 2)
    assert sc.parallel.layers_per_stage == (3,) + (2,) * 29 + (0, 0)


@pytest.mark.parametrize("layout, rule", [
    ("Et*4|t*4|t*4|t*4m|t*4|t*4|t*4|t*4L", "last virtual stage of their pipeline rank"),
    ("Et*4|t*4|t*4|t*4|t*4|t*4|m|t*8L", "after every decoder layer"),
    ("Et*4|t*4|t*4|t*4|t*4|t*4|t*8|Lm", "the loss L last"),
])
def test_mtp_placements_megatron_refuses_name_the_rule(base, layout, rule, capsys) -> None:
    code, _, err = _run([base, "--set", f"parallel.pipeline_layout={layout}"], capsys)
    assert code == 2
    assert "parallel.pipeline_layout" in err and rule in err


def test_two_mtp_modules_in_two_stages_are_refused(base, capsys) -> None:
    code, _, err = _run([base, "--set", "model.mtp_layers=2", "--set",
                         "parallel.pipeline_layout=Et*4|t*4|t*4|t*4|t*4|t*4|t*8m|mL"], capsys)
    assert code == 2 and "all MTP modules m in one stage" in err


def test_megatron_import_takes_a_standalone_mtp_layout() -> None:
    cmd = ("torchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
           "--num-attention-heads 32 --group-query-attention --num-query-groups 8 --ffn-hidden-size 14336 --swiglu "
           "--seq-length 4096 --max-position-embeddings 4096 --tokenizer-type NullTokenizer --vocab-size 128256 "
           "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --micro-batch-size 1 "
           f"--global-batch-size 64 --bf16 --mtp-num-layers 1 --pipeline-model-parallel-layout \"{STANDALONE}\"")
    sc = finish(import_text("megatron-args", cmd, "cmd", cluster="dgx-h100"), []).scenario
    assert sc["parallel"]["pipeline_layout"] == STANDALONE and sc["model"]["mtp_layers"] == 1
    assert scenario_from_dict(sc).parallel.layers_per_stage == (4, 4, 4, 4, 4, 4, 8, 0)


def test_megatron_export_keeps_the_layout_mtp_stage(base) -> None:
    from clustersim.importers.megatron_export import megatron_command
    from clustersim.scenario import apply_overrides, read_scenario_dict

    data = apply_overrides(read_scenario_dict(base), [f"parallel.pipeline_layout={STANDALONE}"])
    cmd = megatron_command(scenario_from_dict(data))
    assert "Et*4|t*4|t*4|t*4|t*4|t*4|t*8m|L" in cmd
