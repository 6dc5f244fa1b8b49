"""Megatron-LM's arguments -> a clustersim scenario: the one place that knows Megatron's names.

Both the ``arguments`` block of a training log and a launch command line (or a file of
arguments, or a shell script) end up as ``{dest: value}`` with Megatron's own attribute names
(``tensor_model_parallel_size``, the argparse ``dest`` of ``--tensor-model-parallel-size``;
megatron/training/arguments.py), and ``scenario_from_args`` maps them through one table.

Arguments fall in four groups:

* mapped onto scenario fields (``MAPPED`` and the code of ``scenario_from_args``);
* changing the model or the layout in a way clustersim cannot express (``UNSUPPORTED``): set to
  anything but their neutral value, they are an InputError naming them (exit 2);
* known and without effect on a step's time or memory in clustersim (``NO_EFFECT`` names and
  prefixes: data paths, learning rate, logging, checkpointing, kernel fusion switches, ...);
* anything else: listed as unknown (JSON ``unknown_args`` and stderr), not fatal.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clustersim.errors import InputError
from clustersim.importers.common import check_nodes, cluster_gpus_per_node
from clustersim.importers.megatron_later import later_fields
from clustersim.importers.megatron_moe import DS_MOE_ARGS, MOE_MAPPED, deepspeed_launch, moe_fields
from clustersim.importers.megatron_parse import (
    FLAG_DEST,
    MegatronArgs,
    int_arg,
    neutral,
    neutral_or_one,
    size_arg,
)
from clustersim.importers.megatron_split import (
    PIPELINE_SPLIT_ARGS,
    check_split,
    check_split_asserts,
    partition_method,
    pipeline_split,
)
from clustersim.parallel.layout import CP_COMMS
from clustersim.parallel.split import weighted_counts

# -- the mapping ------------------------------------------------------------------------------

# name -> (what it changes, is its value harmless?) for model/layout arguments clustersim cannot
# express; the importer stops naming them
UNSUPPORTED: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "hybrid_override_pattern": ("a hybrid Mamba/attention model", neutral),
    "is_hybrid_model": ("a hybrid Mamba/attention model", neutral),
    "num_distributed_optimizer_instances": ("a partially sharded distributed optimizer", neutral_or_one),
    "heterogeneous_layers_config_path": ("heterogeneous layers", neutral),
    "heterogeneous_layers_config_encoded_json": ("heterogeneous layers", neutral),
    "linear_attention_freq": ("linear-attention layers", neutral),
    "window_size": ("sliding-window attention", neutral),
    # a fork's per-stage layer list (Iluvatar's DeepSparkHub Megatron): dropped, it ran the even split
    "num_layers_per_stage": ("a pipeline split of a Megatron fork (write it as parallel.layers_per_stage)", neutral),

    "num_experts_per_layer": ("per-layer expert counts", neutral),
    # Megatron-Core: the shared expert computed during the dispatch all-to-all (moe_layer.py); clustersim
    # runs it after the combine
    "moe_shared_expert_overlap": ("the shared expert overlapped with the dispatch all-to-all (clustersim runs "
                                  "it after the combine)", neutral),
    # Megatron <= 0.9: the experts split over tp x ep instead of expert TP (transformer_config.py)
    "moe_extended_tp": ("extended tensor parallelism of the experts (Megatron <= 0.9; write it as "
                        "--expert-tensor-parallel-size)", neutral),
    # Megatron-Core's layer-wise offload (megatron/core/transformer/transformer_config.py
    # cpu_offloading_num_layers, < num_layers): activations and weights of some layers; the scenario's
    # parallel.offload.activations moves every layer's activations, so it is not the same job
    "cpu_offloading": ("the activations and weights of --cpu-offloading-num-layers layers offloaded to the CPU "
                       "(parallel.offload.activations offloads every layer's activations)", neutral),
    # each changes what the step computes or holds, and was read as having no effect
    "moe_layer_recompute": ("recompute of the whole MoE layer (as --recompute-modules moe)", neutral),
    "first_last_layers_bf16": ("the first and last layers in BF16 under FP8", neutral),
    "fp8_param_gather": ("FP8 parameters (their memory and FP8 all-gathers)", neutral),
    "encoder_tensor_model_parallel_size": ("an encoder with its own TP", neutral),
    "standalone_embedding_stage": ("a pipeline stage holding only the embedding", neutral),
    "encoder_pipeline_model_parallel_size": ("an encoder with its own PP", neutral),
}
# arguments mapped by scenario_from_args onto fields the scenario grew later (each beside its mapping
# below); no prefix of NO_EFFECT_PREFIXES may hide one of them
MAPPED_LATER = ("mtp_num_layers", "moe_layer_freq", "multi_latent_attention", "q_lora_rank", "kv_lora_rank",
                "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim", "optimizer_cpu_offload",
                "optimizer_offload_fraction", "recompute_modules", "exp_avg_dtype", "exp_avg_sq_dtype",
                "moe_token_dispatcher_type", "moe_router_num_groups", "moe_router_group_topk",
                "overlap_moe_expert_parallel_comm", "hierarchical_context_parallel_sizes", "grad_reduce_in_bf16",
                "accumulate_allreduce_grads_in_fp32")
# known arguments that change nothing clustersim simulates (data, schedule of the learning rate,
# logging, checkpoints, kernel-fusion switches whose cost is inside the measured efficiencies)
NO_EFFECT_PREFIXES = ("log_", "save", "load", "data_", "tokenizer_", "lr", "min_lr", "weight_decay", "adam_",
                      "sgd_", "eval_", "wandb_", "tensorboard_", "ckpt_", "train_", "exit_", "init_", "seed",
                      "vocab_file", "merge_file", "split", "num_workers", "profile", "timing_", "one_logger",
                      "straggler_", "rerun_", "inference_", "distributed_timeout", "distributed_backend",
                      "use_checkpoint", "finetune", "pretrained", "clip_grad", "loss_scale", "initial_loss_scale",
                      "min_loss_scale", "hysteresis", "bias_", "masked_softmax", "apply_", "persist_layer_norm",
                      "gradient_accumulation_fusion", "async_", "empty_unused", "no_",
                      "hidden_dropout", "attention_dropout", "normalization", "norm_epsilon", "layernorm_",
                      "position_embedding", "rotary_", "rope_", "add_", "qk_layernorm", "init_method",
                      "max_position_embeddings", "make_vocab_size", "tp_comm_", "calculate_per_token_loss",
                      "check_", "manual_gc", "deterministic", "enable_", "iter_per_epoch", "dataloader",
                      "mock_data", "micro_batch_size_", "fp8_", "fp4_", "num_layers_at_",
                      "reset_", "eod_", "create_attention",
                      "use_rotary", "use_cpu_initialization", "perform_initialization", "local_rank", "rank",
                      "encoder_seq_length", "decoder_seq_length", "params_dtype", "fp16_lm_cross_entropy",
                      "attention_softmax_in_fp32", "skip_", "test_", "valid_", "warmup", "decoupled_",
                      "ft_", "kv_", "moe_aux", "moe_z_loss", "moe_router_load", "moe_input_jitter",
                      "moe_token_drop", "moe_router_pre", "moe_router_score", "moe_router_dtype",
                      "moe_router_bias", "moe_router_enable",
                      "moe_per_layer", "moe_permute", "moe_use_", "moe_enable",
                      "moe_upcycling", "moe_apply", "moe_deepep", "moe_flex",
                      "use_tp_pp_dp_mapping", "num_dataset_builder", "object_storage", "msc_", "yaml_cfg",
                      "config_logger", "result_rejected", "error_injection", "use_dist_ckpt", "dist_ckpt",
                      "async_save", "non_persistent", "auto_detect", "use_persistent", "pretrained_checkpoint",
                      "retro_", "biencoder_", "ict_", "vision_", "img_", "patch_", "classes_", "dino_",
                      "head_lr", "swin_", "mask_", "titles_", "query_", "evidence_", "indexer_", "block_data",
                      "embedding_path", "bert_", "t5_", "use_one_sent", "short_seq", "reranker", "sft",
                      "mscale", "original_max", "beta_", "cuda_graph",
                      "external_cuda_graph", "te_", "use_te", "fp32_residual", "apply_residual",
                      "openai_gelu", "squared_relu", "onnx_", "use_pytorch_profiler", "record_memory",
                      "memory_snapshot", "nvtx_", "barrier_", "decrease_batch_size", "global_batch_size_",
                      "world_size_", "lazy_mpu", "use_ring_exchange", "ddp_average", "ddp_num_buckets",
                      "ddp_pad", "delay_wgrad", "overlap_param_gather_with", "align_", "use_custom_fsdp_",
                      "suggested_communication", "check_weight_hash", "run_workload", "main_grads",
                      "main_params", "use_precision_aware", "store_param_remainders", "mamba_", "hybrid_",
                      "spec", "use_legacy_static", "download_", "cache_", "hf_", "trust_remote", "legacy_",
                      "moe_router_force", "moe_router_topk_scaling", "expert_", "disable_", "attention_backend_",
                      "replication", "sharp", "nccl_", "high_priority", "use_sharp", "ub_", "fim_", "wgrad_",
                      "tiktoken_", "special_tokens", "image_tag", "inprocess_", "timers", "heterogeneous_",
                      "short_", "pipeline_model_parallel_split_rank", "use_mp_args", "use_flash_attn_",
                      "async_tensor", "kitchen_", "muon_", "rl_", "grpo_")
NO_EFFECT = {"bf16", "fp16", "fp8", "fp4", "iteration", "consumed_train_samples", "consumed_valid_samples",
             "skipped_train_samples", "padded_vocab_size", "world_size", "data_parallel_size", "swiglu", "glu_activation",
             "group_query_attention", "untie_embeddings_and_output_weights", "transformer_impl",
             "use_legacy_models", "use_mcore_models", "use_flash_attn", "attention_backend", "optimizer",
             "recompute_granularity", "recompute_method", "recompute_num_layers", "recompute_activations",
             "checkpoint_activations", "distribute_saved_activations", "distribute_checkpointed_activations",
             "checkpoint_num_layers", "use_distributed_optimizer", "use_torch_fsdp2", "use_custom_fsdp",
             "use_megatron_fsdp", "data_parallel_sharding_strategy", "overlap_grad_reduce", "overlap_p2p_comm",
             "overlap_p2p_comm_warmup_flush",
             "overlap_param_gather", "tp_comm_overlap", "ddp_bucket_size", "sequence_parallel",
             "virtual_pipeline_model_parallel_size", "num_layers_per_virtual_pipeline_stage",
             "num_virtual_stages_per_pipeline_rank", "micro_batch_size", "global_batch_size", "num_layers",
             "encoder_num_layers", "decoder_num_layers", "hidden_size", "num_attention_heads", "num_query_groups",
             "ffn_hidden_size", "kv_channels", "seq_length", "vocab_size", "num_experts", "moe_router_topk",
             "moe_ffn_hidden_size", "moe_expert_capacity_factor", "tensor_model_parallel_size",
             "pipeline_model_parallel_size", "context_parallel_size", "expert_model_parallel_size",
             "expert_tensor_parallel_size", "cp_comm_type", "deepspeed", "zero_stage", "deepspeed_config",
             "tokenizer_type", "tokenizer_model", "use_dist_ckpt", "no_load_optim", "exit_on_missing_checkpoint",
             "hidden_act", "microbatch_group_size_per_vp_stage", "microbatch_group_size_per_virtual_pipeline_stage", "activation_func", "dataloader_type", "bias_activation_fusion",
             "qk_layernorm", "test_mode", "model_name", "use_rope_scaling", "rotary_base", "rotary_percent",
             "rotary_interleaved", "rotary_seq_len_interpolation_factor", "position_embedding_type",
             "add_qkv_bias", "train_samples", "train_iters", "log_interval", "eval_interval", "eval_iters",
             "save_interval", "micro_batch_size_per_gpu", "adam_beta1", "adam_beta2", "adam_eps", "init_method_std",
             "clip_grad", "weight_decay", "lr", "min_lr", "lr_decay_style", "lr_warmup_fraction", "lr_warmup_iters",
             "lr_decay_iters", "split", "data_path", "vocab_file", "merge_file", "mock_data", "distributed_backend",
             "moe_token_dispatcher_type", "moe_aux_loss_coeff", "moe_router_load_balancing_type",
             "batch_size", "clone_scatter_output_in_embedding", "cross_entropy_loss_fusion",
             "defer_embedding_wgrad_compute", "delay_grad_reduce", "delay_param_gather", "deprecated_use_mcore_models",
             "end_weight_decay", "start_weight_decay", "logging_level", "max_tokens_to_oom", "mmap_bin_files",
             "num_channels", "num_classes", "output_bert_embeddings", "override_opt_param_scheduler",
             "rampup_batch_size", "s3_cache_path", "sample_rate", "scatter_gather_tensors_in_pipeline",
             "vocab_extra_ids", "model_parallel_size", "adlr_autoresume", "adlr_autoresume_interval",
             "app_tag_run_name", "app_tag_run_version", "retriever_report_topk_accuracies", "retriever_score_scaling",
             "retriever_seq_length", "standalone_embedding_stage", "num_key_value_heads",
             *PIPELINE_SPLIT_ARGS, "pp_partition_method", "pad_vocab_size_to", *MAPPED_LATER,
             *MOE_MAPPED, *DS_MOE_ARGS}
# the mapped arguments that change the simulated step (a value clustersim cannot read is refused, not
# defaulted): the model's shape, the layout, the batch, recompute, precision recipe, ZeRO
COST_ARGS = frozenset({
    "num_layers", "encoder_num_layers", "decoder_num_layers", "hidden_size", "num_attention_heads",
    "num_query_groups", "num_key_value_heads", "ffn_hidden_size", "kv_channels", "seq_length", "vocab_size",
    "num_experts", "moe_router_topk", "moe_ffn_hidden_size", "moe_expert_capacity_factor",
    "moe_pad_expert_input_to_capacity", "moe_shared_expert_intermediate_size", *DS_MOE_ARGS, "tensor_model_parallel_size", "pipeline_model_parallel_size",
    "context_parallel_size", "expert_model_parallel_size", "expert_tensor_parallel_size", "cp_comm_type",
    "virtual_pipeline_model_parallel_size", "num_layers_per_virtual_pipeline_stage",
    "num_virtual_stages_per_pipeline_rank", "micro_batch_size", "global_batch_size", "micro_batch_size_per_gpu",
    "batch_size", "recompute_granularity", "recompute_method", "recompute_num_layers", "checkpoint_num_layers",
    "zero_stage", "hidden_act", "activation_func", "model_parallel_size", "fp8", "fp4", "glu_activation",
    "padded_vocab_size", "pad_vocab_size_to", "rampup_batch_size"})
# Megatron-DeepSpeed's --glu-activation (megatron/model/glu_activations.py GLU_ACTIVATIONS): the gated MLPs
GLU_ACTS = {"geglu": "geglu", "swiglu": "swiglu"}
RECOMPUTE_METHODS = ("uniform", "block")   # --recompute-method choices (megatron/training/arguments.py)
KNOWN_HF_VOCABS = ((r"llama-?3", 128256), (r"llama-?2", 32000), (r"mixtral|mistral-7b", 32000), (r"gpt-?2", 50257),
                   (r"qwen2", 151936), (r"deepseek-v3", 129280))


def known(name: str) -> bool:
    return name in NO_EFFECT or name in UNSUPPORTED or name.startswith(NO_EFFECT_PREFIXES)


def supports(path: str) -> bool:
    """Whether the scenario file has field ``path`` (sections grow as other parts land)."""
    from pydantic import BaseModel

    from clustersim.scenario import ScenarioFile
    model: Any = ScenarioFile
    for part in path.split("."):
        fields = getattr(model, "model_fields", {})
        if part not in fields:
            return False
        ann = fields[part].annotation
        model = next((a for a in getattr(ann, "__args__", (ann,)) if isinstance(a, type) and issubclass(a, BaseModel)),
                     None)
    return True


@dataclass
class MappedScenario:
    scenario: dict[str, Any]
    framework: str
    unknown: list[str]
    notes: list[str]


def matching_preset(model: dict[str, Any]) -> str | None:
    """The model preset these fields describe exactly, if any (it names the imported model)."""
    from clustersim.scenario import model_from_fields
    from clustersim.workload.presets import MODEL_PRESETS
    try:
        spec = model_from_fields("x", model)
    except (KeyError, TypeError):
        return None
    for name, fields in MODEL_PRESETS.items():
        if model_from_fields("x", fields) == spec:
            return name
    return None


def framework_of(a: MegatronArgs) -> str:
    """megatron-core, unless the arguments say the legacy model or no Transformer Engine ran
    (megatron/training/arguments.py: --use-legacy-models, --transformer-impl local; logs from
    before Megatron-Core have neither and run the legacy model)."""
    v = a.values
    if v.get("deepspeed") is True:
        return "deepspeed-bf16" if _bf16_optimizer(a) else "deepspeed"
    if "use_legacy_models" in v:
        legacy = bool(v["use_legacy_models"])
    elif "use_mcore_models" in v:
        legacy = not bool(v["use_mcore_models"])
    elif "transformer_impl" in v:
        legacy = False
    else:
        legacy = a.source == "arguments block"  # a log from before Megatron-Core
    if v.get("transformer_impl") == "local" and not v.get("use_flash_attn"):
        legacy = True
    return "megatron-legacy" if legacy else "megatron-core"


def _vocab(a: MegatronArgs, tp: int, notes: list[str]) -> int | None:
    if a.get("padded_vocab_size"):
        return int_arg(a, "padded_vocab_size")
    if a.get("pad_vocab_size_to"):   # Megatron-DeepSpeed (BigScience): pad the vocabulary to exactly N rows
        return int_arg(a, "pad_vocab_size_to")
    raw = None
    tok = str(a.get("tokenizer_type", ""))
    if not tok and a.script.rsplit("/", 1)[-1] == "pretrain_gpt.py":
        # pretrain_gpt.py: pretrain(..., args_defaults={'tokenizer_type': 'GPT2BPETokenizer'})
        tok = "GPT2BPETokenizer"
        notes.append("no --tokenizer-type: pretrain_gpt.py's default GPT2BPETokenizer")
    if a.get("vocab_size"):
        raw = int_arg(a, "vocab_size") + (1 if tok == "NullTokenizer" else 0)  # NullTokenizer adds an EOD token
    elif tok == "GPT2BPETokenizer":
        raw = 50257                                  # GPT-2 BPE: 50,257 tokens (HF gpt2 config.json vocab_size)
    else:
        name = str(a.get("tokenizer_model") or a.get("tokenizer_name_or_path") or "").lower()   # Megatron-DeepSpeed
        raw = next((v for pat, v in KNOWN_HF_VOCABS if re.search(pat, name)), None)
    if raw is None:
        return None
    multiple = (int_arg(a, "make_vocab_size_divisible_by", 128) or 128) * tp
    padded = math.ceil(raw / multiple) * multiple    # megatron/training/tokenizer: _vocab_size_with_padding
    notes.append(f"vocabulary {raw} padded to {padded} (multiple of make_vocab_size_divisible_by x tp)")
    return padded


def _recompute(a: MegatronArgs, layers: int, pp: int, notes: list[str]) -> dict[str, Any]:
    gran = a.get("recompute_granularity")
    if a.get("recompute_activations"):
        gran = "selective"
    if a.get("checkpoint_activations") and gran is None:      # Megatron-LM 2021: every layer, full
        gran = "full"
    if gran in (None, "None"):
        return {"recompute": "none"}
    if gran == "selective":
        return {"recompute": "selective"}
    if gran != "full":
        raise InputError("--recompute-granularity", gran, "full or selective")
    if a.get("recompute_method") in (None, "None") and a.get("recompute_granularity") == "full":
        # Megatron-Core refuses full recompute without a method (TransformerConfig.__post_init__:
        # "recompute_method must be block or uniform"); the legacy transformer raised at the first step
        raise InputError("--recompute-method", None, f"{' or '.join(RECOMPUTE_METHODS)} with --recompute-granularity "
                         "full (Megatron refuses full recompute without a method)")
    method = a.get("recompute_method") or "uniform"   # --checkpoint-activations (2021): every layer
    if method not in RECOMPUTE_METHODS:
        raise InputError("--recompute-method", method, RECOMPUTE_METHODS)
    n = int_arg(a, "recompute_num_layers", 1, lo=0)
    if n is None:      # printed as None in a log's arguments block: Megatron's default
        n = 1
    if n == 0:         # block over no layer recomputes none; uniform groups of 0 layers never end
        if method == "uniform":
            raise InputError("--recompute-num-layers", 0, "a whole number >= 1 with --recompute-method uniform "
                             "(0 only with block: no layer recomputed)")
        return {"recompute": "none"}
    per_stage = math.ceil(layers / pp)
    # uniform: every layer recomputed, in groups of n; block: the first n layers of each stage
    # (megatron/core/transformer/transformer_block.py _checkpointed_forward)
    if method == "uniform" and n > 1 and supports("parallel.recompute_method"):
        return {"recompute": "full", "recompute_method": "uniform", "recompute_num_layers": min(n, per_stage)}
    if method == "uniform" or n >= per_stage:
        return {"recompute": "full"}
    if supports("parallel.recompute_method"):
        return {"recompute": "full", "recompute_method": "block", "recompute_num_layers": n}
    raise InputError("--recompute-method", f"block with --recompute-num-layers {n} of {per_stage} layers per stage",
                     "uniform, or block covering every layer of a stage (partial recompute is not modelled yet)")


def _bf16_optimizer(a: MegatronArgs) -> bool:
    """Megatron-DeepSpeed with --bf16 and --zero-stage 0: DeepSpeed wraps the optimizer in its
    BF16_Optimizer (framework deepspeed-bf16; BigScience tr11-176B-ml.slurm: "bf16 must use z0! it
    implements its own zero stage 1 equivalent"; deepspeed/runtime/engine.py _configure_optimizer)."""
    return bool(a.values.get("deepspeed")) and bool(a.get("bf16")) and a.get("zero_stage") is not None \
        and int(a.get("zero_stage")) == 0


def _zero_stage(a: MegatronArgs) -> int:
    if a.get("use_torch_fsdp2"):
        return 3
    if a.get("use_custom_fsdp") or a.get("use_megatron_fsdp"):
        return {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}.get(
            str(a.get("data_parallel_sharding_strategy", "optim_grads_params")), 3)
    if _bf16_optimizer(a):     # BF16_Optimizer shards its optimizer states over dp (its own ZeRO-1)
        return 1
    if a.values.get("deepspeed") and a.get("zero_stage") is not None:   # Megatron-DeepSpeed
        return int(a.get("zero_stage"))
    return 1 if a.get("use_distributed_optimizer") else 0


def _dtype(a: MegatronArgs) -> str:
    if a.get("bf16") and a.get("fp16"):   # validate_args: "if args.fp16: assert not args.bf16"
        raise InputError("--bf16 and --fp16", "both", "one of them: Megatron-LM refuses both together")
    if a.get("fp4") not in (None, False, "None"):
        return "fp4"
    if a.get("fp8") not in (None, False, "None"):
        return "fp8"
    if a.get("bf16"):
        return "bf16"
    if a.get("fp16"):
        return "fp16"
    return "fp32"


def _check_unsupported(a: MegatronArgs, num_layers: int, ffn: int | None) -> None:
    for name, (what, harmless) in UNSUPPORTED.items():
        if name not in a.values:
            continue
        value = a.values[name]
        if not harmless(value):
            raise InputError(f"--{name.replace('_', '-')}", value,
                             f"its neutral value: it sets {what}, which clustersim does not model yet")


def _check_resolved(a: MegatronArgs) -> None:
    """A flag that changes the simulated cost and whose value the reader could not resolve (a shell
    variable the file does not set, or one set in a branch it cannot decide) is refused by name."""
    for flag in a.unresolved:
        dest = FLAG_DEST.get(flag, (flag.replace("-", "_"), None))[0]
        if dest in COST_ARGS or dest in MAPPED_LATER or dest in PIPELINE_SPLIT_ARGS:
            why = ("set in a branch whose condition reads the job's environment or the file system, which "
                   "clustersim does not decide" if flag in a.undecided else "a shell variable the file does not set")
            raise InputError(f"--{flag}", "$...", f"a value the file states: this one is {why}; it changes "
                                                  "the simulated cost, so it is not left at a default")


def scenario_from_args(a: MegatronArgs, cluster: str | None, nodes: int | None, name: str) -> MappedScenario:
    """The scenario dict these arguments describe; InputError names what is missing or unsupported."""
    _check_resolved(a)
    notes: list[str] = []
    layers = int_arg(a, "num_layers") or int_arg(a, "decoder_num_layers") or int_arg(a, "encoder_num_layers")
    for what, value, flag in (("the layer count", layers, "--num-layers"),
                              ("the hidden size", a.get("hidden_size"), "--hidden-size"),
                              ("the attention heads", a.get("num_attention_heads"), "--num-attention-heads"),
                              ("the sequence length", a.get("seq_length") or a.get("encoder_seq_length"),
                               "--seq-length")):
        if value is None:
            raise InputError(flag, None, f"{what} (the arguments do not say it); add it to the file")
    assert layers is not None
    tp = size_arg(a, "tensor_model_parallel_size" if a.get("tensor_model_parallel_size") is not None
                  else "model_parallel_size")
    pp = size_arg(a, "pipeline_model_parallel_size")
    cp = size_arg(a, "context_parallel_size")
    ep = size_arg(a, "expert_model_parallel_size")
    hidden = int_arg(a, "hidden_size")
    heads = int_arg(a, "num_attention_heads")
    swiglu = bool(a.get("swiglu"))
    ffn = int_arg(a, "ffn_hidden_size")
    if ffn is None:  # megatron/training/arguments.py validate_args
        ffn = int((4 * hidden * 2 / 3) / 64) * 64 if swiglu else 4 * hidden
    _check_unsupported(a, layers, ffn)
    model: dict[str, Any] = {"layers": layers, "hidden": hidden, "heads": heads,
                             "ffn_hidden": ffn, "ffn_act": "swiglu" if swiglu else "gelu",
                             "seq_len": int_arg(a, "seq_length") or int_arg(a, "encoder_seq_length"),
                             "tie_embeddings": not bool(a.get("untie_embeddings_and_output_weights"))}
    kv = int_arg(a, "kv_channels")
    if kv and kv * heads != hidden and not a.get("multi_latent_attention"):
        model["head_dim"] = kv            # --kv-channels: the head width (queries heads x kv_channels wide)
    if a.get("qk_layernorm"):
        model["qk_norm"] = True           # --qk-layernorm: a norm over each query and key head
    if a.get("squared_relu"):
        model["ffn_act"] = "squared-relu"  # --squared-relu (Nemotron-4's MLP)
    glu = a.get("glu_activation")   # Megatron-DeepSpeed (BigScience, GLM-130B's LargeScale): a gated MLP
    if not neutral(glu):
        if glu not in GLU_ACTS:
            raise InputError("--glu-activation", glu, "geglu or swiglu (the gated MLPs clustersim models; liglu and "
                             "reglu are not)")
        model["ffn_act"] = GLU_ACTS[glu]
    if a.get("group_query_attention") and a.get("num_query_groups"):
        model["kv_heads"] = int_arg(a, "num_query_groups")
    elif a.get("num_key_value_heads") and a.get("num_key_value_heads") != heads:   # Megatron-DeepSpeed's GQA
        model["kv_heads"] = int_arg(a, "num_key_value_heads")
    vocab = _vocab(a, tp, notes)
    if vocab is not None:   # else left out: importers.finish asks for it after --set / --model / --hf-config
        model["vocab"] = vocab
    moe = moe_fields(a, ffn, notes)
    if moe is not None:
        model["moe"] = moe
    if deepspeed_launch(a):   # Megatron-DeepSpeed's expert parallelism (megatron/arguments.py), read with experts only
        ep = size_arg(a, "moe_expert_parallel_size") if moe is not None else 1
    etp = int_arg(a, "expert_tensor_parallel_size", lo=1)
    parallel: dict[str, Any] = {"tp": tp, "pp": pp, "cp": cp, "ep": ep,
                                "sequence_parallel": bool(a.get("sequence_parallel")) and tp > 1,
                                "micro_batch": size_arg(a, "micro_batch_size"),
                                "zero_stage": _zero_stage(a),
                                "overlap_grad_reduce": bool(a.get("overlap_grad_reduce")),
                                "overlap_param_gather": bool(a.get("overlap_param_gather")),
                                "tp_comm_overlap": bool(a.get("tp_comm_overlap"))}
    if etp and etp != tp:
        if not supports("parallel.expert_tp"):
            raise InputError("--expert-tensor-parallel-size", etp, f"the tensor-parallel size ({tp}): clustersim "
                             "does not model a separate expert TP yet")
        parallel["expert_tp"] = etp
    if a.get("cp_comm_type") not in (None, "p2p", ["p2p"]) and supports("parallel.cp_comm"):
        cp_comm = a.get("cp_comm_type")
        if cp_comm not in CP_COMMS:   # named as the flag (the scenario's field was named)
            raise InputError("--cp-comm-type", cp_comm, f"{', '.join(CP_COMMS)} (parallel.cp_comm; "
                             "all_gather and per-layer lists are not modelled)")
        parallel["cp_comm"] = cp_comm
    if a.get("ddp_bucket_size"):
        parallel["dp_bucket_params"] = int_arg(a, "ddp_bucket_size")
    parallel.update(_recompute(a, layers, pp, notes))
    split = pipeline_split(a, notes)
    method = partition_method(a)
    if a.values.get("deepspeed") and not split and pp > 1 and layers % pp and method in ("", "type:transformer"):
        # Megatron-DeepSpeed's GPTModelPipe partitions 'type:transformer' by default: DeepSpeed's
        # partition_balanced over the transformer layers gives the extra layers to the first stages
        # (deepspeed/runtime/utils.py; 70 layers on 8: 9 x 6, 8 x 2), where clustersim centres them
        split = {"layers_per_stage": list(weighted_counts(layers, pp, 0, 0))}
        notes.append(f"--pp-partition-method {method or 'type:transformer (the default)'}: DeepSpeed's balanced "
                     f"split, the extra layers on the first stages {split['layers_per_stage']}")
    parallel.update(split)
    vpp = int_arg(a, "virtual_pipeline_model_parallel_size") or int_arg(a, "num_virtual_stages_per_pipeline_rank")
    per_vstage = int_arg(a, "num_layers_per_virtual_pipeline_stage")
    check_split_asserts(a, layers, pp, vpp, per_vstage, split)
    if not vpp and per_vstage:   # the embedding and loss count in the per-rank share (arguments.py validate_args)
        counted = layers + int(bool(split.get("account_for_embedding"))) + int(bool(split.get("account_for_loss")))
        per_stage, rem = divmod(counted, pp)
        if rem or per_stage % per_vstage:  # validate_args asserts both before dividing
            raise InputError("--num-layers-per-virtual-pipeline-stage", per_vstage,
                             f"a divisor of the {counted / pp:g} layers per pipeline stage ({counted} layers over pp "
                             f"{pp}): Megatron-LM asserts layers per stage % layers per virtual stage == 0")
        vpp = per_stage // per_vstage
    if not vpp and split.get("pipeline_layout"):  # the layout's stages are pp x virtual stages
        from clustersim.parallel.split import layout_chunks

        try:
            vpp = layout_chunks(split["pipeline_layout"], pp)
        except InputError as exc:
            raise InputError("--pipeline-model-parallel-layout", exc.value, exc.allowed) from None
    # the flag's dest (a log's name) or its own name (a command line); validate_args sets None to pp
    group = a.get("microbatch_group_size_per_vp_stage")
    if group in (None, "None"):
        group = a.get("microbatch_group_size_per_virtual_pipeline_stage")
    if vpp and vpp > 1 and group not in (None, "None", pp):
        # Megatron-Core's interleaved warm-up in groups of N micro-batches (schedules.py
        # get_pp_rank_microbatches): clustersim's interleaved schedule runs groups of pp
        raise InputError("--microbatch-group-size-per-virtual-pipeline-stage", group,
                         f"the pipeline size ({pp}): interleaved groups of another size are not modelled")
    if vpp and vpp > 1:
        parallel.update(schedule="interleaved-1f1b", virtual_stages=vpp)
        # the interleaved schedule overlaps its sends unless --no-overlap-p2p-communication (the
        # non-interleaved one always waits for them: clustersim.frameworks.blocking_sends)
        if a.get("overlap_p2p_comm") not in (None, "None"):
            parallel["overlap_p2p_comm"] = not neutral(a.get("overlap_p2p_comm"))
        if not neutral(a.get("overlap_p2p_comm_warmup_flush")):
            # Megatron-LM overlaps the warm-up's and the cool-down's exchanges too; clustersim overlaps the
            # warm-up's and prices the cool-down's sends as blocking (clustersim.frameworks.blocking_from)
            notes.append("--overlap-p2p-communication-warmup-flush: not modelled; clustersim overlaps the interleaved "
                         "warm-up's sends but holds each cool-down backward until its send and receive are done, as "
                         "without the flag (docs/engine.md, Pipeline transfers): the step may come out a little long")
    elif not neutral(a.get("overlap_p2p_comm_warmup_flush")):
        notes.append("--overlap-p2p-communication-warmup-flush: no effect without the interleaved schedule "
                     "(Megatron-LM reads it in forward_backward_pipelining_with_interleaving only)")
    elif pp > 1:
        parallel["schedule"] = "1f1b"
    if split:
        check_split(parallel, layers, int_arg(a, "mtp_num_layers", 0, lo=0) or 0,
                    core_weights=not neutral(a.get("account_for_embedding_in_pipeline_split"))
                    or not neutral(a.get("account_for_loss_in_pipeline_split")))
    training: dict[str, Any] = {"dtype": _dtype(a)}
    later_fields(a, model, parallel, training, layers, notes)
    if a.get("rampup_batch_size") not in (None, "None"):
        notes.append(f"batch-size ramp {a.get('rampup_batch_size')}: the scenario takes the final global batch")
    # --fp8-recipe tensorwise|delayed|mxfp8|blockwise, --fp4-recipe nvfp4 (megatron/training/arguments.py)
    from clustersim.compute.precision import FP4_RECIPES, FP8_RECIPES
    for kind, recipes in (("fp8", FP8_RECIPES), ("fp4", FP4_RECIPES)):
        recipe = a.get(f"{kind}_recipe")
        if training["dtype"] == kind and recipe in recipes:
            training[f"{kind}_recipe"] = recipe
    opt = str(a.get("optimizer", "adam")).lower()
    training["optimizer"] = "sgd" if opt == "sgd" else "adam"
    if opt not in ("adam", "sgd", "adamw"):
        notes.append(f"optimizer {opt} is priced as Adam")
    backend = str(a.get("attention_backend", "")).lower()
    flash_flags = [k for k in a.values if k.startswith("use_flash_attn")]   # Megatron-DeepSpeed: _v1, _v2, _triton
    if a.get("use_flash_attn") or backend.endswith("flash") or any(a.get(k) for k in flash_flags):
        training["attention"] = "flash"
    elif backend.endswith("unfused") or backend.endswith("local"):
        training["attention"] = "standard"
    elif framework_of(a) in ("deepspeed", "deepspeed-bf16"):
        # Megatron-DeepSpeed runs its fused scale-mask-softmax unless a --use-flash-attn flag says
        # otherwise (megatron/model/transformer.py ParallelAttention: flash only with use_flash_attn)
        training["attention"] = "standard"
        notes.append("Megatron-DeepSpeed without --use-flash-attn: its fused-softmax attention (training.attention "
                     "standard)")
    # cluster and size of the job
    world = int_arg(a, "world_size")
    if world is None and a.launcher.get("nproc_per_node") and not a.launcher.get("nnodes") \
            and "nnodes" not in a.unresolved and nodes is None:
        a.launcher["nnodes"] = 1        # torchrun's --nnodes default "1:1" (torch/distributed/run.py)
        notes.append("torchrun without --nnodes: one node (its default)")
    launched = None   # (nodes, ranks per node) of a torchrun launch line
    if world is None and a.launcher.get("nproc_per_node") and a.launcher.get("nnodes"):
        nn = a.launcher["nnodes"]
        if isinstance(nn, str) and ":" in nn:
            nn = int(nn.split(":")[-1])
        launched = (int(nn), int(a.launcher["nproc_per_node"]))
        world = launched[0] * launched[1]
    gpn = cluster_gpus_per_node(cluster, "the arguments never name the GPU type")
    cluster_d: dict[str, Any] = {"preset": cluster}
    if launched is not None and nodes is None and launched[1] != gpn:
        # torchrun placed --nproc-per-node ranks on each of --nnodes nodes: fewer than the node's GPUs
        # is the job as launched (TP may then cross nodes), not world / GPUs per node full nodes
        if launched[1] > gpn:
            raise InputError("--nproc-per-node", launched[1], f"at most {cluster}'s {gpn} GPUs per node")
        cluster_d.update(nodes=launched[0], gpus_per_node=launched[1])
        notes.append(f"torchrun --nproc-per-node {launched[1]} on {launched[0]} nodes: {launched[1]} GPUs per node "
                     "(cluster.gpus_per_node)")
    elif nodes is not None:
        if world is not None:
            # the log's world size was blamed: "cluster.nodes(24) ... (the value the importer read from the log)"
            check_nodes(world, nodes, gpn, cluster, "--nodes")
        cluster_d["nodes"] = nodes
        if world is not None and world != nodes * gpn and world < gpn and nodes == 1:
            cluster_d["gpus_per_node"] = world
    elif world is not None:
        if world % gpn == 0:
            cluster_d["nodes"] = world // gpn
        elif world < gpn:
            cluster_d.update(nodes=1, gpus_per_node=world)
        else:
            raise InputError("--nodes", None, f"the node count: the job ran {world} ranks, not a multiple of "
                             f"{cluster}'s {gpn} GPUs per node")
    else:
        raise InputError("--nodes", None, "the node count of the job (the file says neither the world size nor "
                         "torchrun's --nnodes and --nproc-per-node)")
    world = world or cluster_d["nodes"] * cluster_d.get("gpus_per_node", gpn)
    dp = int_arg(a, "data_parallel_size", lo=1) or world // (tp * pp * cp)
    parallel["dp"] = dp
    gb = int_arg(a, "global_batch_size", lo=1)
    parallel["global_batch"] = gb if gb else parallel["micro_batch"] * dp
    preset = matching_preset(model)
    if preset:
        model = {"name": preset, **model}
    scenario = {"name": name, "framework": framework_of(a), "model": model, "cluster": cluster_d,
                "parallel": parallel, "training": training}
    unknown = sorted(n for n in a.values if not known(n))
    if a.unresolved:
        notes.append("flags with unresolved shell variables ignored (none changes the simulated cost): "
                     + ", ".join(sorted(set(a.unresolved))))
    return MappedScenario(scenario, scenario["framework"], unknown, notes)
