"""Every key of the Hugging Face ``config.json`` families clustersim reads, and what it does with it.

Three kinds (docs/compute.md, "Hugging Face configs"):

* ``MODELLED``: read into a model field (the field is named beside the key);
* ``IRRELEVANT``: does not change the FLOPs, bytes, memory or communication of a training step
  (the reason is given beside the key);
* ``REFUSED``: changes the cost in a way clustersim does not model; a config that sets it to a
  value other than the harmless one stops with exit 2 naming the key (the predicate says which
  values are harmless).

A key that is in none of the tables of the config's family is refused as unknown: clustersim
never drops a key it has not looked at. The per-family reader is clustersim.workload.hf_config.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Harmless = Callable[[Any], bool]


def _zero(value: Any) -> bool:
    return not value


def _false(value: Any) -> bool:
    return value is False or value is None


# -- keys every family shares --------------------------------------------------------------------

COMMON_IRRELEVANT: dict[str, str] = {
    "architectures": "names the model class; the family comes from model_type (or this name when model_type is absent)",
    "model_type": "selects the key table of the family",
    "auto_map": "where the modelling code lives",
    "_attn_implementation_autoset": "a transformers-internal flag saved with some files",
    "transformers_version": "the library version that wrote the file",
    "torch_dtype": "the checkpoint's storage dtype; the training dtype is training.dtype",
    "dtype": "the checkpoint's storage dtype; the training dtype is training.dtype",
    "bos_token_id": "a token id", "eos_token_id": "a token id", "pad_token_id": "a token id",
    "initializer_range": "initialisation only",
    "rms_norm_eps": "a constant inside the norm", "layer_norm_eps": "a constant inside the norm",
    "use_cache": "the inference KV cache",
    "rope_theta": "RoPE's base frequency: the same element-wise work for any value",
    "rope_scaling": "RoPE frequency scaling (linear, llama3, yarn): the same element-wise work",
    "rope_parameters": "rope_theta and rope_scaling in one block, as transformers v5 writes them: the same "
                       "element-wise work",
    "_name_or_path": "the repository or folder the file was saved from (save_pretrained writes it)",
    "max_position_embeddings": "the longest context the positions allow, not the training sequence "
                               "length (a job setting: model.seq_len, default 4096)",
    "attention_bias": "bias vectors of the attention projections: under 0.01% of the parameters, added in the "
                      "GEMM epilogue",
    "mlp_bias": "bias vectors of the dense MLP: under 0.01% of the parameters, added in the GEMM epilogue (routed "
                "experts' biases are moe.expert_bias, set by the family: gpt-oss)",
    "pretraining_tp": "a Llama-1/2 checkpoint detail (slices of the projections), the same GEMMs",
    "output_router_logits": "whether the router logits are returned to the caller",
    "router_aux_loss_coef": "the weight of the load-balancing loss (E floats per token)",
    "norm_topk_prob": "renormalises the top-k router weights (k floats per token)",
    "quantization_config": "the checkpoint's storage format (MXFP4 experts, block FP8); training runs in "
                           "training.dtype",
}

COMMON_MODELLED: dict[str, str] = {
    "num_hidden_layers": "layers",
    "hidden_size": "hidden",
    "num_attention_heads": "heads",
    "num_key_value_heads": "kv_heads",
    "intermediate_size": "ffn_hidden",
    "vocab_size": "vocab",
    "hidden_act": "ffn_act (silu, swish, swiglu -> swiglu; gelu, gelu_new, gelu_pytorch_tanh, gelu_fast -> geglu: "
                  "these families' MLPs are gated)",
    "tie_word_embeddings": "tie_embeddings",
    "head_dim": "head_dim",
    "attention_dropout": "dropout (a rate above 0: true; 0 or null: the family's convention, none for these families)",
    "hidden_dropout": "dropout, as attention_dropout",
}

COMMON_REFUSED: dict[str, tuple[str, Harmless]] = {}

# -- the families ------------------------------------------------------------------------------

# Qwen2, Qwen3 and Qwen3-MoE share their sliding-window keys (HF Qwen2Config / Qwen3Config)
QWEN_WINDOW_IRRELEVANT: dict[str, str] = {
    "max_window_layers": "only read when use_sliding_window is true (refused)",
    "sliding_window": "only read when use_sliding_window is true (refused)",
    "layer_types": "every entry full_attention while use_sliding_window is false",
}
QWEN_WINDOW_REFUSED: dict[str, tuple[str, Harmless]] = {
    "use_sliding_window": ("Qwen's window on the layers from max_window_layers on is not modelled; only false "
                           "is read", _false),
}

# DeepSeek-V2 and DeepSeek-V3 (and Kimi K2) share MLA and DeepSeekMoE and the keys that state them
# (deepseek-ai's configuration_deepseek.py of each repository)
DEEPSEEK_MODELLED: dict[str, str] = {
    "n_routed_experts": "moe.experts", "num_experts_per_tok": "moe.top_k",
    "n_shared_experts": "moe.shared_experts", "moe_intermediate_size": "moe.expert_ffn_hidden",
    "first_k_dense_replace": "moe.first_dense_layers", "n_group": "moe.router_num_groups",
    "moe_layer_freq": "MoE on layers 0, N, 2N, ... past first_k_dense_replace (i % N == 0, "
                      "DeepSeek's modeling_deepseek.py): moe.first_dense_layers / every, else "
                      "moe.pattern",
    "topk_group": "moe.router_group_topk", "kv_lora_rank": "kv_lora_rank (attention mla)",
    "q_lora_rank": "q_lora_rank (null: a plain query projection, DeepSeek-V2-Lite)",
    "qk_nope_head_dim": "qk_nope_head_dim", "qk_rope_head_dim": "qk_rope_head_dim", "v_head_dim": "v_head_dim",
}
DEEPSEEK_IRRELEVANT: dict[str, str] = {
    "aux_loss_alpha": "the weight of the sequence-wise balance loss",
    "seq_aux": "whether that loss is sequence-wise",
    "ep_size": "the expert parallelism of the inference code, not the job's parallel.ep",
    "routed_scaling_factor": "a scale on the routed experts' output",
    "scoring_func": "sigmoid or softmax over the E router logits (E floats per token)",
    "num_key_value_heads": "MLA gives every head its own keys and values (equal to the heads)",
}

# Qwen2-MoE and Qwen3-MoE: the experts and which layers hold them (Qwen2MoeConfig / Qwen3MoeConfig)
QWEN_MOE_MODELLED: dict[str, str] = {
    "num_experts": "moe.experts", "num_experts_per_tok": "moe.top_k",
    "moe_intermediate_size": "moe.expert_ffn_hidden",
    "decoder_sparse_step": "moe.every (layers N-1, 2N-1, ... are MoE)",
    "mlp_only_layers": "the listed layers dense (moe.pattern where every / first_dense_layers cannot state the "
                       "layout)",
}

FAMILIES: dict[str, dict[str, dict[str, Any]]] = {
    "llama": {   # meta-llama/Meta-Llama-3-8B, Llama-3.1-*, Llama-2-*
        "modelled": {},
        "irrelevant": {},
        "refused": {},
    },
    "mistral": {   # mistralai/Mistral-7B-v0.1 (sliding_window 4096), v0.3 (null)
        "modelled": {"sliding_window": "attention_pattern sliding, attention_window (null: full attention)"},
        "irrelevant": {},
        "refused": {},
    },
    "mixtral": {   # mistralai/Mixtral-8x7B-v0.1, Mixtral-8x22B-v0.1
        "modelled": {"num_local_experts": "moe.experts", "num_experts_per_tok": "moe.top_k",
                     "sliding_window": "attention_pattern sliding, attention_window (null: full attention)"},
        "irrelevant": {"router_jitter_noise": "noise on the router logits (E floats per token)"},
        "refused": {},
    },
    "qwen2": {   # Qwen/Qwen2.5-7B, Qwen2.5-72B (model_type qwen2): Llama's layer with Q/K/V biases (no key)
        "modelled": {},
        "irrelevant": {**QWEN_WINDOW_IRRELEVANT,
                       "use_mrope": "Qwen2-VL's multimodal RoPE (rotary sections per position axis): the same "
                                    "element-wise work; the Qwen2.5 text files say false"},
        "refused": dict(QWEN_WINDOW_REFUSED),
    },
    "qwen3": {   # Qwen/Qwen3-8B, Qwen3-32B: QK-norm is part of the architecture (no key)
        "modelled": {},
        "irrelevant": dict(QWEN_WINDOW_IRRELEVANT),
        "refused": dict(QWEN_WINDOW_REFUSED),
    },
    "qwen2_moe": {   # Qwen/Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B: Qwen2's layer (Q/K/V biases) with Qwen-MoE's MLP
        "modelled": dict(QWEN_MOE_MODELLED,
                         shared_expert_intermediate_size="moe.shared_ffn_hidden (one shared expert of this width, "
                                                         "scaled by a sigmoid gate of h weights: Qwen2MoeSparseMoeBlock)"),
        "irrelevant": {**QWEN_WINDOW_IRRELEVANT,
                       "qkv_bias": "bias vectors of the Q/K/V projections (Qwen2MoeConfig: true): under 0.01% of the "
                                   "parameters, added in the GEMM epilogue (as attention_bias)"},
        "refused": dict(QWEN_WINDOW_REFUSED),
    },
    "qwen3_moe": {   # Qwen/Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder-480B-A35B
        "modelled": dict(QWEN_MOE_MODELLED,
                         num_local_experts="moe.experts (the name transformers v5 saves num_experts under)"),
        # Qwen3-Coder-480B-A35B's file also states three keys that transformers' Qwen3-MoE model
        # does not read (its layer always has QK-norm, no Q/K/V bias and no shared expert)
        "irrelevant": {**QWEN_WINDOW_IRRELEVANT,
                       "qkv_bias": "bias vectors of the Q/K/V projections: under 0.01% of the parameters, added in "
                                   "the GEMM epilogue (as attention_bias)"},
        "refused": {**QWEN_WINDOW_REFUSED,
                    "shared_expert_intermediate_size": ("Qwen3-MoE's layer has no shared expert; only 0 or null "
                                                        "is read", _zero),
                    "use_qk_norm": ("Qwen3-MoE's layer always normalises Q and K (qk_norm); only true is read",
                                    lambda v: v is None or v is True)},
    },
    "gpt_oss": {   # openai/gpt-oss-20b, gpt-oss-120b: attention sinks are part of the architecture
        "modelled": {"num_local_experts": "moe.experts", "num_experts_per_tok": "moe.top_k",
                     "experts_per_token": "moe.top_k (must equal num_experts_per_tok)",
                     "intermediate_size": "moe.expert_ffn_hidden (every layer is MoE)",
                     "sliding_window": "attention_window", "layer_types": "attention_pattern sliding, global_every",
                     "swiglu_limit": "activation_clamp (the clamp of the SwiGLU's gate and linear halves: eager "
                                     "kernels before the activation, clustersim.compute.glu_clamp)"},
        "irrelevant": {"initial_context_length": "YaRN's original context (a RoPE constant)",
                       "swiglu_alpha": "the sigmoid's scale inside gpt-oss's SwiGLU (transformers v5 saves it): the "
                                       "same element-wise work"},
        "refused": {},
    },
    "gemma3_text": {   # google/gemma-3-*-pt text_config; sandwich norms are part of the architecture
        "modelled": {"hidden_activation": "ffn_act (gelu_pytorch_tanh -> geglu)",
                     "sliding_window": "attention_window",
                     "sliding_window_pattern": "global_every (Gemma 3: 6)",
                     "_sliding_window_pattern": "global_every (the name transformers >= 4.53 saves "
                                                "sliding_window_pattern under; layer_types wins when given)",
                     "layer_types": "attention_pattern sliding, global_every"},
        "irrelevant": {"query_pre_attn_scalar": "the softmax scale",
                       "rope_local_base_freq": "RoPE's base frequency of the local layers",
                       "cache_implementation": "the inference KV cache",
                       },
        "refused": {"attn_logit_softcapping": ("a tanh over every score, which flash kernels do not fuse the "
                                               "same way; only null is read", _zero),
                    "final_logit_softcapping": ("a tanh over the logits; only null is read", _zero),
                    "use_bidirectional_attention": ("bidirectional attention computes twice the causal "
                                                    "pairs; only false is read", _false)},
    },
    "llama4_text": {   # meta-llama/Llama-4-Scout-17B-16E, Llama-4-Maverick-17B-128E text_config
        "modelled": {"num_local_experts": "moe.experts", "num_experts_per_tok": "moe.top_k",
                     "intermediate_size": "moe.expert_ffn_hidden (routed and shared experts)",
                     "intermediate_size_mlp": "ffn_hidden (the dense layers)",
                     "interleave_moe_layer_step": "moe.every", "moe_layers": "the MoE layers (Llama4TextConfig: replaces "
                     "interleave_moe_layer_step's; moe.every or moe.pattern)",
                     "attention_chunk_size": "attention_pattern chunked, attention_window",
                     "no_rope_layers": "global_every (the NoPE layers attend over the whole sequence)",
                     "use_qk_norm": "qk_norm (an L2 norm of Q and K)",
                     "no_rope_layer_interval": "global_every when no_rope_layers is absent (every N-th layer NoPE)",
                     "layer_types": "checked against no_rope_layers (chunked on the RoPE layers, full on the NoPE "
                                    "ones), as transformers >= 4.57 saves it"},
        "irrelevant": {"attn_scale": "the temperature tuning of the NoPE layers (a scale)",
                       "attn_temperature_tuning": "as attn_scale", "floor_scale": "as attn_scale",
                       "cache_implementation": "the inference KV cache",
                       "for_llm_compressor": "a quantisation-tool switch",
                       "router_jitter_noise": "noise on the router logits (E floats per token)"},
        "refused": {},
    },
    "deepseek_v2": {   # deepseek-ai/DeepSeek-V2, DeepSeek-V2-Lite, DeepSeek-V2.5: DeepSeek-V3's MLA and MoE keys
        "modelled": dict(DEEPSEEK_MODELLED,
                         topk_method="greedy: top-k over every expert (V2-Lite); group_limited_greedy: top-k within "
                                     "the topk_group best of n_group groups (V2; moe.router_num_groups / "
                                     "router_group_topk); DeepSeek-V2's modeling_deepseek.py MoEGate"),
        "irrelevant": dict(DEEPSEEK_IRRELEVANT),
        "refused": {},
    },
    "deepseek_v3": {   # deepseek-ai/DeepSeek-V3, moonshotai/Kimi-K2-* (model_type kimi_k2)
        "modelled": dict(DEEPSEEK_MODELLED, num_nextn_predict_layers="mtp_layers",
                         qk_head_dim="checked: qk_nope_head_dim + qk_rope_head_dim (DeepseekV3Config saves the sum)",
                         topk_method="checked: noaux_tc, the router DeepSeek-V3's MoEGate runs (a bias added to E "
                                     "scores; group-limited to topk_group of n_group groups)"),
        "irrelevant": dict(DEEPSEEK_IRRELEVANT,
                           rope_interleave="the order of RoPE's rotated pairs (DeepseekV3Config saves it): the same "
                                           "element-wise work"),
        "refused": {},
    },
    "glm4_moe": {   # zai-org/GLM-4.5, GLM-4.5-Air
        "modelled": {"n_routed_experts": "moe.experts", "num_experts_per_tok": "moe.top_k",
                     "n_shared_experts": "moe.shared_experts", "moe_intermediate_size": "moe.expert_ffn_hidden",
                     "first_k_dense_replace": "moe.first_dense_layers", "n_group": "moe.router_num_groups",
                     "topk_group": "moe.router_group_topk", "num_nextn_predict_layers": "mtp_layers",
                     "use_qk_norm": "qk_norm"},
        "irrelevant": {"partial_rotary_factor": "RoPE on part of each head: a smaller element-wise op (RoPE "
                                                "is priced on the whole head)",
                       "routed_scaling_factor": "a scale on the routed experts' output"},
        "refused": {},
    },
}

# the types of the modelled keys that are not text or lists: a whole number (>= 0, or null), or
# true / false. A file is JSON, so "32", 32.0 or true for a layer count is a mistake, not a value.
INTEGER_KEYS = frozenset({
    "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
    "vocab_size", "head_dim", "num_local_experts", "num_experts", "num_experts_per_tok", "experts_per_token",
    "moe_intermediate_size", "decoder_sparse_step", "shared_expert_intermediate_size", "n_routed_experts", "n_shared_experts", "first_k_dense_replace",
    "n_group", "topk_group", "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
    "num_nextn_predict_layers", "qk_head_dim", "no_rope_layer_interval", "sliding_window", "sliding_window_pattern", "_sliding_window_pattern",
    "attention_chunk_size", "interleave_moe_layer_step", "intermediate_size_mlp", "moe_layer_freq"})
BOOLEAN_KEYS = frozenset({"tie_word_embeddings", "use_qk_norm"})

# multimodal wrappers: the language model is their text_config (Gemma 3, Llama 4, Mistral 3: the
# Mistral-Small-3.1 / 3.2 files, a Mistral text model beside a Pixtral vision tower)
WRAPPERS: dict[str, str] = {"gemma3": "gemma3_text", "llama4": "llama4_text", "mistral3": "mistral"}
WRAPPER_IRRELEVANT: dict[str, str] = {
    "text_config": "read as the language model",
    "vision_config": "the vision tower: not part of the language model that clustersim times; Llama 4's and "
                     "Mistral 3's are counted in model.params as their owners count them (model.vision_params, the "
                     "report says so)",
    "boi_token_index": "a token id", "eoi_token_index": "a token id", "image_token_index": "a token id",
    "mm_tokens_per_image": "image tokens per image (multimodal data, not the text model)",
    "vision_feature_layer": "which vision layer feeds the projector",
    "vision_feature_select_strategy": "as vision_feature_layer",
    "projector_hidden_act": "the multimodal projector's activation",
    "multimodal_projector_bias": "the multimodal projector's bias",
    "spatial_merge_size": "Mistral 3's patch merger (k x k image patches into one token): enters "
                          "model.vision_params only",
}

# families by model_type, and by architecture when model_type is absent
MODEL_TYPES: dict[str, str] = {
    "llama": "llama", "mistral": "mistral", "mixtral": "mixtral", "qwen2": "qwen2", "qwen3": "qwen3",
    "qwen2_moe": "qwen2_moe", "qwen3_moe": "qwen3_moe",
    "gpt_oss": "gpt_oss", "gemma3_text": "gemma3_text", "llama4_text": "llama4_text",
    "deepseek_v2": "deepseek_v2", "deepseek_v3": "deepseek_v3", "kimi_k2": "deepseek_v3", "glm4_moe": "glm4_moe",
}
ARCHITECTURES: dict[str, str] = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2", "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3ForCausalLM": "qwen3", "Qwen3MoeForCausalLM": "qwen3_moe", "GptOssForCausalLM": "gpt_oss",
    "Gemma3ForCausalLM": "gemma3_text", "Llama4ForCausalLM": "llama4_text",
    "DeepseekV2ForCausalLM": "deepseek_v2", "DeepseekV3ForCausalLM": "deepseek_v3", "Glm4MoeForCausalLM": "glm4_moe",
    "Gemma3ForConditionalGeneration": "gemma3", "Llama4ForConditionalGeneration": "llama4",
    "Mistral3ForConditionalGeneration": "mistral3",
}


def key_table(family: str) -> dict[str, tuple[str, str]]:
    """key -> (kind, note) for every key of ``family`` (kind: modelled | irrelevant | refused)."""
    fam = FAMILIES[family]
    table: dict[str, tuple[str, str]] = {k: ("irrelevant", why) for k, why in COMMON_IRRELEVANT.items()}
    table.update({k: ("refused", why) for k, (why, _) in COMMON_REFUSED.items()})
    table.update({k: ("irrelevant", why) for k, why in fam["irrelevant"].items()})
    table.update({k: ("refused", why) for k, (why, _) in fam["refused"].items()})
    table.update({k: ("modelled", field) for k, field in COMMON_MODELLED.items()})
    table.update({k: ("modelled", field) for k, field in fam["modelled"].items()})
    return table


def harmless(family: str, key: str) -> Harmless | None:
    """The predicate of the values of a refused key that clustersim reads as harmless."""
    rule = FAMILIES[family]["refused"].get(key) or COMMON_REFUSED.get(key)
    return rule[1] if rule else None
