"""Model presets. Each row cites the paper or config that defines the architecture."""

from __future__ import annotations

from typing import Any

from clustersim.workload.model_fields import model_from_fields

# name: fields of the scenario's `model:` section
MODEL_PRESETS: dict[str, dict[str, Any]] = {
    # GPT-3 (Brown et al. 2020, arXiv 2005.14165, Table 2.1); vocab padded to 51200 as Megatron-LM does
    "gpt3-175b": dict(layers=96, hidden=12288, heads=96, vocab=51200, seq_len=2048),
    # Megatron-LM SC21 (Narayanan et al. 2021, arXiv 2104.04473, Table 1): seq 2048, vocab 51200
    "megatron-1.7b": dict(layers=24, hidden=2304, heads=24, vocab=51200, seq_len=2048),
    "megatron-3.6b": dict(layers=30, hidden=3072, heads=32, vocab=51200, seq_len=2048),
    "megatron-7.5b": dict(layers=36, hidden=4096, heads=32, vocab=51200, seq_len=2048),
    "megatron-18b": dict(layers=40, hidden=6144, heads=48, vocab=51200, seq_len=2048),
    "megatron-39b": dict(layers=48, hidden=8192, heads=64, vocab=51200, seq_len=2048),
    "megatron-76b": dict(layers=60, hidden=10240, heads=80, vocab=51200, seq_len=2048),
    "megatron-146b": dict(layers=80, hidden=12288, heads=96, vocab=51200, seq_len=2048),
    "megatron-310b": dict(layers=96, hidden=16384, heads=128, vocab=51200, seq_len=2048),
    "megatron-530b": dict(layers=105, hidden=20480, heads=128, vocab=51200, seq_len=2048),
    "megatron-1t": dict(layers=128, hidden=25600, heads=160, vocab=51200, seq_len=2048),
    # Korthikanti et al. 2022 (arXiv 2205.05198, Table 3): 22B; 175B/530B/1T as above
    "megatron-22b": dict(layers=48, hidden=6144, heads=64, vocab=51200, seq_len=2048),
    # Megatron-LM README weak-scaling table (2024-07-15; ../shared/calibration): seq 4096, vocab 131072
    "megatron-core-1.7b": dict(layers=24, hidden=2048, heads=16, vocab=131072, seq_len=4096),
    "megatron-core-7.1b": dict(layers=30, hidden=4096, heads=32, vocab=131072, seq_len=4096),
    "megatron-core-16b": dict(layers=32, hidden=6144, heads=48, vocab=131072, seq_len=4096),
    "megatron-core-32b": dict(layers=48, hidden=7168, heads=56, vocab=131072, seq_len=4096),
    "megatron-core-70b": dict(layers=84, hidden=8192, heads=64, vocab=131072, seq_len=4096),
    "megatron-core-119b": dict(layers=92, hidden=10240, heads=80, vocab=131072, seq_len=4096),
    "megatron-core-177b": dict(layers=96, hidden=12288, heads=96, vocab=131072, seq_len=4096),
    "megatron-core-314b": dict(layers=96, hidden=16384, heads=128, vocab=131072, seq_len=4096),
    "megatron-core-462b": dict(layers=112, hidden=18432, heads=144, vocab=131072, seq_len=4096),
    # Llama 2 (Touvron et al. 2023, arXiv 2307.09288; HF config.json of meta-llama/Llama-2-*-hf)
    "llama2-7b": dict(layers=32, hidden=4096, heads=32, ffn_hidden=11008, ffn_act="swiglu", vocab=32000, seq_len=4096),
    "llama2-13b": dict(layers=40, hidden=5120, heads=40, ffn_hidden=13824, ffn_act="swiglu", vocab=32000,
                       seq_len=4096),
    "llama2-70b": dict(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, ffn_act="swiglu",
                       vocab=32000, seq_len=4096),
    # Llama 3 (Grattafiori et al. 2024, arXiv 2407.21783, Table 3; HF config.json of meta-llama/Meta-Llama-3*)
    "llama3-8b": dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, ffn_act="swiglu",
                      vocab=128256, seq_len=8192),
    "llama3-70b": dict(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, ffn_act="swiglu",
                       vocab=128256, seq_len=8192),
    "llama3-405b": dict(layers=126, hidden=16384, heads=128, kv_heads=8, ffn_hidden=53248, ffn_act="swiglu",
                        vocab=128256, seq_len=8192),
    # Mixtral 8x7B (Jiang et al. 2024, arXiv 2401.04088, Table 1)
    "mixtral-8x7b": dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, ffn_act="swiglu",
                         vocab=32000, seq_len=4096, moe={"experts": 8, "top_k": 2}),
    # Mixtral 8x22B: HF config.json of mistralai/Mixtral-8x22B-Instruct-v0.1 (hidden_size 6144,
    # intermediate_size 16384, num_hidden_layers 56, num_attention_heads 48, num_key_value_heads 8,
    # num_local_experts 8, num_experts_per_tok 2, vocab_size 32768, max_position_embeddings 65536);
    # seq_len 4096 as in Megatron-LM's Mixtral training examples (megatron/core/transformer/moe/README.md)
    "mixtral-8x22b": dict(layers=56, hidden=6144, heads=48, kv_heads=8, ffn_hidden=16384, ffn_act="swiglu",
                          vocab=32768, seq_len=4096, moe={"experts": 8, "top_k": 2}),
    # DeepSeek-V3 (arXiv 2412.19437 §4.2; HF config.json of deepseek-ai/DeepSeek-V3 and the
    # repository's inference/configs/config_671B.json at 9b4e978): 61 layers, hidden 7168, dense
    # intermediate 18432 for the first 3 layers (first_k_dense_replace), 256 routed experts of
    # width 2048 (moe_intermediate_size) with top-8 routing, 1 shared expert, 8 groups with at
    # most 4 per token (n_group, topk_group), MLA with 128 heads, q_lora_rank 1536, kv_lora_rank
    # 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, vocab 129280, one MTP module
    # (num_nextn_predict_layers 1); pre-training sequence length 4K (§4.2)
    "deepseek-v3": dict(layers=61, hidden=7168, heads=128, ffn_hidden=18432, ffn_act="swiglu", vocab=129280,
                        seq_len=4096, attention="mla", q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128,
                        qk_rope_head_dim=64, v_head_dim=128, mtp_layers=1,
                        moe={"experts": 256, "top_k": 8, "shared_experts": 1, "expert_ffn_hidden": 2048,
                             "first_dense_layers": 3, "router_num_groups": 8, "router_group_topk": 4}),
    # ---- 2025-26 open models. Shapes: each owner's config.json on Hugging Face (the fixtures of
    # tests/importers/hf_configs/, whose README names each repository); seq_len: the owner's stated
    # pre-training sequence where one is given, else 4096. Published parameter counts, and where
    # they come from, are in tests/workload/test_presets_published.py.
    # Qwen3 (Qwen3 Technical Report, arXiv 2505.09388, Tables 1-2; Qwen/Qwen3-8B and Qwen3-32B
    # config.json): QK-norm, head_dim 128, untied; pre-training stage 1 at 4,096 tokens (§3.2)
    "qwen3-8b": dict(layers=36, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn_hidden=12288, ffn_act="swiglu",
                     vocab=151936, seq_len=4096, qk_norm=True),
    "qwen3-32b": dict(layers=64, hidden=5120, heads=64, kv_heads=8, head_dim=128, ffn_hidden=25600,
                      ffn_act="swiglu", vocab=151936, seq_len=4096, qk_norm=True),
    # Qwen3 MoE (same report, Table 2; Qwen/Qwen3-30B-A3B and Qwen3-235B-A22B config.json): 128
    # experts, 8 per token, no shared expert, every layer MoE
    "qwen3-30b-a3b": dict(layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128, ffn_hidden=6144,
                          ffn_act="swiglu", vocab=151936, seq_len=4096, qk_norm=True,
                          moe={"experts": 128, "top_k": 8, "expert_ffn_hidden": 768}),
    "qwen3-235b-a22b": dict(layers=94, hidden=4096, heads=64, kv_heads=4, head_dim=128, ffn_hidden=12288,
                            ffn_act="swiglu", vocab=151936, seq_len=4096, qk_norm=True,
                            moe={"experts": 128, "top_k": 8, "expert_ffn_hidden": 1536}),
    # gpt-oss (OpenAI gpt-oss model card, arXiv 2508.10925, §2 and Table 1; openai/gpt-oss-*
    # config.json): head_dim 64 (64 query heads, 8 KV heads), sliding window 128 on every other
    # layer (layer_types alternate, sliding first), a learned sink logit per head, SwiGLU experts of
    # width 2880, 4 per token, every layer MoE, untied, vocab 201088 (o200k_harmony); the SwiGLU's
    # halves clamped at 7.0 (config.json swiglu_limit) and biases on the experts (the checkpoint's
    # mlp.experts.gate_up_proj_bias and down_proj_bias; Megatron-Bridge gpt_oss_bridge.py at 067f987df:
    # add_bias_linear=True, activation_func_clamp_value=7.0)
    "gpt-oss-20b": dict(layers=24, hidden=2880, heads=64, kv_heads=8, head_dim=64, ffn_hidden=2880,
                        ffn_act="swiglu", vocab=201088, seq_len=4096, attention_pattern="sliding",
                        attention_window=128, global_every=2, attention_sinks=True, activation_clamp=7.0,
                        moe={"experts": 32, "top_k": 4, "expert_ffn_hidden": 2880, "expert_bias": True}),
    "gpt-oss-120b": dict(layers=36, hidden=2880, heads=64, kv_heads=8, head_dim=64, ffn_hidden=2880,
                         ffn_act="swiglu", vocab=201088, seq_len=4096, attention_pattern="sliding",
                         attention_window=128, global_every=2, attention_sinks=True, activation_clamp=7.0,
                         moe={"experts": 128, "top_k": 4, "expert_ffn_hidden": 2880, "expert_bias": True}),
    # Llama 4 (Meta, "The Llama 4 herd", 2025-04-05; meta-llama/Llama-4-Scout-17B-16E and
    # Llama-4-Maverick-17B-128E config.json text_config): 16 / 128 routed experts of width 8192, one
    # per token, plus one shared expert; Maverick alternates dense (width 16384) and MoE layers
    # (interleave_moe_layer_step 2); chunked attention of 8192 tokens on the RoPE layers, full
    # attention on every fourth (NoPE) layer; Scout normalises Q and K (use_qk_norm); seq 8192;
    # the vision tower Meta's totals count (both configs' vision_config, multiplied out by
    # clustersim.workload.vision_tower: 871,932,416), not simulated
    "llama4-scout": dict(layers=48, hidden=5120, heads=40, kv_heads=8, head_dim=128, ffn_hidden=16384,
                         ffn_act="swiglu", vocab=202048, seq_len=8192, qk_norm=True, attention_pattern="chunked",
                         attention_window=8192, global_every=4, vision_params=871_932_416,
                         moe={"experts": 16, "top_k": 1, "shared_experts": 1, "expert_ffn_hidden": 8192}),
    "llama4-maverick": dict(layers=48, hidden=5120, heads=40, kv_heads=8, head_dim=128, ffn_hidden=16384,
                            ffn_act="swiglu", vocab=202048, seq_len=8192, attention_pattern="chunked",
                            attention_window=8192, global_every=4, vision_params=871_932_416,
                            moe={"experts": 128, "top_k": 1, "shared_experts": 1, "expert_ffn_hidden": 8192,
                                 "every": 2}),
    # Gemma 3 27B (Gemma 3 Technical Report, arXiv 2503.19786, §2 and Table 1; google/gemma-3-27b-pt
    # config.json text_config and Gemma3TextConfig defaults): head_dim 128, GeGLU, QK-norm, sandwich
    # norms, 5 local layers (sliding window 1024) to 1 global, tied embeddings, vocab 262208;
    # pre-trained on 32K-token sequences before the RoPE extension to 128K (the report's "Long context")
    "gemma3-27b": dict(layers=62, hidden=5376, heads=32, kv_heads=16, head_dim=128, ffn_hidden=21504,
                       ffn_act="geglu", vocab=262208, seq_len=32768, tie_embeddings=True, qk_norm=True,
                       sandwich_norm=True, attention_pattern="sliding", attention_window=1024, global_every=6),
    # Kimi K2 (Kimi K2 technical report, arXiv 2507.20534, §2 and Table 2; moonshotai/Kimi-K2-Base
    # config.json): DeepSeek-V3's architecture with 64 heads, 384 experts (8 per token, 1 shared),
    # one dense first layer, vocab 163840, no MTP module; seq 4096 as DeepSeek-V3's pre-training
    "kimi-k2": dict(layers=61, hidden=7168, heads=64, ffn_hidden=18432, ffn_act="swiglu", vocab=163840,
                    seq_len=4096, attention="mla", q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128,
                    qk_rope_head_dim=64, v_head_dim=128,
                    moe={"experts": 384, "top_k": 8, "shared_experts": 1, "expert_ffn_hidden": 2048,
                         "first_dense_layers": 1}),
    # GLM-4.5 (GLM-4.5 technical report, arXiv 2508.06471, Table 1; zai-org/GLM-4.5 config.json):
    # 96 heads of 128 with hidden 5120, 8 KV heads, 3 dense layers (12288) then 89 MoE layers of 160
    # experts (width 1536, 8 per token, 1 shared), one MTP layer, vocab 151552; QK-Norm (the report's
    # §2.1 "to stabilize the range of attention logits"; config.json use_qk_norm true, and
    # --qk-layernorm in slime's scripts/models/glm4.5-355B-A32B.sh, absent from its GLM-4.5-Air script)
    "glm-4.5": dict(layers=92, hidden=5120, heads=96, kv_heads=8, head_dim=128, ffn_hidden=12288, ffn_act="swiglu",
                    vocab=151552, seq_len=4096, mtp_layers=1, qk_norm=True,
                    moe={"experts": 160, "top_k": 8, "shared_experts": 1, "expert_ffn_hidden": 1536,
                         "first_dense_layers": 3}),
    # GLM-4.5-Air (same report, Table 1: 106B total / 12B activated; zai-org/GLM-4.5-Air config.json and
    # slime's scripts/models/glm4.5-106B-A12B.sh): hidden 4096, 96 heads of 128, 8 KV heads, 1 dense
    # layer (10944) then 45 MoE layers of 128 experts (width 1408, 8 per token, 1 shared), one MTP
    # layer, vocab 151552, untied; no QK-Norm (use_qk_norm false; no --qk-layernorm in slime's script)
    "glm-4.5-air": dict(layers=46, hidden=4096, heads=96, kv_heads=8, head_dim=128, ffn_hidden=10944,
                        ffn_act="swiglu", vocab=151552, seq_len=4096, mtp_layers=1,
                        moe={"experts": 128, "top_k": 8, "shared_experts": 1, "expert_ffn_hidden": 1408,
                             "first_dense_layers": 1}),
    # Nemotron-4 340B (Nemotron-4 340B Technical Report, arXiv 2406.11704, Table 1; architecture as
    # Nemotron-4 15B, arXiv 2402.16819 §2.1: squared ReLU, RoPE, GQA, no bias, no dropout, untied):
    # 96 layers, hidden 18432, 96 heads, 8 KV heads, MLP 73728, vocab 256000, seq 4096
    "nemotron-4-340b": dict(layers=96, hidden=18432, heads=96, kv_heads=8, ffn_hidden=73728, ffn_act="squared-relu",
                            vocab=256000, seq_len=4096),
    # Mistral 7B (Jiang et al. 2023, arXiv 2310.06825, Table 1; mistralai/Mistral-7B-v0.1 config.json):
    # sliding window 4096 on every layer, context 8192
    "mistral-7b": dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, ffn_act="swiglu", vocab=32000,
                       seq_len=8192, attention_pattern="sliding", attention_window=4096),
}


def list_model_rows() -> list[dict[str, object]]:
    """One row per preset for `clustersim list models`."""
    rows = []
    for name in sorted(MODEL_PRESETS):
        m = model_from_fields(name, MODEL_PRESETS[name])
        rows.append({"name": name, "params_B": round(m.main_params() / 1e9, 2),
                     "active_params_B": round(m.active_params() / 1e9, 2), "layers": m.layers,
                     "hidden": m.hidden, "heads": m.heads, "kv_heads": m.kv_heads, "head_dim": m.head_dim,
                     "ffn_hidden": m.ffn_hidden,
                     "ffn_act": m.ffn_act, "vocab": m.vocab, "seq_len": m.seq_len,
                     "experts": m.moe_experts})
    return rows
