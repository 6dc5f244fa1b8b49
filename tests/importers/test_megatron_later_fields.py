"""Megatron-LM and DeepSpeed arguments the scenario gained fields for: mapped, or refused by name
(docs/calibration.md, "Megatron-LM's arguments"); each was refused or dropped before."""

import pytest

from clustersim.errors import InputError
from clustersim.importers import finish, import_text
from clustersim.scenario import scenario_from_dict

# DeepSeek-V3 as Megatron-Core's MoE examples launch it (flags of megatron/training/arguments.py); with
# the EP overlap Megatron asserts virtual stages on pp > 1, here its recipe's pipeline layout (32 stages on
# pp 16), and 128 micro-batches, a multiple of pp as the interleaved schedule needs
DSV3 = """
torchrun --nproc-per-node 8 --nnodes 256 pretrain_gpt.py \\
  --num-layers 61 --hidden-size 7168 --ffn-hidden-size 18432 --num-attention-heads 128 --kv-channels 128 \\
  --multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 --qk-pos-emb-head-dim 64 \\
  --v-head-dim 128 --qk-layernorm --swiglu --untie-embeddings-and-output-weights --seq-length 4096 \\
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model deepseek-ai/DeepSeek-V3 \\
  --make-vocab-size-divisible-by 3232 --mtp-num-layers 1 \\
  --num-experts 256 --moe-layer-freq "([0]*3+[1]*58)" --moe-ffn-hidden-size 2048 \\
  --moe-shared-expert-intermediate-size 2048 --moe-router-topk 8 --moe-router-num-groups 8 \\
  --moe-router-group-topk 4 --moe-token-dispatcher-type flex \\
  --tensor-model-parallel-size 1 --pipeline-model-parallel-size 16 --expert-model-parallel-size 64 \\
  --pipeline-model-parallel-layout "Et|(tt|)*30mL" \\
  --use-distributed-optimizer --recompute-granularity selective \\
  --recompute-modules mla_up_proj layernorm moe_act --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 \\
  --use-precision-aware-optimizer --micro-batch-size 1 --global-batch-size 16384 --bf16 \\
  --fp8-format e4m3 --fp8-recipe blockwise --overlap-moe-expert-parallel-comm
"""


def _import(text, cluster="dgx-h800", nodes=None):
    return finish(import_text("megatron-args", text, "train.sh", cluster=cluster, nodes=nodes), [])


def test_deepseek_v3_launch_maps_every_field_the_shipped_scenario_states():
    sc = _import(DSV3).scenario
    m, p, t = sc["model"], sc["parallel"], sc["training"]
    assert m["mtp_layers"] == 1 and m["attention"] == "mla" and "head_dim" not in m and "qk_norm" not in m
    assert (m["q_lora_rank"], m["kv_lora_rank"], m["qk_nope_head_dim"], m["qk_rope_head_dim"], m["v_head_dim"]) == \
        (1536, 512, 128, 64, 128)
    assert m["moe"]["first_dense_layers"] == 3 and "every" not in m["moe"]
    assert (m["moe"]["router_num_groups"], m["moe"]["router_group_topk"], m["moe"]["token_dispatcher"]) == \
        (8, 4, "flex")
    assert p["recompute"] == "selective" and p["recompute_modules"] == ["layernorm", "mla_up_proj", "moe_act"]
    assert p["overlap_moe_expert_parallel_comm"] is True and t["adam_moments"] == "bf16"
    from clustersim.workload.presets import MODEL_PRESETS
    spec = scenario_from_dict(sc)
    assert round(spec.model.main_params() / 1e9, 1) == 671.0   # DeepSeek-V3's 671B (arXiv 2412.19437)
    preset = scenario_from_dict({"model": {"preset": "deepseek-v3"}}).model
    assert spec.model.main_params() == preset.main_params() and MODEL_PRESETS["deepseek-v3"]["mtp_layers"] == 1


@pytest.mark.parametrize("freq, expected", [
    ("2", {"pattern": [1, 0, 1, 0, 1, 0]}),        # Megatron: MoE on layers 0, 2, 4: not the rule, so the pattern
    ("'[0,1]*3'", {"every": 2}),
    ("'[0]*2+[0,1]*2'", {"first_dense_layers": 3, "every": 2}),
    ("'[0]*3+[1]*3'", {"first_dense_layers": 3}),
    ("'[0]*5+[1]'", {"first_dense_layers": 5}),
    ("'[1]*3'", None),                             # 3 entries for 6 layers
    ("'[0]*6'", None),                             # no MoE layer
    # Megatron's documented syntax (arguments.py --moe-layer-freq help): parentheses and a repeat of a sum
    ('"([0]*1+[1]*1)*3"', {"every": 2}),
    ("'(([0]*1+[1]*1)*2+[0,1])'", {"every": 2}),
    ('"3*([0]+[1])"', {"every": 2}),
    ('"([1]*2+[0]*1)*2"', {"pattern": [1, 1, 0, 1, 1, 0]}),   # stated as it is (model.moe.pattern)
    ("'[1]*(2+4)'", {}),                           # every layer MoE: the defaults
    ("'__import__(1)'", None),
])
def test_moe_layer_freq_maps_to_dense_layers_and_every_or_is_refused(freq, expected):
    text = ("python pretrain_gpt.py --num-layers 6 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 "
            f"--vocab-size 32000 --tokenizer-type NullTokenizer --num-experts 8 --moe-layer-freq {freq} "
            "--moe-token-dispatcher-type alltoall")
    if expected is None:
        with pytest.raises(InputError) as exc:
            _import(text, "dgx-h100", 1)
        assert exc.value.field == "--moe-layer-freq"
        return
    moe = _import(text, "dgx-h100", 1).scenario["model"]["moe"]
    assert {k: moe[k] for k in expected} == expected and ("every" in moe) == ("every" in expected)


@pytest.mark.parametrize("extra, field", [
    ("--recompute-granularity selective --recompute-modules mlp", "--recompute-modules"),
    ("--recompute-granularity selective --recompute-modules mla_up_proj", "--recompute-modules"),  # not MLA
    ("--exp-avg-dtype bf16", "--exp-avg-dtype / --exp-avg-sq-dtype"),       # the other moment fp32
    ("--exp-avg-dtype fp8 --exp-avg-sq-dtype fp8", "--exp-avg-dtype / --exp-avg-sq-dtype"),
    ("--multi-latent-attention --kv-lora-rank 512 --qk-head-dim 128 --v-head-dim 128", "--qk-pos-emb-head-dim"),
    ("--optimizer-cpu-offload --optimizer-offload-fraction 0.5", "--optimizer-offload-fraction"),
    ("--cpu-offloading --cpu-offloading-num-layers 3", "--cpu-offloading"),
    ("--hierarchical-context-parallel-sizes 2", "--hierarchical-context-parallel-sizes"),
])
def test_what_the_scenario_cannot_state_is_refused_by_name(extra, field):
    text = ("python pretrain_gpt.py --num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 "
            f"--vocab-size 32000 --tokenizer-type NullTokenizer --bf16 {extra}")
    with pytest.raises(InputError) as exc:
        _import(text, "dgx-h100", 1)
    assert exc.value.field == field


def test_dispatcher_optimizer_offload_and_hierarchical_cp():
    base = ("python pretrain_gpt.py --num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 "
            "--vocab-size 32000 --tokenizer-type NullTokenizer --bf16 ")
    sc = _import(base + "--optimizer-cpu-offload --context-parallel-size 4 --cp-comm-type a2a+p2p "
                 "--hierarchical-context-parallel-sizes 2 2", "dgx-h100", 1).scenario
    assert sc["parallel"]["offload"] == {"optimizer": True} and sc["parallel"]["hierarchical_cp_sizes"] == [2, 2]
    with pytest.raises(InputError) as exc:
        _import(base + "--num-experts 8 --moe-token-dispatcher-type allgather", "dgx-h100", 1)
    assert exc.value.field == "--moe-token-dispatcher-type"
    # left out, Megatron runs its default allgather: the same job as the refused one (it was alltoall)
    with pytest.raises(InputError) as exc:
        _import(base + "--num-experts 8", "dgx-h100", 1)
    assert exc.value.field == "--moe-token-dispatcher-type" and "allgather" in str(exc.value)


@pytest.mark.parametrize("flags, field", [
    ("--num-experts 8 --moe-token-dispatcher-type alltoall --moe-layer-recompute", "--moe-layer-recompute"),
    ("--fp8-format hybrid --first-last-layers-bf16 --num-layers-at-start-in-bf16 1", "--first-last-layers-bf16"),
    ("--fp8-format hybrid --fp8-param-gather", "--fp8-param-gather"),
])
def test_flags_that_change_the_step_and_were_read_as_no_effect_are_refused(flags, field):
    """--moe-layer-recompute imported as recompute none, --first-last-layers-bf16 as all-FP8 and
    --fp8-param-gather as BF16 parameters, with no note; each is now exit 2 naming it."""
    base = ("python pretrain_gpt.py --num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 "
            "--vocab-size 32000 --tokenizer-type NullTokenizer --bf16 ")
    with pytest.raises(InputError) as exc:
        _import(base + flags, "dgx-h100", 1)
    assert exc.value.field == field


def _ds(cfg):
    import json
    return finish(import_text("deepspeed-json", json.dumps(cfg), "ds.json", cluster="dgx-h100", nodes=1),
                  ["model.preset=llama3-8b"]).scenario


def test_deepspeed_cpu_offload_maps_to_parallel_offload():
    """offload_optimizer / offload_param device cpu (DeepSpeed's ZeRO-Offload config) were refused as
    'offload is not modelled yet'; NVMe stays refused by name."""
    base = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": True}}
    sc = _ds({**base, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}})
    assert sc["parallel"]["offload"] == {"optimizer": True}
    sc = _ds({**base, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"},
                                            "offload_param": {"device": "cpu"}}})
    assert sc["parallel"]["offload"] == {"optimizer": True, "params": True}
    for zero in ({"stage": 3, "offload_param": {"device": "nvme"}}, {"stage": 2, "offload_param": {"device": "cpu"}}):
        with pytest.raises(InputError) as exc:
            _ds({**base, "zero_optimization": zero})
        assert exc.value.field == "zero_optimization.offload_param.device"


def test_deepspeed_auto_values_are_stated_in_the_notes():
    """The HF Trainer template's "auto" batch sizes and bf16/fp16 became micro-batch 1 and bf16 without a
    word; every assumed value is now a note naming the --set that gives the run's."""
    import json
    cfg = {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
           "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}, "zero_optimization": {"stage": 3}}
    res = import_text("deepspeed-json", json.dumps(cfg), "ds.json", cluster="dgx-h100", nodes=1)
    notes = " ".join(res.notes)
    assert "assumed micro-batch 1, global batch 8" in notes and "--set parallel.micro_batch=N" in notes
    assert "assumed bf16" in notes and "--set training.dtype" in notes
    plain = import_text("deepspeed-json", json.dumps({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2,
                                                      "bf16": {"enabled": True}}), "ds.json", cluster="dgx-h100",
                        nodes=1)
    assert not any("assumed" in n for n in plain.notes)


def test_a_model_named_beside_a_file_that_describes_one_is_refused():
    """--model / --hf-config replaced the model a Megatron command line or a torchtitan flavor describes
    without a word; they are for files that do not describe one."""
    line = ("torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
            "--ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention --num-query-groups 8 "
            "--swiglu --untie-embeddings-and-output-weights --seq-length 8192 --padded-vocab-size 128256 --bf16")
    res = import_text("megatron-args", line, "train.sh", cluster="dgx-h100")
    with pytest.raises(InputError) as exc:
        finish(res, [], model="llama3-70b")
    assert exc.value.field == "--model" and "layers" in exc.value.allowed
    res = import_text("megatron-args", line, "train.sh", cluster="dgx-h100")
    assert finish(res, [], model="llama3-8b").scenario["model"]["preset"] == "llama3-8b"   # the same model
    toml = '[model]\nname = "llama3"\nflavor = "8B"\n[training]\nseq_len = 8192\n'
    res = import_text("torchtitan-toml", toml, "job.toml", cluster="dgx-h100", nodes=1)
    with pytest.raises(InputError) as exc:
        finish(res, [], hf_config="tests/importers/hf_configs/Qwen3-8B/config.json")
    assert exc.value.field == "--hf-config"


def test_a_second_models_differences_are_named_by_their_scenario_keys():
    """The refusal listed the ModelSpec's own names ("differs in vocab, moe_pattern"); the user
    writes model.vocab and model.moe.pattern."""
    line = ("python pretrain_gpt.py --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
            "--group-query-attention --num-query-groups 8 --ffn-hidden-size 14336 --swiglu --seq-length 4096 "
            "--vocab-size 32000 --tokenizer-type NullTokenizer --untie-embeddings-and-output-weights "
            "--normalization RMSNorm --disable-bias-linear --position-embedding-type rope --num-experts 8 "
            "--moe-router-topk 2 --moe-layer-freq 2 --moe-token-dispatcher-type alltoall --bf16")
    res = import_text("megatron-args", line, "train.sh", cluster="dgx-h100", nodes=8)
    with pytest.raises(InputError) as exc:
        finish(res, [], hf_config="tests/importers/hf_configs/Mixtral-8x7B-v0.1/config.json")
    differ = str(exc.value).split("differs in ")[1].split(";")[0].split(")")[0].split(", ")
    assert "model.moe.pattern" in differ or "model.moe.every" in differ, differ
    assert all(k.startswith("model.") for k in differ) and not any("moe_" in k for k in differ), differ


def test_a_refused_moe_layer_freq_is_shown_as_written():
    """The reader split a quoted ")" off as a bash array's end: the value came back '([1]*2+[0]*1 ) *2'.
    (A pattern of the wrong length: 9 entries for 6 layers.)"""
    text = ("python pretrain_gpt.py --num-layers 6 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 "
            "--vocab-size 32000 --tokenizer-type NullTokenizer --num-experts 8 --moe-layer-freq \"([1]*2+[0]*1)*3\" "
            "--moe-token-dispatcher-type alltoall")
    with pytest.raises(InputError) as exc:
        _import(text, "dgx-h100", 1)
    assert exc.value.field == "--moe-layer-freq" and exc.value.value == "([1]*2+[0]*1)*3"
