"""Megatron-DeepSpeed launch lines as BigScience and GLM-130B published them, and flags of
Megatron forks: each read as the job it runs, or refused by name (never dropped)."""

from __future__ import annotations

import pytest

from clustersim.errors import InputError
from clustersim.importers import finish, import_text

GLM = ("torchrun --nnodes 4 --nproc_per_node 8 pretrain_glm.py --tensor-model-parallel-size 4 "
       "--pipeline-model-parallel-size 8 --num-layers 70 --hidden-size 12288 --num-attention-heads 96 "
       "--ffn-hidden-size 32768 --seq-length 2048 --micro-batch-size 1 --global-batch-size 64 --fp16 "
       "--padded-vocab-size 150528 --checkpoint-activations --deepspeed --zero-stage 1 {extra}")


def _import(extra: str) -> dict:
    return finish(import_text("megatron-args", GLM.format(extra=extra), "cmd", cluster="dgx-a100"), []).scenario


def test_glu_activation_and_the_attention_megatron_deepspeed_runs() -> None:
    """GLM-130B's `--glu-activation geglu` was ignored (a plain GeLU MLP, 25% fewer MLP FLOPs) and a
    line without --use-flash-attn got flash attention: 52.9 s against 88.5 s measured (-40%)."""
    sc = _import("--glu-activation geglu")
    assert sc["framework"] == "deepspeed" and sc["model"]["ffn_act"] == "geglu"
    assert sc["training"]["attention"] == "standard"
    assert _import("--use-flash-attn-v2")["training"]["attention"] == "flash"


@pytest.mark.parametrize("extra,flag", [
    ("--glu-activation liglu", "--glu-activation"),
    ("--num-layers-per-stage 1 3 4 4 2 5 1 3", "--num-layers-per-stage"),   # Iluvatar's fork: was dropped
])
def test_flags_that_change_the_job_are_refused_by_name(extra: str, flag: str) -> None:
    with pytest.raises(InputError) as err:
        _import(extra)
    assert err.value.field == flag


def test_an_interleaved_micro_batch_group_other_than_pp_is_refused() -> None:
    text = GLM.format(extra="--num-layers-per-virtual-pipeline-stage 1 --microbatch-group-size-per-virtual-pipeline-"
                            "stage 5").replace("--num-layers 70", "--num-layers 16").replace("--deepspeed --zero-stage 1", "")
    with pytest.raises(InputError) as err:
        finish(import_text("megatron-args", text, "cmd", cluster="dgx-a100"), [])
    assert err.value.field == "--microbatch-group-size-per-virtual-pipeline-stage"


@pytest.mark.parametrize("extra,flag", [
    ("--num-virtual-stages-per-pipeline-rank 3", "--num-virtual-stages-per-pipeline-rank"),   # 2 layers per rank
    ("--num-virtual-stages-per-pipeline-rank 2 --num-layers-per-virtual-pipeline-stage 1",
     "--num-layers-per-virtual-pipeline-stage"),
    ("--num-layers-per-virtual-pipeline-stage 1 --decoder-first-pipeline-num-layers 1 "
     "--decoder-last-pipeline-num-layers 1", "--num-layers-per-virtual-pipeline-stage"),
])
def test_layouts_megatron_asserts_on_are_refused(extra: str, flag: str) -> None:
    """Each of these makes Megatron-LM stop at start-up; they were imported and simulated."""
    text = GLM.format(extra=extra).replace("--num-layers 70", "--num-layers 16").replace("--deepspeed --zero-stage 1", "")
    with pytest.raises(InputError) as err:
        finish(import_text("megatron-args", text, "cmd", cluster="dgx-a100"), [])
    assert err.value.field == flag


def test_megatron_deepspeed_default_partition_puts_extra_layers_first() -> None:
    """'type:transformer' (GPTModelPipe's default) is DeepSpeed's partition_balanced: 70 layers on
    PP8 run 9 x 6 then 8 x 2; clustersim's even split centred them (8, 9, ..., 9, 8)."""
    sc = _import("")
    assert sc["parallel"]["layers_per_stage"] == [9, 9, 9, 9, 9, 9, 8, 8]
    assert "layers_per_stage" not in _import("--pp-partition-method 'type:transformer|embedding'")["parallel"]
