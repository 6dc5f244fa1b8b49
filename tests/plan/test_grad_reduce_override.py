"""The scenario's training.grad_reduce_dtype, set by hand or by the importers (Megatron
--grad-reduce-in-bf16, torchtitan mixed_precision_reduce, DeepSpeed communication_data_type): one
rule (frameworks.grad_reduce_dtype) that the plan's reduced bytes, the memory model's gradients and
the run --json echo read. Before it, --grad-reduce-in-bf16 was a flag without effect and
mixed_precision_reduce was dropped: the imported jobs were priced with fp32 reductions."""

from __future__ import annotations

import json

import pytest

from clustersim.api import simulate
from clustersim.cli import main
from clustersim.errors import InputError
from clustersim.importers import finish, import_text
from clustersim.plan.data_parallel import _dp_plan_of
from clustersim.scenario import load_scenario, scenario_from_dict

LAUNCH = """torchrun --nproc-per-node 8 --nnodes 4 pretrain_gpt.py \\
  --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 \\
  --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --ffn-hidden-size 11008 \\
  --seq-length 4096 --max-position-embeddings 4096 --swiglu --normalization RMSNorm \\
  --untie-embeddings-and-output-weights --disable-bias-linear --position-embedding-type rope \\
  --vocab-size 32000 --tokenizer-type NullTokenizer \\
  --micro-batch-size 1 --global-batch-size 256 --bf16 \\
  --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather {flag} \\
  --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
"""


def _megatron(flag: str):
    res = finish(import_text("megatron-args", LAUNCH.format(flag=flag), "train.sh", cluster="dgx-h100"), [])
    return scenario_from_dict(res.scenario)


def _reduced_bytes(sc) -> float:
    """Bytes of the step's gradient reductions: the buckets, or ZeRO-3's per-unit reduce-scatters."""
    dp = _dp_plan_of(sc)
    groups = dp.zero3.reduce if dp.zero3 is not None else dp.grad_buckets
    return sum(item.plan.size_bytes for items in groups.values() for item in items)


def test_megatron_grad_reduce_in_bf16_halves_the_reduction_and_the_main_grads():
    fp32, bf16 = _megatron(""), _megatron("--grad-reduce-in-bf16")
    assert fp32.parallel.grad_reduce_dtype is None and bf16.parallel.grad_reduce_dtype == "bf16"
    assert _reduced_bytes(fp32) > 0 and _reduced_bytes(bf16) == _reduced_bytes(fp32) / 2
    before, after = simulate(fp32).to_json(), simulate(bf16).to_json()
    params = fp32.model.total_params()
    # ZeRO-1 keeps the whole main_grad buffer: fp32 4 bytes per parameter, bf16 2 (its dtype is the param's)
    assert before["memory"]["gradients"] == pytest.approx(4 * params, rel=1e-9)
    assert after["memory"]["gradients"] == pytest.approx(2 * params, rel=1e-9)
    assert (before["grad_reduce_dtype"], after["grad_reduce_dtype"]) == ("fp32", "bf16")
    assert after["step_time_s"] < before["step_time_s"]


def test_the_flag_without_bf16_is_noted_and_the_export_writes_it_back():
    res = finish(import_text("megatron-args", LAUNCH.format(flag="--grad-reduce-in-bf16").replace("--bf16", "--fp16"),
                             "train.sh", cluster="dgx-h100"), [])
    assert "grad_reduce_dtype" not in res.scenario["training"]
    assert any("--grad-reduce-in-bf16" in n for n in res.notes)
    from clustersim.importers.megatron_export import megatron_command
    assert "--grad-reduce-in-bf16" in megatron_command(_megatron("--grad-reduce-in-bf16"))


TOML = """[model]
name = "llama3"
flavor = "8B"
[training]
local_batch_size = 1
seq_len = 8192
{training}
[parallelism]
{parallelism}
"""


def _titan(training: str, parallelism: str = "data_parallel_shard_degree = -1"):
    return finish(import_text("torchtitan-toml", TOML.format(training=training, parallelism=parallelism), "job.toml",
                              cluster="dgx-h100", nodes=1), [])


def test_torchtitan_mixed_precision_reduce_maps_and_halves_the_reduce_scatter_only():
    assert "grad_reduce_dtype" not in _titan('mixed_precision_reduce = "float32"').scenario["training"]
    sc = _titan('mixed_precision_reduce = "bfloat16"').scenario
    assert sc["training"]["grad_reduce_dtype"] == "bf16"
    fp32 = scenario_from_dict(_titan("").scenario)
    bf16 = scenario_from_dict(sc)
    assert _dp_plan_of(fp32).zero3 is not None and _reduced_bytes(bf16) == _reduced_bytes(fp32) / 2
    # FSDP2 casts the reduced shard back to the fp32 parameter: its gradient shards stay 4 bytes
    mem = [simulate(x).to_json()["memory"]["gradients"] for x in (fp32, bf16)]
    assert mem[0] == mem[1]


def test_torchtitan_training_keys_unknown_noted_typo_refused_and_bad_values_named():
    res = _titan("no_such_training_key = 3")
    assert any("[training] no_such_training_key" in n for n in res.notes)
    with pytest.raises(InputError) as exc:
        _titan('mixed_precision_reduc = "bfloat16"')
    assert exc.value.field == "training.mixed_precision_reduc" and "mixed_precision_reduce" in exc.value.allowed
    with pytest.raises(InputError) as exc:
        _titan('mixed_precision_reduce = "float16"')
    assert exc.value.field == "training.mixed_precision_reduce"
    with pytest.raises(InputError) as exc:
        _titan('dtype = "bfloat16"')
    assert exc.value.field == "training.dtype"
    ddp = _titan('mixed_precision_reduce = "bfloat16"',
                 "data_parallel_shard_degree = 1\ndata_parallel_replicate_degree = 8")
    assert "grad_reduce_dtype" not in ddp.scenario["training"] and any("mixed_precision_reduce" in n
                                                                        for n in ddp.notes)


def test_deepspeed_fp32_communication_dtype_maps():
    cfg = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8,
           "bf16": {"enabled": True}, "zero_optimization": {"stage": 2}, "communication_data_type": "fp32"}
    res = finish(import_text("deepspeed-json", json.dumps(cfg), "ds.json", cluster="dgx-a100", nodes=1),
                 ["model.preset=llama2-7b"])
    assert res.scenario["training"]["grad_reduce_dtype"] == "fp32"


SMALL = ["model.preset=megatron-1.7b", "cluster.preset=dgx-h100", "cluster.nodes=1", "parallel.tp=1",
         "parallel.pp=1", "parallel.dp=8", "parallel.global_batch=16", "parallel.zero_stage=3"]


def test_the_field_overrides_deepspeed_zero3s_own_rule():
    sc = load_scenario(None, [*SMALL, "framework=deepspeed", "training.grad_reduce_dtype=fp32"])
    base = load_scenario(None, [*SMALL, "framework=deepspeed"])
    assert _reduced_bytes(sc) == 2 * _reduced_bytes(base)


@pytest.mark.parametrize(("sets", "value", "allowed"), [
    (["training.grad_reduce_dtype=fp16"], "fp16", "bf16"),
    (["training.grad_reduce_dtype=bf16", "training.dtype=fp32"], "bf16", "fp32 or left out with training.dtype fp32"),
])
def test_a_bad_value_exits_2_naming_the_field_and_a_good_one_runs(sets, value, allowed, capsys):
    base = [x for s in SMALL[:-1] for x in ("--set", s)]
    with pytest.raises(SystemExit) as ok:   # the field exists and runs
        main(["run", *base, "--set", "training.grad_reduce_dtype=bf16", "--json"])
    assert ok.value.code == 0
    assert json.loads(capsys.readouterr().out)["grad_reduce_dtype"] == "bf16"
    with pytest.raises(SystemExit) as exc:
        main(["run", *base, *[x for s in sets for x in ("--set", s)]])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "training.grad_reduce_dtype" in err and value in err and allowed in err
