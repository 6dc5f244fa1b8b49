"""torchtitan (TOML + log) and DeepSpeed (JSON + log) -> scenarios and measured step times."""

import json

import pytest

from clustersim.cli import main
from clustersim.importers import detect_log_kind, finish, import_text
from clustersim.scenario import scenario_from_dict
from validation.logs.formats import deepspeed_config, deepspeed_log, torchtitan_log, torchtitan_toml

LLAMA3_8B_ARGS = ("TransformerModelArgs(_enforced='This field is used to enforce all fields have defaults.', dim=4096, "
                  "n_layers=32, n_heads=32, n_kv_heads=8, vocab_size=128256, multiple_of=1024, ffn_dim_multiplier=1.3, "
                  "norm_eps=1e-05, rope_theta=500000, max_seq_len=8192, depth_init=True)")


def _run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_torchtitan_log_and_toml(tmp_path, capsys):
    """tps is tokens/s per GPU: step = global_batch x seq / (tps x world) = 2 x 8192 / 5762 s."""
    log, toml = tmp_path / "train.log", tmp_path / "llama3_8b.toml"
    log.write_text(torchtitan_log(model_args=LLAMA3_8B_ARGS, mesh=(["dp_shard"], [8]), gpu="NVIDIA H100 80GB HBM3",
                                  tps=5762))
    toml.write_text(torchtitan_toml(name="llama3", flavor="8B", local_batch=2, seq_len=8192))
    assert detect_log_kind(log.read_text()) == "torchtitan-log"
    code, stdout, _ = _run(["import", "torchtitan-log", str(log), "--config", str(toml), "--json"], capsys)
    assert code == 0
    doc = json.loads(stdout)
    sc = doc["scenario"]
    assert sc["framework"] == "torchtitan" and sc["cluster"] == {"preset": "dgx-h100", "nodes": 1}  # GPU from the log
    assert sc["model"]["ffn_hidden"] == 14336 and sc["model"]["kv_heads"] == 8   # Llama FFN rounding
    p = sc["parallel"]
    assert (p["dp"], p["micro_batch"], p["global_batch"], p["zero_stage"]) == (8, 2, 16, 3)
    assert doc["measured_step_time_s"] == pytest.approx(2 * 8192 / 5762, rel=0.01)
    assert [i["iteration"] for i in doc["iterations"] if i["dropped"]] == [1]
    scenario_from_dict(sc)


@pytest.mark.parametrize("capacity_gib, noted", [(79.11, False), (94.50, True)])
def test_torchtitan_log_says_when_its_gpu_holds_other_memory(capacity_gib, noted, tmp_path, capsys):
    """Meta's H100s report "NVIDIA H100 with 94.50GiB": the 80 GB profile's memory verdicts are
    not theirs, and the import says so (the log's line and the profile's capacity)."""
    log, toml = tmp_path / "train.log", tmp_path / "llama3_8b.toml"
    log.write_text(torchtitan_log(model_args=LLAMA3_8B_ARGS, mesh=(["dp_shard"], [8]), gpu="NVIDIA H100",
                                  tps=5762, capacity_gib=capacity_gib))
    toml.write_text(torchtitan_toml(name="llama3", flavor="8B", local_batch=2, seq_len=8192))
    code, stdout, _ = _run(["import", "torchtitan-log", str(log), "--config", str(toml), "--json"], capsys)
    assert code == 0
    notes = [n for n in json.loads(stdout)["notes"] if "GiB" in n]
    assert bool(notes) == noted
    if noted:
        assert "94.50 GiB" in notes[0] and "h100-sxm-80gb" in notes[0]


def test_torchtitan_toml_alone_needs_nodes_for_dp_shard_minus_one():
    toml = torchtitan_toml(name="llama3", flavor="70B", local_batch=16, seq_len=8192, tp=8, ac="full")
    with pytest.raises(Exception) as exc:
        import_text("torchtitan-toml", toml, "70b.toml", cluster="dgx-h100")
    assert exc.value.field == "--nodes"
    res = finish(import_text("torchtitan-toml", toml, "70b.toml", cluster="dgx-h100", nodes=32), [])
    p = res.scenario["parallel"]
    assert res.scenario["model"] == {"preset": "llama3-70b", "seq_len": 8192}
    assert (p["tp"], p["dp"], p["recompute"], p["global_batch"]) == (8, 32, "full", 512)


def test_deepspeed_log_with_printed_config(tmp_path, capsys):
    cfg = deepspeed_config(train_batch=1536, micro=4, accum=1, stage=3, dtype="fp16", activation_checkpointing=True)
    log = tmp_path / "ds.log"
    log.write_text(deepspeed_log(cfg, 150.0))
    assert detect_log_kind(log.read_text()) == "deepspeed-log"
    code, stdout, _ = _run(["import", "deepspeed-log", str(log), "--cluster", "dgx-a100", "--model", "gpt3-175b",
                            "--json"], capsys)
    assert code == 0
    doc = json.loads(stdout)
    p = doc["scenario"]["parallel"]
    assert (p["dp"], p["micro_batch"], p["zero_stage"], p["recompute"]) == (384, 4, 3, "full")
    assert doc["scenario"]["cluster"]["nodes"] == 48 and doc["scenario"]["framework"] == "deepspeed"
    assert doc["measured_step_time_s"] == pytest.approx(150.0, rel=0.02)
    assert [i["iteration"] for i in doc["iterations"] if i["dropped"]] == [10]


def test_deepspeed_json_needs_the_model(tmp_path, capsys):
    cfg = tmp_path / "ds.json"
    cfg.write_text(json.dumps(deepspeed_config(train_batch=256, micro=4, accum=2, stage=2)))
    code, _, err = _run(["import", "deepspeed-json", str(cfg), "--cluster", "dgx-h100"], capsys)
    assert code == 2 and "--model" in err
    code, stdout, _ = _run(["import", "deepspeed-json", str(cfg), "--cluster", "dgx-h100", "--model", "llama2-7b",
                            "--json"], capsys)
    assert code == 0 and json.loads(stdout)["scenario"]["parallel"]["dp"] == 32


@pytest.mark.parametrize("kind, content, expected", [
    ("torchtitan-toml", "[model\nname = ", "TOML"),
    ("deepspeed-json", "{\"train_batch_size\": 8,", "valid JSON"),
    ("deepspeed-json", "[1, 2]", "DeepSpeed config"),
    ("torchtitan-log", "step: 1 but nothing else\n", "tps"),
    ("deepspeed-log", "[INFO] starting\n", "SamplesPerSec"),
    # a value that is no number: float() of what [\\d.e+-]+ matched was a traceback
    ("deepspeed-log", "epoch=0/micro_step=1/global_step=1, RunningAvgSamplesPerSec=e, CurrSamplesPerSec=e\n",
     "SamplesPerSec"),
    ("deepspeed-log", "steps: 1 loss: 2.0 iter time (s): . samples/sec: 4\n", "SamplesPerSec"),
])
def test_bad_configs_and_logs(kind, content, expected, tmp_path, capsys):
    f = tmp_path / "bad"
    f.write_text(content)
    code, _, err = _run(["import", kind, str(f), "--cluster", "dgx-h100", "--nodes", "1"], capsys)
    assert code == 2 and expected in err


@pytest.mark.parametrize("stage, accum, framework, zero", [
    (0, None, "deepspeed-bf16", 1),       # bf16 without ZeRO: BF16_Optimizer, its own ZeRO-1
    (1, "fp32", "deepspeed-bf16", 1),     # ZeRO-1 with fp32 gradient accumulation: the same optimizer
    (1, None, "deepspeed", 1),            # ZeRO-1 accumulating in bf16: DeepSpeed's ZeRO optimizer
    (2, "fp32", "deepspeed", 2),
])
def test_deepspeed_bf16_configs_pick_the_optimizer_deepspeed_runs(stage, accum, framework, zero):
    cfg = deepspeed_config(train_batch=64, micro=2, accum=4, stage=stage, dtype="bf16")
    if accum:
        cfg["data_types"] = {"grad_accum_dtype": accum}
    res = finish(import_text("deepspeed-json", json.dumps(cfg), "ds.json", cluster="dgx-a100"), [],
                 model="megatron-1.7b")
    assert res.scenario["framework"] == framework and res.scenario["parallel"]["zero_stage"] == zero


UNKNOWN_FLAVOR_TOML = """[job]
dump_folder = "./outputs"
[model]
name = "llama4"
flavor = "17bx16e"
[training]
local_batch_size = 8
seq_len = 8192
[parallelism]
data_parallel_shard_degree = -1
tensor_parallel_degree = 8
pipeline_parallel_degree = 2
pipeline_parallel_schedule = "Interleaved1F1B"
pipeline_parallel_layers_per_stage = 13
"""


@pytest.mark.parametrize("how", [["--model", "llama4-scout"], ["--set", "model.preset=llama4-scout"],
                                 ["--hf-config", "tests/importers/hf_configs/Llama-4-Scout-17B-16E/config.json"]])
def test_a_flavor_clustersim_does_not_know_takes_the_model_named_on_the_command_line(tmp_path, capsys, how):
    """A torchtitan TOML of a flavor outside the known ones exits 2 telling the user to name the
    model; each way of naming it must then work, the pipeline split counted on that model's 48
    layers (the import stopped before --model / --set were applied)."""
    toml = tmp_path / "job.toml"
    toml.write_text(UNKNOWN_FLAVOR_TOML)
    base = ["import", "torchtitan-toml", str(toml), "--cluster", "dgx-h100", "--nodes", "16"]
    code, _, err = _run(base, capsys)
    assert code == 2 and "model.flavor" in err and "--model PRESET" in err
    code, out, err = _run([*base, *how, "--json"], capsys)
    assert code == 0, err
    sc = json.loads(out)["scenario"]
    assert {"preset", "hf_config"} & set(sc["model"]) and sc["model"]["seq_len"] == 8192
    # 13 layers per stage over 48 + embedding + output: 4 stages, 2 per rank (on a 32-layer model, or
    # with the layer count unknown, the same line exits 2)
    assert sc["parallel"]["pp"] == 2 and sc["parallel"]["virtual_stages"] == 2


@pytest.mark.parametrize("gpu, cluster, part", [
    ("NVIDIA A100-SXM4-40GB", {"preset": "dgx-a100-40gb"}, "a100-sxm-40gb"),
    ("NVIDIA A100-SXM4-80GB", {"preset": "dgx-a100"}, "a100-sxm-80gb"),
    ("NVIDIA A100-PCIE-40GB", {"preset": "dgx-a100-40gb", "gpu": "a100-pcie-40gb", "scale_up": "pcie4-x16"},
     "a100-pcie-40gb"),
    ("NVIDIA H100 PCIe", {"preset": "dgx-h100", "gpu": "h100-pcie-80gb", "scale_up": "pcie5-x16"}, "h100-pcie-80gb"),
    ("NVIDIA H100 NVL", {"preset": "dgx-h100", "gpu": "h100-nvl-94gb", "scale_up": "pcie5-x16"}, "h100-nvl-94gb"),
    ("NVIDIA H100 80GB HBM3", {"preset": "dgx-h100"}, "h100-sxm-80gb"),
])
def test_the_gpu_a_log_names_is_the_part_simulated(tmp_path, capsys, gpu, cluster, part):
    """A log from an A100 40 GB runs on the 40 GB profile, not the 80 GB part; PCIe and NVL cards
    on their own profiles with a PCIe scale-up (they have no server preset of their own)."""
    log, toml = tmp_path / "train.log", tmp_path / "llama3_8b.toml"
    log.write_text(torchtitan_log(model_args=LLAMA3_8B_ARGS, mesh=(["dp_shard"], [8]), gpu=gpu, tps=3000))
    toml.write_text(torchtitan_toml(name="llama3", flavor="8B", local_batch=1, seq_len=4096))
    code, stdout, err = _run(["import", "torchtitan-log", str(log), "--config", str(toml), "--json"], capsys)
    assert code == 0, err
    sc = json.loads(stdout)["scenario"]
    assert sc["cluster"] == {**cluster, "nodes": 1}
    assert scenario_from_dict(sc).cluster.gpu.name == part


@pytest.mark.parametrize("change, expected", [
    ({"bf16": True}, "bf16: got True"),                                   # a value where an object belongs
    ({"optimizer": "AdamW"}, "optimizer: got 'AdamW'"),
    ({"data_types": "fp32"}, "data_types: got 'fp32'"),
    ({"zero_optimization": {"stage": 2, "offload_optimizer": "cpu"}}, "zero_optimization.offload_optimizer: got 'cpu'"),
    ({"zero_optimization": {"stage": 3, "offload_param": ["cpu"]}}, "zero_optimization.offload_param: got ['cpu']"),
    ({"zero_optimization": [2]}, "zero_optimization: got [2]"),
    ({"zero_optimization": {"stage": "two"}}, "zero_optimization.stage: got 'two'"),
    ({"zero_optimization": {"stage": 2.7}}, "zero_optimization.stage: got 2.7"),     # was stage 2
    ({"zero_optimization": {"stage": True}}, "zero_optimization.stage: got True"),   # was stage 1
    ({"train_micro_batch_size_per_gpu": 4.5}, "train_micro_batch_size_per_gpu: got 4.5"),  # was 4
    ({"bf16": {"enabled": "false"}}, "bf16.enabled: got 'false'"),        # was bf16
    ({"fp16": {"enabled": True}}, "bf16.enabled and fp16.enabled"),      # was bf16; DeepSpeed refuses both
    ({"train_batch_size": 248}, "train_batch_size: got 248"),            # 31 ranks (it blamed --nodes)
    ({"train_batch_size": 250}, "250 is not a multiple of 4 x 2"),
    ({"gradient_accumulation_steps": 1e30}, "gradient_accumulation_steps: got 1e+30"),  # was cluster.nodes: got 0
])
def test_deepspeed_json_of_the_wrong_type_or_inconsistent_is_named(change, expected, tmp_path, capsys):
    """Each exits 2 naming the DeepSpeed key and the value (they were tracebacks, or read as something
    else: 4.5 as 4, stage 2.7 as 2, "false" as enabled)."""
    cfg = tmp_path / "ds.json"
    cfg.write_text(json.dumps({**deepspeed_config(train_batch=256, micro=4, accum=2, stage=2), **change}))
    code, _, err = _run(["import", "deepspeed-json", str(cfg), "--cluster", "dgx-h100", "--model", "llama2-7b"], capsys)
    assert code == 2 and expected in err and "Traceback" not in err, err


def test_deepspeed_batch_rule_names_nodes_and_keeps_auto(tmp_path, capsys):
    """--nodes that contradicts micro x accumulation x ranks is named with the config's values; the
    HF Trainer's "auto" still reads (the batch from --nodes, "auto" precision as bf16); the old
    boolean zero_optimization is DeepSpeed's stage 1."""
    cfg = tmp_path / "ds.json"
    base = ["import", "deepspeed-json", str(cfg), "--cluster", "dgx-h100", "--model", "llama2-7b"]
    cfg.write_text(json.dumps(deepspeed_config(train_batch=256, micro=4, accum=2, stage=2)))
    code, _, err = _run([*base, "--nodes", "2"], capsys)
    assert code == 2 and "train_batch_size: got 256" in err and "--nodes 2 gives 16" in err
    auto = {**deepspeed_config(train_batch=256, micro=4, accum=2, stage=2), "train_batch_size": "auto",
            "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}, "zero_optimization": True}
    cfg.write_text(json.dumps(auto))
    code, out, err = _run([*base, "--nodes", "4", "--json"], capsys)
    assert code == 0, err
    sc = json.loads(out)["scenario"]
    assert (sc["parallel"]["global_batch"], sc["parallel"]["zero_stage"], sc["training"]["dtype"]) == (256, 1, "bf16")


TOML_8B = torchtitan_toml(name="llama3", flavor="8B", local_batch=2, seq_len=8192)


@pytest.mark.parametrize("edit, expected", [
    (lambda t: t.replace("enable = false", 'enable = "false"'), "compile.enable: got 'false'"),  # was compile: true
    (lambda t: t.replace('"bfloat16"', '"fp32"'), "mixed_precision_param: got 'fp32'"),          # was bf16
    (lambda t: t.replace('"bfloat16"', '"int4"'), "allowed: bfloat16, float32"),                 # was bf16
    (lambda t: t.replace('mode = "selective"', 'mode = "ful"'), "did you mean 'full'?"),        # was selective-op
    (lambda t: t.replace('mode = "selective"', "mode = 5"), "activation_checkpoint.mode: got 5"),
    (lambda t: 'parallelism = "x"\n' + t.split("[parallelism]")[0] + "[compile]" + t.split("[compile]")[1],
     "parallelism: got 'x'"),                                                                  # was ignored
])
def test_torchtitan_toml_values_torchtitan_refuses_are_named(edit, expected, tmp_path, capsys):
    toml = tmp_path / "job.toml"
    toml.write_text(edit(TOML_8B))
    code, _, err = _run(["import", "torchtitan-toml", str(toml), "--cluster", "dgx-h100", "--nodes", "1"], capsys)
    assert code == 2 and expected in err, err


def test_torchtitan_float32_params_train_in_fp32(tmp_path, capsys):
    toml = tmp_path / "job.toml"
    toml.write_text(TOML_8B.replace('"bfloat16"', '"float32"'))
    code, out, err = _run(["import", "torchtitan-toml", str(toml), "--cluster", "dgx-h100", "--nodes", "1", "--json"],
                          capsys)
    assert code == 0, err
    assert json.loads(out)["scenario"]["training"]["dtype"] == "fp32"


@pytest.mark.parametrize("key, value", [("zero_hpz_partition_size", 8), ("zero_quantized_weights", True),
                                        ("zero_quantized_gradients", True), ("mics_shard_size", 8)])
def test_deepspeed_zero_variants_are_refused_by_name(key, value):
    """ZeRO++ and MiCS change ZeRO-3's collectives and memory; they were imported as plain ZeRO-3
    with no note."""
    from clustersim.errors import InputError
    cfg = deepspeed_config(train_batch=64, micro=2, accum=4, stage=3, dtype="bf16")
    cfg["zero_optimization"][key] = value
    with pytest.raises(InputError) as exc:
        import_text("deepspeed-json", json.dumps(cfg), "ds.json", cluster="dgx-a100")
    assert exc.value.field == f"zero_optimization.{key}"
    cfg["zero_optimization"][key] = {"zero_hpz_partition_size": 1, "mics_shard_size": -1}.get(key, False)
    import_text("deepspeed-json", json.dumps(cfg), "ds.json", cluster="dgx-a100")   # the neutral value imports


MOE_TOML = """[model]
name = "deepseek_v3"
flavor = "671B"
[training]
local_batch_size = 4
seq_len = 4096
[parallelism]
data_parallel_shard_degree = -1
tensor_parallel_degree = 8
expert_parallel_degree = 64
"""


def test_torchtitan_expert_tp_defaults_to_1_and_a_misspelt_key_is_named(tmp_path, capsys):
    """torchtitan's expert_tensor_parallel_degree defaults to 1; it was left out of the scenario, whose
    default is expert_tp = tp (DeepSeek-V3 at TP8: 195 GiB 'does not fit' against 90 GiB as run).
    A misspelt [parallelism] key was silently ignored (tensor_paralel_degree = 8 imported as TP 1)."""
    def scenario(text):
        res = import_text("torchtitan-toml", text, "job.toml", cluster="dgx-h100", nodes=64,
                          model={"preset": "deepseek-v3"})
        return res.scenario["parallel"]
    assert scenario(MOE_TOML)["expert_tp"] == 1
    assert scenario(MOE_TOML + "expert_tensor_parallel_degree = 8\n")["expert_tp"] == 8
    from clustersim.errors import InputError
    with pytest.raises(InputError) as exc:
        scenario(MOE_TOML.replace("tensor_parallel_degree = 8", "tensor_paralel_degree = 8"))
    assert exc.value.field == "parallelism.tensor_paralel_degree" and "did you mean tensor_parallel_degree" in str(exc.value)


def test_a_config_of_another_run_than_the_log_is_refused(tmp_path, capsys):
    """torchtitan prints the batch and sequence length it runs; a TOML of another run (global batch
    64 for a log at 8) gave a step time 8x the log's, with the TOML's float8 besides."""
    trainer = ("[rank0]:[titan] 2025-06-10 10:00:14,518 - root - INFO - Trainer is initialized with local batch "
               "size 1, global batch size 8, gradient accumulation steps 1, sequence length 8192, total steps 1000 "
               "(warmup 200)\n")
    log = trainer + torchtitan_log(model_args=LLAMA3_8B_ARGS, mesh=(["dp_shard"], [8]), gpu="NVIDIA H100 80GB HBM3",
                                   tps=5762)
    other = torchtitan_toml(name="llama3", flavor="8B", local_batch=8, seq_len=8192)
    from clustersim.errors import InputError
    with pytest.raises(InputError) as exc:
        import_text("torchtitan-log", log, "train.log", config=(other, "other.toml"))
    assert exc.value.field == "--config" and "global batch 8" in str(exc.value) and "global batch 64" in str(exc.value)
    own = torchtitan_toml(name="llama3", flavor="8B", local_batch=1, seq_len=8192)
    res = import_text("torchtitan-log", log, "train.log", config=(own, "own.toml"))
    assert res.measured_step_time_s == pytest.approx(8 * 8192 / (5762 * 8), rel=0.02)


def test_a_megatron_log_with_a_config_of_another_gpu_count_is_refused():
    from clustersim.errors import InputError
    from tests.importers.test_megatron import ARGS_16B
    from validation.logs.formats import megatron_log
    log = megatron_log(ARGS_16B, 1.0)   # world size 192
    other = ("torchrun --nproc-per-node 8 --nnodes 4 pretrain_gpt.py --num-layers 32 --hidden-size 6144 "
             "--num-attention-heads 48 --seq-length 4096 --tokenizer-type NullTokenizer --vocab-size 131071 "
             "--untie-embeddings-and-output-weights --tensor-model-parallel-size 4 --global-batch-size 192 --bf16")
    with pytest.raises(InputError) as exc:
        import_text("megatron-log", log, "train.log", config=(other, "launch.sh"), cluster="dgx-h100")
    assert exc.value.field == "--config" and "world size 192" in str(exc.value) and "32 GPUs" in str(exc.value)


def test_a_megatron_log_with_a_config_of_another_global_batch_is_refused():
    """A --config whose global batch differs from every iteration line's (no ramp in them) is the
    config of another job; it was read as 'a batch-size ramp' and the log's batch kept."""
    from clustersim.errors import InputError
    from tests.importers.test_megatron import ARGS_16B
    from validation.logs.formats import megatron_log
    log = megatron_log(ARGS_16B, 1.0)   # 192 GPUs, global batch 192 on every line

    def launch(batch: int) -> str:
        return ("torchrun --nproc-per-node 8 --nnodes 24 pretrain_gpt.py --num-layers 32 --hidden-size 6144 "
                "--num-attention-heads 48 --seq-length 4096 --tokenizer-type NullTokenizer --vocab-size 131071 "
                f"--untie-embeddings-and-output-weights --tensor-model-parallel-size 4 --global-batch-size {batch} "
                "--bf16")   # the log's model: 131,072 padded tokens (NullTokenizer adds one), untied
    with pytest.raises(InputError) as exc:
        import_text("megatron-log", log, "train.log", config=(launch(384), "launch.sh"), cluster="dgx-h100")
    assert exc.value.field == "--config" and "global batch 192 throughout" in str(exc.value) and "384" in str(exc.value)
    res = import_text("megatron-log", log, "train.log", config=(launch(192), "launch.sh"), cluster="dgx-h100")
    assert res.scenario["parallel"]["global_batch"] == 192
