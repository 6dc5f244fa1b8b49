"""Megatron-DeepSpeed's MoE flags (microsoft/Megatron-DeepSpeed megatron/arguments.py) read into the
scenario, or refused by name: before, any --num-experts > 1 refused the whole launch, so
--expert-interval (default 2: megatron/model/transformer.py get_num_experts_per_layer puts the experts
on layer_num % expert_interval == 0, layer_num 1-based), --topk (default 1), --moe-expert-parallel-size
and the capacity gating were never read."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustersim import api
from clustersim.errors import InputError
from clustersim.importers import finish, import_text
from clustersim.scenario import scenario_from_dict
from validation.logs.formats import MEGATRON_BASE_ARGS, megatron_log

# the flags of microsoft/Megatron-DeepSpeed examples_deepspeed/MoE/ds_pretrain_gpt_1.3B_MoE128.sh with its
# variables substituted (NUM_GPUS=64, EP_SIZE=128, EP_PARALLEL_SIZE=64, MLC=0.01, MOE_MIN_CAP=4)
MDS = ("deepspeed --num_nodes 8 --num_gpus 8 pretrain_gpt.py --override-opt_param-scheduler --adam-beta1 0.9 "
       "--adam-beta2 0.95 --tensor-model-parallel-size 1 --moe-expert-parallel-size 64 --num-experts 128 "
       "--moe-loss-coeff 0.01 --moe-train-capacity-factor 1.0 --moe-eval-capacity-factor 1.0 --moe-min-capacity 4 "
       "--init-method-std 0.014 --micro-batch-size 8 --global-batch-size 512 --num-layers 24 --hidden-size 2048 "
       "--num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 --fp16 --checkpoint-activations "
       "--create-moe-param-group --vocab-size 50257 --deepspeed --deepspeed_config ds.json "
       "--pipeline-model-parallel-size 1 --no-pipeline-parallel ")


def _import(text: str):
    return finish(import_text("megatron-args", text, "train.sh", cluster="dgx-a100", nodes=8), [])


def _refused(text: str) -> InputError:
    with pytest.raises(InputError) as exc:
        _import(text)
    return exc.value


def test_the_published_moe128_launch_imports_with_every_second_layer_moe() -> None:
    out = _import(MDS)
    moe = out.scenario["model"]["moe"]
    assert moe == {"experts": 128, "top_k": 1, "capacity_factor": 1.0, "pad_to_capacity": True, "every": 2}
    assert out.scenario["parallel"]["ep"] == 64 and out.scenario["framework"] == "deepspeed"
    model = scenario_from_dict(out.scenario).model
    # transformer.py get_num_experts_per_layer: layer_num = i + 1 is MoE when layer_num % 2 == 0
    assert [model.is_moe_layer(i) for i in range(4)] == [False, True, False, True] and model.num_moe_layers == 12
    notes = " ".join(out.notes)
    for flag in ("--moe-loss-coeff", "--moe-eval-capacity-factor", "--create-moe-param-group", "--moe-min-capacity"):
        assert flag in notes, flag
    assert api.simulate(scenario_from_dict(out.scenario)).step_time_s > 0


def test_the_same_launch_as_a_shell_script(tmp_path: Path) -> None:
    script = tmp_path / "ds_pretrain_gpt_1.3B_MoE128.sh"
    script.write_text("NUM_GPUS=64\nEP_SIZE=128\nif [[ $EP_SIZE -gt $NUM_GPUS ]]; then\n    EP_PARALLEL_SIZE=$NUM_GPUS\n"
                      "else\n    EP_PARALLEL_SIZE=$EP_SIZE\nfi\n"
                      f"deepspeed pretrain_gpt.py {MDS.split('pretrain_gpt.py ')[1]}".replace(
                          "--moe-expert-parallel-size 64 --num-experts 128",
                          "--moe-expert-parallel-size ${EP_PARALLEL_SIZE} --num-experts ${EP_SIZE}"))
    sc = finish(import_text("megatron-args", script.read_text(), script.name, cluster="dgx-a100", nodes=8),
                []).scenario
    assert sc["model"]["moe"]["every"] == 2 and sc["parallel"]["ep"] == 64


@pytest.mark.parametrize("interval, every", [(1, None), (3, 3), (4, 4)])
def test_expert_interval_is_model_moe_every(interval: int, every: int | None) -> None:
    moe = _import(MDS + f"--expert-interval {interval}").scenario["model"]["moe"]
    assert moe.get("every") == every


def test_expert_interval_and_moe_layer_freq_are_one_rule() -> None:
    """Megatron-LM's --moe-layer-freq as a list and Megatron-DeepSpeed's --expert-interval 2 state
    the same layers, and both come out as model.moe.every 2 (model_spec.moe_layer_fields)."""
    core = ("torchrun --nproc-per-node 8 --nnodes 8 pretrain_gpt.py --tensor-model-parallel-size 1 "
            "--expert-model-parallel-size 64 --use-mcore-models --micro-batch-size 8 --global-batch-size 512 "
            "--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 --vocab-size 50257 "
            "--fp16 --num-experts 128 --moe-router-topk 1 --moe-token-dispatcher-type alltoall "
            "--moe-layer-freq \"([0,1]*12)\"")
    assert _import(core).scenario["model"]["moe"]["every"] == 2 == _import(MDS).scenario["model"]["moe"]["every"]


def test_topk_and_capacity_factor_are_read() -> None:
    moe = _import(MDS + "--topk 2 --moe-train-capacity-factor 1.25").scenario["model"]["moe"]
    assert moe["top_k"] == 2 and moe["capacity_factor"] == 1.25 and moe["pad_to_capacity"] is True


def test_a_list_of_equal_counts_is_one_count() -> None:
    text = MDS.replace("--num-experts 128", "--num-experts " + " ".join(["128"] * 12))
    assert _import(text).scenario["model"]["moe"]["experts"] == 128


@pytest.mark.parametrize("extra, flag, allowed", [
    ("--mlp-type residual", "--mlp-type", "standard"),
    ("--use-tutel", "--use-tutel", "Tutel"),
    ("--expert-interval 0", "--expert-interval", "from 1"),
    ("--expert-interval 25", "--expert-interval", "at least one MoE layer"),
    ("--moe-train-capacity-factor 0", "--moe-train-capacity-factor", "> 0"),
    ("--moe-min-capacity 200", "--moe-min-capacity", "at most 128"),
    ("--topk 0", "--topk", "from 1"),
])
def test_what_is_not_modelled_is_refused_by_name(extra: str, flag: str, allowed: str) -> None:
    err = _refused(MDS + extra)
    assert err.field == flag and allowed in str(err), str(err)


def test_pyramid_counts_and_tensor_parallel_experts_are_refused() -> None:
    pyramid = MDS.replace("--num-experts 128", "--num-experts " + " ".join(["32"] * 10 + ["64"] * 2))
    err = _refused(pyramid)
    assert err.field == "--num-experts" and "one expert count" in str(err)
    err = _refused(MDS.replace("--num-experts 128", "--num-experts 64 64"))   # neither 1 nor 12 counts
    assert err.field == "--num-experts" and "one per MoE layer (12" in str(err)
    err = _refused(MDS.replace("--tensor-model-parallel-size 1", "--tensor-model-parallel-size 2"))
    assert err.field == "--tensor-model-parallel-size" and "1 with Megatron-DeepSpeed's MoE" in str(err)


# a Megatron-DeepSpeed log's arguments block prints every MoE argument under its dest name
# (megatron/arguments.py: num_experts a list, --disable-moe-token-dropping as moe_token_dropping)
BLOCK = {"deepspeed": True, "num_experts": [16], "expert_interval": 2, "topk": 2, "moe_expert_parallel_size": 8,
         "moe_train_capacity_factor": 1.0, "moe_eval_capacity_factor": 1.0, "moe_min_capacity": 4,
         "moe_loss_coeff": 0.1, "create_moe_param_group": True, "moe_token_dropping": True, "use_tutel": False,
         "mlp_type": "standard", "moe_top2_2nd_expert_sampling": True, "tensor_model_parallel_size": 1,
         "pipeline_model_parallel_size": 1, "context_parallel_size": 1, "data_parallel_size": 64, "world_size": 64,
         "num_layers": 24, "hidden_size": 2048, "num_attention_heads": 16, "seq_length": 2048,
         "micro_batch_size": 8, "global_batch_size": 512}


def test_an_arguments_block_reads_the_same_and_refuses_token_dropping_off() -> None:
    args = {k: v for k, v in MEGATRON_BASE_ARGS.items() if k not in ("use_mcore_models", "transformer_impl")}
    res = import_text("megatron-log", megatron_log({**args, **BLOCK}, 2.0), "x.log", cluster="dgx-a100", nodes=8)
    assert res.scenario["model"]["moe"] == {"experts": 16, "top_k": 2, "capacity_factor": 1.0,
                                            "pad_to_capacity": True, "every": 2}
    assert res.scenario["parallel"]["ep"] == 8
    with pytest.raises(InputError) as exc:
        import_text("megatron-log", megatron_log({**args, **BLOCK, "moe_token_dropping": False}, 2.0), "x.log",
                    cluster="dgx-a100", nodes=8)
    assert exc.value.field == "--disable-moe-token-dropping"
    err = _refused(MDS + "--disable-moe-token-dropping")   # the command line's store_false flag
    assert err.field == "--disable-moe-token-dropping"
