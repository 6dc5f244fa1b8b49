"""Megatron-LM logs and command lines -> scenarios: real formats, steady state, bad input."""

import json
import re
from dataclasses import replace

import pytest

from clustersim.cli import main
from clustersim.errors import InputError
from clustersim.importers import finish, import_text
from clustersim.parallel.layout import grad_overlap_unread
from clustersim.scenario import scenario_from_dict
from validation.logs.formats import megatron_log

ARGS_16B = {"num_layers": 32, "hidden_size": 6144, "num_attention_heads": 48, "seq_length": 4096,
            "max_position_embeddings": 4096, "padded_vocab_size": 131072, "tensor_model_parallel_size": 4,
            "world_size": 192, "data_parallel_size": 48, "global_batch_size": 192, "sequence_parallel": True,
            "use_distributed_optimizer": True, "overlap_grad_reduce": True, "overlap_param_gather": True,
            "tp_comm_overlap": True, "ffn_hidden_size": 24576, "kv_channels": 128, "num_query_groups": 48,
            "untie_embeddings_and_output_weights": True}


def _run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_log_import_json_keys_and_steady_state(tmp_path, capsys):
    """Rank prefixes, timestamps, a warning and a traceback between lines; the first iteration
    (warm-up) and the interval that saved a checkpoint (outlier) are dropped."""
    log = tmp_path / "train.log"
    log.write_text(megatron_log(ARGS_16B, 1.2345, prefix_args="[rank0]: ", prefix_iter="[rank191]: "))
    out = tmp_path / "scenario.yaml"
    code, stdout, _ = _run(["import", "megatron-log", str(log), "--cluster", "dgx-h100", "--out", str(out), "--json"],
                           capsys)
    assert code == 0
    doc = json.loads(stdout)
    assert {"scenario", "measured_step_time_s", "iterations"} <= set(doc)
    sc = doc["scenario"]
    assert sc["framework"] == "megatron-core" and sc["cluster"] == {"preset": "dgx-h100", "nodes": 24}
    assert sc["model"]["name"] == "megatron-core-16b"  # the fields match the preset exactly
    p = sc["parallel"]
    assert (p["tp"], p["pp"], p["dp"], p["global_batch"], p["zero_stage"]) == (4, 1, 48, 192, 1)
    assert p["sequence_parallel"] and p["tp_comm_overlap"] and p["recompute"] == "none"
    dropped = {i["iteration"]: i["dropped"] for i in doc["iterations"] if i["dropped"]}
    assert dropped == {1: "warm-up", 60: "outlier (> 3 MADs from the median)"}
    steady = [i["step_time_s"] for i in doc["iterations"] if i["steady"]]
    assert len(steady) == 9 and doc["measured_step_time_s"] == pytest.approx(1.2345, rel=0.01)
    assert doc["unknown_args"] == []
    from clustersim.scenario import load_scenario
    assert load_scenario(out).parallel.dp == 48


@pytest.mark.parametrize("iters, interval", [(1, 10), (3, 1)])
def test_a_log_of_warm_up_only_is_exit_2_naming_it(tmp_path, capsys, iters, interval):
    """A log cut after its first iteration line (or ending at step 3) holds no steady-state line
    (docs/calibration.md, "Steady state"): its warm-up time (4.8 s against 0.8 s steady on the 7.1B
    H100 log) was reported as the steady step, and calibrate fitted compute_scale 0.4 to it."""
    log = tmp_path / "warm.log"
    text = megatron_log(ARGS_16B, 1.2, first_step_s=6.0, iters=100, log_interval=interval, checkpoint_at=None)
    lines = text.splitlines()
    steps = [i for i, line in enumerate(lines) if "elapsed time per iteration" in line]
    log.write_text("\n".join(lines[:steps[iters - 1] + 1]) + "\n")
    code, stdout, err = _run(["import", "megatron-log", str(log), "--cluster", "dgx-h100", "--json"], capsys)
    assert code == 2 and stdout == "", err
    assert "error: megatron-log: got 'warm.log'" in err and "this one holds" in err, err
    assert "at least 2 step lines, one ending after step 3" in err, err
    code, _, err = _run(["calibrate", "--log", str(log), "--cluster", "dgx-h100", "--out", str(tmp_path / "p.yaml")],
                        capsys)
    assert code == 2 and "warm.log" in err and not (tmp_path / "p.yaml").exists(), err


def test_legacy_log_and_unknown_flags(tmp_path):
    args = {**ARGS_16B, "use_legacy_models": True, "transformer_impl": "local", "some_new_flag_2030": 7,
            "recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1}
    res = import_text("megatron-log", megatron_log(args, 2.0), "x.log", cluster="dgx-h100")
    assert res.framework == "megatron-legacy" and res.scenario["parallel"]["recompute"] == "full"
    assert res.unknown == ["some_new_flag_2030"]


@pytest.mark.parametrize("flag, value", [("pipeline_model_parallel_layout", "'Et*2|t*3|L'"),
                                         ("decoder_first_pipeline_num_layers", 3), ("window_size", "[4096, 0]"),
                                         ("num_distributed_optimizer_instances", 2)])
def test_unmappable_layout_or_model_flag_is_named(flag, value, tmp_path, capsys):
    log = tmp_path / "x.log"
    log.write_text(megatron_log({**ARGS_16B, flag: value}, 1.0))
    code, _, err = _run(["import", "megatron-log", str(log), "--cluster", "dgx-h100"], capsys)
    assert code == 2 and f"--{flag.replace('_', '-')}" in err


def test_missing_cluster_names_the_option(tmp_path, capsys):
    log = tmp_path / "x.log"
    log.write_text(megatron_log(ARGS_16B, 1.0))
    code, _, err = _run(["import", "megatron-log", str(log)], capsys)
    assert code == 2 and "--cluster" in err and "dgx-h100" in err


@pytest.mark.parametrize("make, expected", [
    (lambda t: t.split("iteration        1/")[0], "no training iteration"),                    # truncated
    (lambda t: "\n".join(line for line in t.splitlines() if "iteration" not in line), "no training iteration"),
    (lambda t: "\n".join(line for line in t.splitlines() if "arguments" not in line and "....." not in line),
     "arguments"),                                                                             # no args block
    (lambda t: "# nThread 1 nGpus 8\n   1024  256 float sum -1 12.1 0.08 0.15 0 12.0 0.08 0.15 0\n",
     "Megatron-LM training log"),                                                              # another tool
])
def test_bad_logs_exit_2_and_write_nothing(make, expected, tmp_path, capsys):
    log = tmp_path / "x.log"
    log.write_text(make(megatron_log(ARGS_16B, 1.0)))
    out = tmp_path / "never.yaml"
    code, _, err = _run(["import", "megatron-log", str(log), "--cluster", "dgx-h100", "--out", str(out)], capsys)
    assert code == 2 and expected in err and not out.exists()


COMMAND = """#!/bin/bash
GPUS_PER_NODE=8
NUM_NODES=4
DISTRIBUTED_ARGS=(--nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES --master_addr $MASTER_ADDR)
GPT_MODEL_ARGS=(
    --num-layers 32          # Llama-3 8B
    --hidden-size 4096
    --num-attention-heads 32
    --group-query-attention --num-query-groups 8
    --ffn-hidden-size 14336 --swiglu
    --seq-length 8192 --max-position-embeddings 8192
    --untie-embeddings-and-output-weights
    --tokenizer-type HuggingFaceTokenizer --tokenizer-model meta-llama/Meta-Llama-3-8B
)
torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py ${GPT_MODEL_ARGS[@]} \\
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel \\
    --micro-batch-size 1 --global-batch-size 128 --bf16 --use-distributed-optimizer \\
    --recompute-activations --lr 3e-4 --data-path $DATA --future-flag-of-2031
"""


def test_command_line_script_with_variables_and_arrays():
    res = finish(import_text("megatron-args", COMMAND, "train.sh", cluster="dgx-h100"), [])
    sc = res.scenario
    assert sc["cluster"] == {"preset": "dgx-h100", "nodes": 4}
    assert sc["model"]["kv_heads"] == 8 and sc["model"]["ffn_act"] == "swiglu" and not sc["model"]["tie_embeddings"]
    assert sc["model"]["vocab"] == 128256  # Llama-3 tokenizer; already a multiple of 128 x tp = 256
    p = sc["parallel"]
    assert (p["tp"], p["pp"], p["dp"], p["recompute"], p["zero_stage"]) == (2, 2, 8, "selective", 1)
    assert res.unknown == ["future_flag_of_2031"]
    scenario_from_dict(sc)


def test_args_from_stdin(capsys, monkeypatch):
    import io
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(COMMAND.encode())))
    code, stdout, err = _run(["import", "megatron-args", "-", "--cluster", "dgx-h100", "--json"], capsys)
    assert code == 0 and json.loads(stdout)["scenario"]["parallel"]["pp"] == 2 and "future_flag_of_2031" in err


def test_command_line_without_world_size_needs_nodes():
    text = "python pretrain_gpt.py --num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 " \
           "--vocab-size 32000 --tokenizer-type NullTokenizer"
    with pytest.raises(InputError) as exc:
        import_text("megatron-args", text, "cmd", cluster="dgx-h100")
    assert exc.value.field == "--nodes"
    res = import_text("megatron-args", text, "cmd", cluster="dgx-h100", nodes=1)
    assert res.scenario["parallel"]["dp"] == 8 and res.scenario["model"]["vocab"] == 32128


def test_round_trip_of_every_shipped_scenario(root):
    """scenario -> Megatron launch (the exporter) -> import -> the same scenario (docs/calibration.md)."""

    from clustersim.importers.megatron_export import _default_counts, cluster_overrides, megatron_command
    from clustersim.scenario import load_scenario, read_scenario_dict
    paths = sorted((root / "scenarios").glob("*.yaml"))
    assert len(paths) >= 8
    for path in paths:
        original = load_scenario(path)
        if not original.framework.name.startswith("megatron"):
            continue   # a torchtitan or DeepSpeed scenario has no Megatron launch to export
        if original.parallel.schedule in ("zb-h1", "zb-v", "dualpipe", "dualpipe-v"):
            continue   # Megatron-LM has no such schedule (DeepSeek-V3 ran DualPipe in its own framework)
        if original.node_groups:
            continue   # mixed GPUs (cluster.groups): no single --cluster preset to import against

        raw = read_scenario_dict(path)
        res = finish(import_text("megatron-args", megatron_command(original), "cmd", cluster=raw["cluster"]["preset"]),
                     cluster_overrides(raw))
        assert res.unknown == []
        back = scenario_from_dict(res.scenario)
        # what a Megatron launch describes; other sections (goodput: ...) are not Megatron arguments
        # the gradient-overlap field that the ZeRO stage does not read is not said by the launch
        unread = grad_overlap_unread(original.parallel.zero_stage)
        back = replace(back, parallel=replace(back.parallel, **{unread: getattr(original.parallel, unread)}))
        if back.parallel.pipeline_layout and not original.parallel.pipeline_layout:
            # clustersim's even split that Megatron-Core builds only from a flag (126 layers on pp 16): the layout
            # string of the same counts
            assert back.parallel.layers_per_stage == _default_counts(original), path.name
            back = replace(back, parallel=replace(back.parallel, layers_per_stage=original.parallel.layers_per_stage,
                                                  pipeline_layout=""))
        for part in ("model", "cluster", "parallel", "training", "framework"):
            assert getattr(back, part) == getattr(original, part), (path.name, part)


@pytest.mark.parametrize("content, expected", [(b"", "empty"), (b"\x00\x01binary\x00", "binary"),
                                               (b"\xff\xfe\x00\xd8", "utf-16")])
def test_empty_binary_undecodable_files(content, expected, tmp_path, capsys):
    f = tmp_path / "x.log"
    f.write_bytes(content)
    code, _, err = _run(["import", "megatron-log", str(f), "--cluster", "dgx-h100"], capsys)
    assert code == 2 and expected in err


def test_interleaved_ranks_print_the_same_iteration():
    """Two ranks printing each iteration line (print_rank_last on two pipelines' last ranks)."""
    text = megatron_log(ARGS_16B, 1.5, prefix_iter="[rank190]: ")
    doubled = "\n".join(line + ("\n" + line.replace("[rank190]", "[rank191]") if "iteration " in line else "")
                        for line in text.splitlines())
    res = import_text("megatron-log", doubled, "x.log", cluster="dgx-h100")
    assert len(res.iterations) == 11 and res.measured_step_time_s == pytest.approx(1.5, rel=0.01)


def test_qwen3_style_arguments_read_head_dim_and_qk_norm(tmp_path):
    """--kv-channels other than hidden / heads is the head width (Qwen3-30B-A3B's launch: hidden
    2048, 32 heads of 128), --qk-layernorm a norm over Q and K heads, --squared-relu the MLP."""
    args = {**ARGS_16B, "hidden_size": 2048, "num_attention_heads": 32, "kv_channels": 128, "num_query_groups": 4,
            "group_query_attention": True, "qk_layernorm": True, "swiglu": True, "ffn_hidden_size": 6144,
            "tensor_model_parallel_size": 1, "data_parallel_size": 192, "sequence_parallel": False,
            "tp_comm_overlap": False}
    log = tmp_path / "train.log"
    log.write_text(megatron_log(args, 1.0))
    res = finish(import_text("megatron-log", log.read_text(), "log", cluster="dgx-h100"), [])
    model = scenario_from_dict(res.scenario).model
    assert (model.head_dim, model.q_width, model.kv_hidden, model.qk_norm) == (128, 4096, 512, True)
    relu2 = {**ARGS_16B, "squared_relu": True}
    log.write_text(megatron_log(relu2, 1.0))
    res = finish(import_text("megatron-log", log.read_text(), "log", cluster="dgx-h100"), [])
    assert scenario_from_dict(res.scenario).model.ffn_act == "squared-relu"


def test_export_and_import_keep_head_dim_and_qk_norm():
    """Qwen3-32B (64 heads of 128 beside hidden 5120, QK-norm): exporter and importer agree."""
    from clustersim.importers.megatron_export import megatron_command
    from clustersim.scenario import load_scenario

    sc = load_scenario(None, ["model.preset=qwen3-32b", "parallel.tp=8", "parallel.pp=1", "parallel.dp=2",
                              "parallel.global_batch=16"])
    cmd = megatron_command(sc)
    assert "--kv-channels 128" in cmd and "--qk-layernorm" in cmd
    back = scenario_from_dict(finish(import_text("megatron-args", cmd, "cmd", cluster="dgx-h100"), []).scenario).model
    assert (back.head_dim, back.qk_norm, back.total_params()) == (128, True, sc.model.total_params())


def test_a_command_line_without_a_known_vocabulary_takes_the_one_the_error_asks_for(tmp_path, capsys):
    """Megatron-DeepSpeed's BLOOM line names its tokenizer, not a vocabulary size: the import stops
    naming model.vocab and says to pass --set model.vocab=N; doing so must then work (it stopped
    before the override was applied)."""
    line = ("deepspeed pretrain_gpt.py --tensor-model-parallel-size 4 --pipeline-model-parallel-size 12 "
            "--num-layers 70 --hidden-size 14336 --num-attention-heads 112 --seq-length 2048 "
            "--max-position-embeddings 2048 --micro-batch-size 2 --global-batch-size 2048 --bf16 "
            "--pp-partition-method 'type:transformer|embedding' --deepspeed --zero-stage 0 "
            "--tokenizer-type PretrainedFromHF --tokenizer-name-or-path bigscience/tokenizer")
    args = tmp_path / "bloom.sh"
    args.write_text(line + "\n")
    base = ["import", "megatron-args", str(args), "--cluster", "dgx-a100", "--nodes", "48"]
    code, _, err = _run(base, capsys)
    assert code == 2 and "model.vocab" in err and "--set model.vocab=N" in err
    code, stdout, err = _run([*base, "--set", "model.vocab=250880", "--json"], capsys)
    assert code == 0, err
    sc = json.loads(stdout)["scenario"]
    assert sc["model"]["vocab"] == 250880 and sc["parallel"]["account_for_embedding"] is True


LINE = ("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 "
        "--global-batch-size 128 --padded-vocab-size 32000 --bf16 ")


@pytest.mark.parametrize("flags, expected", [
    ("--tensor-model-parallel-size 0", "--tensor-model-parallel-size: got 0"),    # each was read as 1
    ("--pipeline-model-parallel-size 0", "--pipeline-model-parallel-size: got 0"),
    ("--context-parallel-size 0", "--context-parallel-size: got 0"),
    ("--micro-batch-size 0", "--micro-batch-size: got 0"),
    ("--tensor-model-parallel-size -2", "--tensor-model-parallel-size: got -2"),
    ("--recompute-granularity full --recompute-method bogus", "--recompute-method: got 'bogus'"),  # was block
    ("--fp16", "--bf16 and --fp16"),                                               # was bf16
    ("--recompute-granularity full --recompute-method uniform --recompute-num-layers 0",
     "--recompute-num-layers: got 0"),                                              # was 1
])
def test_arguments_megatron_refuses_are_named(flags, expected, tmp_path, capsys):
    args = tmp_path / "args.txt"
    args.write_text(LINE + flags + "\n")
    code, _, err = _run(["import", "megatron-args", str(args), "--cluster", "dgx-h100", "--nodes", "1"], capsys)
    assert code == 2 and expected in err, err


def test_log_with_a_zero_parallel_size_names_the_argument(tmp_path, capsys):
    """tensor_model_parallel_size 0 in the arguments block was read as tp 1 (the error then blamed the
    layout's product, never the 0)."""
    log = tmp_path / "x.log"
    log.write_text(megatron_log({**ARGS_16B, "tensor_model_parallel_size": 0}, 1.0))
    code, _, err = _run(["import", "megatron-log", str(log), "--cluster", "dgx-h100"], capsys)
    assert code == 2 and "--tensor-model-parallel-size: got 0" in err, err


@pytest.mark.parametrize("time_ms, expected", [("-5.0", "-0.005 s"), ("nan", "nan s"), ("-inf", "-inf s")])
def test_negative_or_nan_iteration_times_are_named(time_ms, expected, tmp_path, capsys):
    """Such lines were skipped ("no training iteration was logged"): they are refused, naming the value."""
    log = tmp_path / "x.log"
    log.write_text(re.sub(r"(elapsed time per iteration \(ms\):) [\d.]+", rf"\1 {time_ms}", megatron_log(ARGS_16B, 1.0)))
    code, _, err = _run(["import", "megatron-log", str(log), "--cluster", "dgx-h100"], capsys)
    assert code == 2 and expected in err and "measured step time" in err, err


def test_block_recompute_over_no_layer_recomputes_none(tmp_path, capsys):
    """--recompute-method block --recompute-num-layers 0: Megatron checkpoints the first 0 layers of
    each stage, i.e. none (it was read as 1 layer)."""
    args = tmp_path / "args.txt"
    args.write_text(LINE + "--recompute-granularity full --recompute-method block --recompute-num-layers 0\n")
    code, stdout, err = _run(["import", "megatron-args", str(args), "--cluster", "dgx-h100", "--nodes", "1",
                              "--json"], capsys)
    assert code == 0, err
    assert json.loads(stdout)["scenario"]["parallel"]["recompute"] == "none"


def _ramped(log: str, batches: dict[int, tuple[int, float]]) -> str:
    """``log`` with the iteration lines up to each key rewritten to a smaller global batch and step time."""
    out = []
    for line in log.splitlines():
        m = re.search(r"iteration\s+(\d+)/", line)
        if m:
            it = int(m.group(1))
            for upto, (gb, t_s) in sorted(batches.items()):
                if it <= upto:
                    line = re.sub(r"global batch size:\s*\d+", f"global batch size: {gb:5d}", line)
                    line = re.sub(r"elapsed time per iteration \(ms\): [\d.]+",
                                  f"elapsed time per iteration (ms): {t_s * 1e3:.1f}", line)
                    break
        out.append(line)
    return "\n".join(out)


def test_a_batch_size_ramp_measures_the_step_at_the_final_batch(tmp_path, capsys):
    """--rampup-batch-size: lines at smaller batches run shorter steps; the measured step is the
    final batch's (it was the median of every line, 26% fast, and calibrate fitted a fast machine)."""
    log = tmp_path / "ramp.log"
    base = megatron_log({**ARGS_16B, "rampup_batch_size": [48, 48, 4800]}, 1.2345, iters=200, checkpoint_at=None)
    log.write_text(_ramped(base, {60: (48, 0.4), 110: (96, 0.7), 150: (144, 1.0)}))
    code, stdout, _ = _run(["import", "megatron-log", str(log), "--cluster", "dgx-h100", "--json"], capsys)
    assert code == 0
    doc = json.loads(stdout)
    assert doc["measured_step_time_s"] == pytest.approx(1.2345, rel=0.02)
    assert doc["scenario"]["parallel"]["global_batch"] == 192
    ramp = [i for i in doc["iterations"] if (i["dropped"] or "").startswith("batch-size ramp")]
    assert len(ramp) == 16 and all(i["iteration"] <= 150 for i in ramp)
    assert any("final global batch 192" in n for n in doc["notes"])


def test_a_restart_with_another_layout_pairs_the_last_job_with_its_own_lines(tmp_path, capsys):
    """Two arguments blocks (48 then 96 data-parallel ranks): the scenario is the last block's and so
    must be the step time (it was the first segment's, with the second dropped as outliers)."""
    first = megatron_log(ARGS_16B, 2.0, iters=100, checkpoint_at=None)
    second = megatron_log({**ARGS_16B, "world_size": 384, "data_parallel_size": 96}, 1.0, iters=100,
                          checkpoint_at=None)
    log = tmp_path / "restart.log"
    log.write_text(first + "\n" + second)
    code, stdout, _ = _run(["import", "megatron-log", str(log), "--cluster", "dgx-h100", "--json"], capsys)
    assert code == 0
    doc = json.loads(stdout)
    assert doc["scenario"]["parallel"]["dp"] == 96
    assert doc["measured_step_time_s"] == pytest.approx(1.0, rel=0.02)
    assert any("different jobs" in n for n in doc["notes"])
    other = [i for i in doc["iterations"] if (i["dropped"] or "").startswith("another job")]
    assert len(other) == 11
    # the same job restarted: both segments count
    same = tmp_path / "same.log"
    same.write_text(megatron_log(ARGS_16B, 1.5, iters=100, checkpoint_at=None) + "\n"
                    + megatron_log(ARGS_16B, 1.5, iters=100, checkpoint_at=None))
    code, stdout, _ = _run(["import", "megatron-log", str(same), "--cluster", "dgx-h100", "--json"], capsys)
    doc = json.loads(stdout)
    assert code == 0 and doc["measured_step_time_s"] == pytest.approx(1.5, rel=0.02)
    assert not any((i["dropped"] or "").startswith("another job") for i in doc["iterations"])


def test_a_non_number_for_a_count_says_an_integer_without_the_arithmetic_guard(capsys):
    """`--num-layers abc` was refused as 'an integer from -1099511627776 to ...'."""
    with pytest.raises(InputError) as exc:
        import_text("megatron-args", "python pretrain_gpt.py --num-layers abc --hidden-size 512", "x",
                    cluster="dgx-h100", nodes=1)
    assert exc.value.field == "--num-layers" and exc.value.allowed == "an integer"


def test_a_cp_comm_type_not_modelled_is_named_as_the_flag():
    """`--cp-comm-type allgather` was refused naming the scenario's parallel.cp_comm, a field the user
    never wrote."""
    with pytest.raises(InputError) as exc:
        import_text("megatron-args", "python pretrain_gpt.py --num-layers 4 --hidden-size 512 --num-attention-heads 8 "
                    "--seq-length 1024 --tokenizer-type NullTokenizer --vocab-size 32000 --context-parallel-size 2 "
                    "--cp-comm-type allgather", "x", cluster="dgx-h100", nodes=1)
    assert exc.value.field == "--cp-comm-type" and "a2a+p2p" in str(exc.value)


def test_an_imported_value_the_scenario_refuses_says_where_it_was_read():
    """--fp8-format on an A100 was refused naming only training.dtype, a field the user never wrote."""
    with pytest.raises(InputError) as exc:
        finish(import_text("megatron-args", "python pretrain_gpt.py --num-layers 4 --hidden-size 512 "
                           "--num-attention-heads 8 --seq-length 1024 --tokenizer-type NullTokenizer --vocab-size 32000 "
                           "--fp8-format hybrid --bf16", "run.sh", cluster="dgx-a100", nodes=1), [])
    assert exc.value.field == "training.dtype" and "megatron-args importer read from run.sh" in str(exc.value)
    with pytest.raises(InputError) as exc:   # the user's own --set is not blamed on the file
        finish(import_text("megatron-args", "python pretrain_gpt.py --num-layers 4 --hidden-size 512 "
                           "--num-attention-heads 8 --seq-length 1024 --tokenizer-type NullTokenizer --vocab-size 32000 "
                           "--bf16", "run.sh", cluster="dgx-a100", nodes=1), ["training.dtype=fp8"])
    assert exc.value.field == "training.dtype" and "read from" not in str(exc.value)


@pytest.mark.parametrize("sets,field", [
    # Gemma 3: GeGLU and 5 of 6 layers on a 1,024-token window; exported as GeLU with full attention
    # (a 19.8B model for a 27.0B one), it now names the first field the flags cannot carry
    (["model.preset=gemma3-27b", "model.seq_len=4096", "parallel.tp=8", "parallel.pp=1", "parallel.dp=2",
      "parallel.global_batch=16"], "model.ffn_act"),
    (["model.preset=gpt-oss-20b", "parallel.tp=1", "parallel.pp=1", "parallel.dp=16", "parallel.ep=8",
      "parallel.global_batch=16", "parallel.sequence_parallel=false"], "model.attention_pattern"),
])
def test_export_refuses_what_its_flags_cannot_carry(sets, field):
    from clustersim.importers.megatron_export import megatron_command
    from clustersim.scenario import load_scenario

    with pytest.raises(InputError) as exc:
        megatron_command(load_scenario(None, sets))
    assert exc.value.field == field


@pytest.mark.parametrize("sets", [
    # the expert width (768 beside a dense 6144) and the Ulysses exchange were dropped on export
    ["model.preset=qwen3-30b-a3b", "parallel.tp=1", "parallel.pp=1", "parallel.dp=16", "parallel.ep=8",
     "parallel.global_batch=16", "parallel.sequence_parallel=false"],
    ["parallel.tp=2", "parallel.pp=1", "parallel.cp=4", "parallel.dp=2", "parallel.cp_comm=a2a"],
    # a shared expert of its own width and dense first layers (--moe-shared-expert-intermediate-size,
    # --moe-layer-freq as Megatron's list expression)
    ["model.preset=mixtral-8x7b", "model.moe.shared_ffn_hidden=2048", "model.moe.first_dense_layers=2",
     "parallel.tp=1", "parallel.pp=1", "parallel.dp=16", "parallel.ep=8", "parallel.global_batch=16",
     "parallel.sequence_parallel=false"],
])
def test_export_writes_the_expert_width_and_the_cp_exchange(sets):
    from clustersim.importers.megatron_export import megatron_command
    from clustersim.scenario import load_scenario

    sc = load_scenario(None, sets)
    back = scenario_from_dict(finish(import_text("megatron-args", megatron_command(sc), "cmd", cluster="dgx-h100"),
                                     []).scenario)
    assert (back.model.moe_expert_ffn_hidden, back.parallel.cp_comm, back.model.total_params(),
            back.model.active_params()) == \
        (sc.model.moe_expert_ffn_hidden, sc.parallel.cp_comm, sc.model.total_params(), sc.model.active_params())


def test_import_refuses_a_cluster_of_another_gpu_than_the_log_names(root, capsys):
    """`import` took --cluster dgx-a100 for a torchtitan log that names its H100 and wrote an A100
    scenario with no note, where `calibrate` refuses the same pair: one rule (calibrate.devices)."""
    logs = root / "validation" / "logs" / "torchtitan_h100"
    argv = ["import", "torchtitan-log", str(logs / "llama3_8b_fsdp_8gpu.log"), "--config",
            str(logs / "llama3_8b_fsdp_8gpu.toml")]
    code, _, err = _run([*argv, "--cluster", "dgx-a100"], capsys)
    assert code == 2 and "error: --cluster: got 'dgx-a100'" in err and "--cluster dgx-h100" in err, err
    code, _, err = _run([*argv, "--cluster", "dgx-h100"], capsys)
    assert code in (0, None), err
