"""Megatron --fp16 launches and logs -> training.grad_reduce_dtype: fp32 with
--accumulate-allreduce-grads-in-fp32 (or ``accumulate_allreduce_grads_in_fp32 True`` in a log's
arguments block), else left to the rule (fp16: Megatron forces fp32 under --bf16 only,
megatron/training/arguments.py validate_args); the Megatron export writes the flag back. Before,
the flag was read as having no effect and every fp16 job was priced with fp32 gradients."""

from __future__ import annotations

import json

import pytest

from clustersim.api import simulate
from clustersim.importers import finish, import_text
from clustersim.scenario import scenario_from_dict
from validation.logs.formats import megatron_log

LAUNCH = """torchrun --nproc-per-node 8 --nnodes 1 pretrain_gpt.py \\
  --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 \\
  --num-layers 24 --hidden-size 2048 --num-attention-heads 16 \\
  --seq-length 2048 --max-position-embeddings 2048 --vocab-size 32000 --tokenizer-type NullTokenizer \\
  --micro-batch-size 1 --global-batch-size 64 --fp16 --use-distributed-optimizer {flag}
"""


def _from_args(flag: str):
    res = finish(import_text("megatron-args", LAUNCH.format(flag=flag), "train.sh", cluster="dgx-h100"), [])
    return res.scenario, scenario_from_dict(res.scenario)


def test_megatron_args_fp16_with_and_without_the_fp32_flag_and_the_export_round_trip():
    from clustersim.importers.megatron_export import megatron_command
    raw16, sc16 = _from_args("")
    raw32, sc32 = _from_args("--accumulate-allreduce-grads-in-fp32")
    assert "grad_reduce_dtype" not in raw16["training"] and raw32["training"]["grad_reduce_dtype"] == "fp32"
    assert simulate(sc16).to_json()["grad_reduce_dtype"] == "fp16"
    assert simulate(sc32).to_json()["grad_reduce_dtype"] == "fp32"
    cmd16, cmd32 = megatron_command(sc16), megatron_command(sc32)   # each checks its own round trip
    assert "--accumulate-allreduce-grads-in-fp32" not in cmd16 and "--accumulate-allreduce-grads-in-fp32" in cmd32
    back = finish(import_text("megatron-args", cmd32, "cmd", cluster="dgx-h100"), []).scenario
    assert back["training"]["grad_reduce_dtype"] == "fp32"


@pytest.mark.parametrize(("accumulate", "want"), [(True, "fp32"), (False, "fp16")])
def test_megatron_log_arguments_block(accumulate, want):
    args = {"num_layers": 24, "hidden_size": 2048, "num_attention_heads": 16, "seq_length": 2048,
            "max_position_embeddings": 2048, "padded_vocab_size": 32000, "world_size": 8, "data_parallel_size": 8,
            "global_batch_size": 64, "bf16": False, "fp16": True, "accumulate_allreduce_grads_in_fp32": accumulate}
    res = finish(import_text("megatron-log", megatron_log(args, 1.0), "x.log", cluster="dgx-h100"), [])
    assert res.scenario["training"]["dtype"] == "fp16"
    assert res.scenario["training"].get("grad_reduce_dtype") == ("fp32" if accumulate else None)
    assert json.loads(json.dumps(simulate(scenario_from_dict(res.scenario)).to_json()))["grad_reduce_dtype"] == want
