"""Importers map the frameworks' pipeline split settings (Megatron-Core arguments, Megatron-DeepSpeed's
--pp-partition-method, torchtitan's [parallelism] keys) onto the scenario, and export them back."""

from __future__ import annotations

import json

import pytest

from clustersim.errors import InputError
from clustersim.importers import finish, import_text
from clustersim.importers.megatron_export import megatron_command
from clustersim.scenario import scenario_from_dict
from validation.logs.formats import torchtitan_toml

LLAMA8B = ("torchrun --nproc_per_node 8 --nnodes {nodes} pretrain_gpt.py --num-layers {layers} --hidden-size 4096 "
           "--num-attention-heads 32 --group-query-attention --num-query-groups 8 --ffn-hidden-size 14336 --swiglu "
           "--seq-length 4096 --max-position-embeddings 4096 --tokenizer-type NullTokenizer --vocab-size 128255 "
           "--make-vocab-size-divisible-by 1 --tensor-model-parallel-size 8 --pipeline-model-parallel-size {pp} "
           "--micro-batch-size 1 --global-batch-size 64 --bf16 {extra}")


def megatron(extra: str, layers: int = 32, pp: int = 4, nodes: int = 4) -> dict:
    text = LLAMA8B.format(layers=layers, pp=pp, nodes=nodes, extra=extra)
    return finish(import_text("megatron-args", text, "cmd", cluster="dgx-h100"), []).scenario


def test_megatron_uneven_first_and_last_stage() -> None:
    sc = megatron("--decoder-first-pipeline-num-layers 6 --decoder-last-pipeline-num-layers 6")
    p = sc["parallel"]
    assert (p["first_stage_layers"], p["last_stage_layers"], p["schedule"]) == (6, 6, "1f1b")
    assert scenario_from_dict(sc).parallel.layers_per_stage == (6, 10, 10, 6)


def test_megatron_embedding_and_loss_with_layers_per_virtual_stage() -> None:
    # (62 + 2) / pp 4 = 16 layers per rank, 4 per virtual stage -> 4 virtual stages (arguments.py validate_args)
    sc = megatron("--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split "
                  "--num-layers-per-virtual-pipeline-stage 4", layers=62)
    p = sc["parallel"]
    assert p["account_for_embedding"] is True and p["account_for_loss"] is True
    assert (p["schedule"], p["virtual_stages"]) == ("interleaved-1f1b", 4)
    counts = scenario_from_dict(sc).parallel.layers_per_stage
    assert counts == (3,) + (4,) * 14 + (3,)


def test_megatron_layout_string_sets_the_virtual_stages() -> None:
    sc = megatron('--pipeline-model-parallel-layout "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL"', layers=80, pp=8, nodes=8)
    p = sc["parallel"]
    assert (p["schedule"], p["virtual_stages"]) == ("interleaved-1f1b", 5)
    assert p["pipeline_layout"] == "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL"
    assert scenario_from_dict(sc).parallel.layers_per_stage[-5:] == (3, 2, 2, 2, 1)


@pytest.mark.parametrize("extra, flag", [
    ("--decoder-first-pipeline-num-layers 7", "--decoder-first-pipeline-num-layers"),     # 25 over 3 middle ranks
    ("--pipeline-model-parallel-layout 'Et|tt|tt|tL'", "--pipeline-model-parallel-layout"),  # 6 of 32 layers
    ("--decoder-last-pipeline-num-layers 4 --account-for-loss-in-pipeline-split", "--decoder-last-pipeline-num-layers"),
])
def test_megatron_invalid_split_names_the_argument(extra, flag) -> None:
    with pytest.raises(InputError) as err:
        megatron(extra)
    assert err.value.field == flag


def test_megatron_deepspeed_partition_method_counts_the_embeddings() -> None:
    # BLOOM's --pp-partition-method 'type:transformer|embedding': 70 layers + 2 embeddings on PP 12 give
    # [embed | 5], 6 x 10, [5 | embed] (bigscience-workshop/bigscience train/tr11-176B-ml/README.md)
    text = ("deepspeed pretrain_gpt.py --num-layers 70 --hidden-size 14336 --num-attention-heads 112 "
            "--seq-length 2048 --max-position-embeddings 2048 --pad-vocab-size-to 250880 --vocab-size 250880 "
            "--tokenizer-type NullTokenizer --make-vocab-size-divisible-by 1 --tensor-model-parallel-size 4 "
            "--pipeline-model-parallel-size 12 --micro-batch-size 2 --global-batch-size 2048 --bf16 --world-size 384 "
            "--pp-partition-method 'type:transformer|embedding' --deepspeed")
    res = finish(import_text("megatron-args", text, "tr11.slurm", cluster="dgx-a100"), [])
    p = res.scenario["parallel"]
    assert p["account_for_embedding"] is True and p["account_for_loss"] is True
    assert any("pp-partition-method" in n for n in res.notes)
    assert scenario_from_dict(res.scenario).parallel.layers_per_stage == (5,) + (6,) * 10 + (5,)


@pytest.mark.parametrize("extra, layers", [
    ("--decoder-first-pipeline-num-layers 6 --decoder-last-pipeline-num-layers 6", 32),
    ("--decoder-last-pipeline-num-layers 5", 32),
    ("--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split "
     "--num-virtual-stages-per-pipeline-rank 2", 30),      # (30 + 2) / (4 x 2): a split Megatron-Core accepts
])
def test_megatron_export_round_trip(extra, layers) -> None:
    original = scenario_from_dict(megatron(extra, layers=layers))
    back = scenario_from_dict(finish(import_text("megatron-args", megatron_command(original), "cmd",
                                                 cluster="dgx-h100"), []).scenario)
    assert back.parallel == original.parallel


def test_export_writes_a_layout_where_megatron_has_no_flag() -> None:
    # the embedding counted as 2 layers (torchtitan's option) -> the layout string of the resolved split
    original = scenario_from_dict({"model": {"preset": "llama3-8b", "seq_len": 4096},
                                   "cluster": {"preset": "dgx-h100", "nodes": 4},
                                   "parallel": {"tp": 8, "pp": 4, "global_batch": 64, "account_for_embedding": 2}})
    cmd = megatron_command(original)
    assert "--pipeline-model-parallel-layout" in cmd
    back = scenario_from_dict(finish(import_text("megatron-args", cmd, "cmd", cluster="dgx-h100"), []).scenario)
    assert back.parallel.layers_per_stage == original.parallel.layers_per_stage == (7, 9, 8, 8)


# --- torchtitan ---------------------------------------------------------------------------------

def titan(pp: int = 4, **parallelism) -> dict:
    toml = torchtitan_toml(name="llama3", flavor="8B", local_batch=8, seq_len=8192, tp=2, pp=pp)
    extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in parallelism.items())   # JSON values are TOML here
    toml = toml.replace("context_parallel_degree = 1\n", "context_parallel_degree = 1\n" + extra)
    return finish(import_text("torchtitan-toml", toml, "x.toml", cluster="dgx-h100", nodes=4), []).scenario


def test_torchtitan_default_split_counts_embedding_and_output() -> None:
    sc = titan()
    p = sc["parallel"]
    assert (p["account_for_embedding"], p["account_for_loss"]) == (1, 1)
    assert scenario_from_dict(sc).parallel.layers_per_stage == (8, 9, 8, 7)


def test_torchtitan_less_layers_and_layers_per_stage() -> None:
    sc = titan(pipeline_parallel_schedule="Interleaved1F1B",
               pipeline_parallel_layers_per_stage=3, pipeline_parallel_first_stage_less_layers=1,
               pipeline_parallel_last_stage_less_layers=1)
    p = sc["parallel"]
    assert (p["schedule"], p["virtual_stages"]) == ("interleaved-1f1b", 3)     # ceil(34 / 3) = 12 stages
    counts = scenario_from_dict(sc).parallel.layers_per_stage
    assert counts == (2,) + (3,) * 9 + (2, 1) and sum(counts) == 32


def test_torchtitan_layers_per_stage_that_torchtitan_refuses() -> None:
    with pytest.raises(InputError) as err:
        titan(pipeline_parallel_schedule="Interleaved1F1B",
              pipeline_parallel_layers_per_stage=4)      # ceil(34 / 4) = 9 stages, not a multiple of 4
    assert err.value.field == "parallelism.pipeline_parallel_layers_per_stage"
    with pytest.raises(InputError) as err:
        titan(pipeline_parallel_first_stage_less_layers=-1)
    assert err.value.field == "parallelism.pipeline_parallel_first_stage_less_layers"


def test_torchtitan_module_fqns_become_a_layout() -> None:
    parts = [["tok_embeddings", *[f"layers.{i}" for i in range(0, 7)]],
             [f"layers.{i}" for i in range(7, 16)], [f"layers.{i}" for i in range(16, 25)],
             [*[f"layers.{i}" for i in range(25, 32)], "norm", "output"]]
    sc = titan(module_fqns_per_model_part=parts)
    assert scenario_from_dict(sc).parallel.layers_per_stage == (7, 9, 9, 7)
    with pytest.raises(InputError) as err:
        titan(module_fqns_per_model_part=parts[:3])
    assert err.value.field == "parallelism.module_fqns_per_model_part"


def test_megatron_deepspeed_script_with_quoted_flag_strings() -> None:
    """The shape of BigScience's tr11-176B-ml.slurm: flags gathered in quoted multi-line strings, a
    commented-out flag whose trailing backslash continues nothing (bash ends a comment at the
    newline), --pad-vocab-size-to, the partition method inside single quotes."""
    script = """#!/bin/bash
NLAYERS=70
PP_SIZE=12
GPT_ARGS=" \\
    --pp-partition-method 'type:transformer|embedding' \\
    --num-layers $NLAYERS \\
    --hidden-size 14336 \\
    --num-attention-heads 112 \\
    --seq-length 2048 \\
    --micro-batch-size 2 \\
    --global-batch-size 2048 \\
    --bf16 \\
    --checkpoint-activations \\
    --pad-vocab-size-to 250880 \\
    "
#    --universal-checkpoint \\
export CMD=" \\
    `pwd`/pretrain_gpt.py \\
    --tensor-model-parallel-size 4 \\
    --pipeline-model-parallel-size $PP_SIZE \\
    $GPT_ARGS \\
    --deepspeed --zero-stage 0 \\
    "
srun bash -c "python -u -m torch.distributed.run --nproc_per_node 8 --nnodes 48 $CMD"
"""
    res = finish(import_text("megatron-args", script, "tr11.slurm", cluster="dgx-a100", nodes=48), [])
    sc = res.scenario
    assert (sc["model"]["layers"], sc["model"]["vocab"], sc["framework"]) == (70, 250880, "deepspeed-bf16")
    assert sc["parallel"]["zero_stage"] == 1     # bf16 with --zero-stage 0: BF16_Optimizer, its own ZeRO-1
    assert (sc["parallel"]["tp"], sc["parallel"]["pp"], sc["parallel"]["dp"]) == (4, 12, 8)
    assert scenario_from_dict(sc).parallel.layers_per_stage == (5,) + (6,) * 10 + (5,)


def test_megatron_refuses_an_embedding_split_that_does_not_divide_and_full_recompute_without_method() -> None:
    """Megatron-Core runs --account-for-embedding-in-pipeline-split only where the layers and the
    embedding divide over pp (33 over 2 was imported as [16, 16]); and full recompute only with a
    method. Both were imported; both are exit 2 naming the flag."""
    with pytest.raises(InputError) as err:
        megatron("--account-for-embedding-in-pipeline-split", layers=32, pp=2, nodes=2)
    assert err.value.field == "--account-for-embedding-in-pipeline-split" and "33" in str(err.value)
    assert megatron("--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split",
                    layers=30, pp=2, nodes=2)["parallel"]["account_for_loss"] is True   # 32 over 2 runs
    with pytest.raises(InputError) as err:
        megatron("--recompute-granularity full")
    assert err.value.field == "--recompute-method"
    assert megatron("--recompute-granularity full --recompute-method uniform")["parallel"]["recompute"] == "full"


def test_megatron_deepseek_layout_with_its_mtp_module_imports() -> None:
    """DeepSeek-V3's layout string from Megatron's MoE README, with the MTP module 'm' in the last
    stage: the split check ran before --mtp-num-layers was read and refused it."""
    text = ("torchrun --nproc_per_node 8 --nnodes 128 pretrain_gpt.py --num-layers 61 --hidden-size 7168 "
            "--num-attention-heads 128 --seq-length 4096 --max-position-embeddings 4096 --tokenizer-type NullTokenizer "
            "--vocab-size 129279 --make-vocab-size-divisible-by 1 --tensor-model-parallel-size 1 "
            "--pipeline-model-parallel-size 16 --expert-tensor-parallel-size 1 --expert-model-parallel-size 64 --num-experts 256 --moe-router-topk 8 "
            "--moe-token-dispatcher-type alltoall --moe-ffn-hidden-size 2048 --moe-layer-freq '([0]*3+[1]*58)' "
            "--multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 "
            "--qk-pos-emb-head-dim 64 --v-head-dim 128 --mtp-num-layers 1 --micro-batch-size 1 "
            "--global-batch-size 8192 --bf16 --pipeline-model-parallel-layout 'Et|(tt|)*30mL'")
    sc = finish(import_text("megatron-args", text, "cmd", cluster="dgx-h100"), []).scenario
    assert sc["parallel"]["pipeline_layout"] == "Et|(tt|)*30mL" and sc["model"]["mtp_layers"] == 1


def test_megatron_no_overlap_p2p_communication_makes_interleaved_sends_wait() -> None:
    """--no-overlap-p2p-communication was filed under 'no effect'; it holds every interleaved send
    until its transfer is done (the zero-bubble paper's runs set it)."""
    sc = megatron("--num-layers-per-virtual-pipeline-stage 4 --no-overlap-p2p-communication")
    assert sc["parallel"]["schedule"] == "interleaved-1f1b" and sc["parallel"]["overlap_p2p_comm"] is False
    from clustersim.frameworks import sends_block
    s = scenario_from_dict(sc)
    assert sends_block(s.framework, s.parallel)
    plain = megatron("--num-layers-per-virtual-pipeline-stage 4")
    p = scenario_from_dict(plain)
    assert "overlap_p2p_comm" not in plain["parallel"] and not sends_block(p.framework, p.parallel)


def test_torchtitan_split_points_set_the_split() -> None:
    """pipeline_parallel_split_points was listed as known and never read: the even split ran
    (8, 9, 8, 7) where the points ask for 2, 10, 10, 10 (+20% step time)."""
    sc = titan(pipeline_parallel_split_points=["layers.2", "layers.12", "layers.22"])
    assert scenario_from_dict(sc).parallel.layers_per_stage == (2, 10, 10, 10)
    with pytest.raises(InputError) as err:
        titan(pipeline_parallel_split_points=["layers.12", "layers.2", "layers.22"])
    assert err.value.field == "parallelism.pipeline_parallel_split_points"


def test_torchtitan_without_weights_puts_extra_layers_first() -> None:
    """first/last_stage_less_layers = 0 fell back to clustersim's split (5, 5, 6, 6, 5, 5 for 32
    layers over 6 stages); torchtitan gives the first stages the extra layers: 6, 6, 5, 5, 5, 5."""
    sc = titan(pp=2, pipeline_parallel_schedule="Interleaved1F1B", pipeline_parallel_layers_per_stage=6,
               pipeline_parallel_first_stage_less_layers=0, pipeline_parallel_last_stage_less_layers=0)
    assert scenario_from_dict(sc).parallel.layers_per_stage == (6, 6, 5, 5, 5, 5)


def test_torchtitan_interleaved_zero_bubble_is_named_not_dropped() -> None:
    """InterleavedZeroBubble was read as ZB-H1 with one stage per rank, its stages per rank dropped."""
    with pytest.raises(InputError) as err:
        titan(pipeline_parallel_schedule="InterleavedZeroBubble")
    assert err.value.field == "parallelism.pipeline_parallel_schedule" and "ZBVZeroBubble" in err.value.allowed


def test_a_layout_sets_the_virtual_stages_in_a_scenario() -> None:
    """docs/scenario.md: pipeline_layout 'sets the virtual stages too'; a scenario that left
    virtual_stages out was refused ('4 stages (pp * virtual_stages) ...; it has 8')."""
    sc = scenario_from_dict({"model": {"layers": 8, "hidden": 1024, "heads": 16, "vocab": 32000, "seq_len": 2048},
                             "cluster": {"preset": "dgx-h100", "nodes": 1, "gpus_per_node": 4},
                             "parallel": {"tp": 1, "pp": 4, "dp": 1, "global_batch": 16, "schedule": "interleaved-1f1b",
                                          "pipeline_layout": "Et|t|t|t|t|t|t|tL"}})
    assert sc.parallel.virtual_stages == 2 and sc.parallel.layers_per_stage == (1,) * 8


@pytest.mark.parametrize("parts, why", [
    # layers.17 twice, layers.18 left out: 80 names, each stage's count still adding up
    ([["tok_embeddings", *[f"layers.{i}" for i in range(0, 18)], "layers.17"],
      [f"layers.{i}" for i in range(19, 40)], [f"layers.{i}" for i in range(40, 62)],
      [*[f"layers.{i}" for i in range(62, 80)], "norm", "output"]], "layers.17 twice"),
    # blocks 18-39 before 0-17
    ([["tok_embeddings", *[f"layers.{i}" for i in range(18, 40)]], [f"layers.{i}" for i in range(0, 18)],
      [f"layers.{i}" for i in range(40, 62)], [*[f"layers.{i}" for i in range(62, 80)], "norm", "output"]],
     "layers.18 out of order"),
    # a name that is no block of the model
    ([["tok_embeddings", *[f"layers.{i}" for i in range(0, 19)]], [f"layers.{i}" for i in range(19, 40)],
      [f"layers.{i}" for i in range(40, 62)], [*[f"layers.{i}" for i in range(62, 79)], "layers.80", "norm", "output"]],
     "layers.79 left out"),
])
def test_torchtitan_module_fqns_name_every_block_once_in_order(parts, why) -> None:
    toml = torchtitan_toml(name="llama3", flavor="70B", local_batch=8, seq_len=8192, tp=8, pp=4)
    extra = f"module_fqns_per_model_part = {json.dumps(parts)}\n"
    toml = toml.replace("context_parallel_degree = 1\n", "context_parallel_degree = 1\n" + extra)
    with pytest.raises(InputError) as err:
        import_text("torchtitan-toml", toml, "x.toml", cluster="dgx-h100", nodes=16)
    assert err.value.field == "parallelism.module_fqns_per_model_part"
    assert "every one of the model's 80 blocks once" in err.value.allowed and why in err.value.allowed
