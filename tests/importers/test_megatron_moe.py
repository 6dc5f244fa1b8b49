"""Megatron-LM's MoE arguments (clustersim.importers.megatron_moe): the shared experts' total width,
the capacity factor and its padding, Megatron-DeepSpeed's MoE, and flags that were dropped; each
case below imported wrongly (or with a traceback) before."""

import pytest

from clustersim.compute.moe_routing import load_factor
from clustersim.errors import InputError
from clustersim.importers import finish, import_text
from clustersim.scenario import scenario_from_dict

BASE = ("torchrun --nproc-per-node 8 --nnodes 4 pretrain_gpt.py --tensor-model-parallel-size 2 "
        "--expert-model-parallel-size 8 --sequence-parallel --use-mcore-models --micro-batch-size 1 "
        "--global-batch-size 256 --seq-length 4096 --vocab-size 32000 --tokenizer-type NullTokenizer "
        "--num-layers 16 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
        "--group-query-attention --num-query-groups 8 --swiglu --untie-embeddings-and-output-weights --bf16 "
        "--num-experts 64 --moe-router-topk 4 --moe-ffn-hidden-size 1408 --moe-grouped-gemm "
        "--moe-token-dispatcher-type alltoall ")


def _import(text):
    return finish(import_text("megatron-args", text, "train.sh", cluster="dgx-h100", nodes=None), [])


def _refused(text):
    with pytest.raises(InputError) as exc:
        _import(text)
    return exc.value


def test_shared_expert_size_is_the_total_width_not_a_count():
    """Megatron's --moe-shared-expert-intermediate-size is the shared MLP's total width: 2048 on
    1408-wide experts was one 1408-wide shared expert; 5632 is four."""
    model = scenario_from_dict(_import(BASE + "--moe-shared-expert-intermediate-size 2048").scenario).model
    assert model.moe_shared_ffn_hidden == 2048
    bare = scenario_from_dict(_import(BASE).scenario).model
    per_layer = 3 * 4096 * 2048    # SwiGLU: gate, up, down
    assert model.main_params() - bare.main_params() == 16 * per_layer
    assert model.active_params() - bare.active_params() == 16 * per_layer
    four = _import(BASE + "--moe-shared-expert-intermediate-size 5632").scenario["model"]["moe"]
    assert four["shared_experts"] == 4 and "shared_ffn_hidden" not in four


def test_mixtral_with_a_narrow_shared_expert_counts_its_width():
    text = BASE.replace("--moe-ffn-hidden-size 1408 ", "").replace("--num-experts 64 --moe-router-topk 4",
                                                                    "--num-experts 8 --moe-router-topk 2")
    model = scenario_from_dict(_import(text + "--moe-shared-expert-intermediate-size 2048").scenario).model
    bare = scenario_from_dict(_import(text).scenario).model
    assert model.main_params() - bare.main_params() == 16 * 3 * 4096 * 2048   # not a 14,336-wide expert


@pytest.mark.parametrize("flags, field", [
    ("--moe-shared-expert-intermediate-size -5", "--moe-shared-expert-intermediate-size"),
    ("--moe-shared-expert-intermediate-size 0", "--moe-shared-expert-intermediate-size"),
    ("--moe-ffn-hidden-size 0", "--moe-ffn-hidden-size"),
    ("--moe-expert-capacity-factor", "--moe-expert-capacity-factor"),        # no value: read as 1.0 before
    ("--moe-expert-capacity-factor abc", "--moe-expert-capacity-factor"),    # a ValueError traceback before
    ("--moe-expert-capacity-factor inf", "--moe-expert-capacity-factor"),
    ("--moe-expert-capacity-factor nan", "--moe-expert-capacity-factor"),
    ("--moe-expert-capacity-factor 0", "--moe-expert-capacity-factor"),
    ("--moe-pad-expert-input-to-capacity", "--moe-pad-expert-input-to-capacity"),   # Megatron needs a capacity
    ("--moe-extended-tp", "--moe-extended-tp"),
    ("--moe-shared-expert-overlap", "--moe-shared-expert-overlap"),
])
def test_degenerate_or_unmodelled_moe_flags_are_refused_by_name(flags, field):
    assert _refused(BASE + flags).field == field


def test_a_negative_capacity_factor_is_dropless_as_in_megatron():
    moe = _import(BASE + "--moe-expert-capacity-factor -1").scenario["model"]["moe"]
    assert "capacity_factor" not in moe


def test_padding_to_capacity_makes_every_rank_compute_the_capacity():
    sc = _import(BASE + "--moe-expert-capacity-factor 1.5 --moe-pad-expert-input-to-capacity").scenario
    assert sc["model"]["moe"]["pad_to_capacity"] is True
    assert load_factor(scenario_from_dict(sc).model) == 1.5   # balanced routing, padded to 1.5x
    sc["model"]["moe"].pop("pad_to_capacity")
    assert load_factor(scenario_from_dict(sc).model) == 1.0   # capped at 1.5x, balanced: the mean


def test_grouped_gemm_absent_is_said_in_a_note():
    notes = _import(BASE.replace("--moe-grouped-gemm ", "")).notes
    assert any("--moe-grouped-gemm" in n for n in notes)


MDS = ("deepspeed --num_nodes 8 --num_gpus 8 pretrain_gpt.py --tensor-model-parallel-size 1 "
       "--micro-batch-size 8 --global-batch-size 512 --num-layers 24 --hidden-size 2048 --num-attention-heads 16 "
       "--seq-length 2048 --fp16 --deepspeed --deepspeed_config ds.json --world-size 64 --vocab-size 50257 ")


def test_megatron_deepspeed_moe_is_read_as_its_own_flags_not_megatron_core():
    """--moe-expert-parallel-size, --topk (default 1) and --expert-interval (default 2) were once
    dropped and the launch priced as Megatron-Core's top-2, every-layer MoE without EP; then the
    launch was refused; now they are read (tests/importers/test_megatron_deepspeed_moe.py)."""
    sc = _import(MDS + "--moe-expert-parallel-size 64 --num-experts 128 --moe-train-capacity-factor 1.0").scenario
    assert sc["model"]["moe"]["top_k"] == 1 and sc["model"]["moe"]["every"] == 2 and sc["parallel"]["ep"] == 64
    # without --deepspeed, its MoE flags alone say Megatron-DeepSpeed (no Megatron-Core dispatcher asked for)
    sc = _import(MDS.replace("--deepspeed --deepspeed_config ds.json ", "") + "--num-experts 16 --topk 1").scenario
    assert sc["model"]["moe"] == {"experts": 16, "top_k": 1, "capacity_factor": 1.0, "pad_to_capacity": True,
                                  "every": 2}


def test_megatron_deepspeed_one_expert_is_a_dense_model():
    sc = _import(MDS + "--moe-expert-parallel-size 1 --num-experts 1 --moe-loss-coeff 0.01").scenario
    assert "moe" not in sc["model"]

