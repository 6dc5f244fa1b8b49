"""Model presets. Each row cites the paper or config that defines the architecture."""

from __future__ import annotations

from typing import Any

from clustersim.workload.model_spec import model_from_fields

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
}


def list_model_rows() -> list[dict[str, object]]:
    """One row per preset for `clustersim list models`."""
    rows = []
    for name in sorted(MODEL_PRESETS):
        m = model_from_fields(name, MODEL_PRESETS[name])
        rows.append({"name": name, "params_B": round(m.total_params() / 1e9, 2),
                     "active_params_B": round(m.active_params() / 1e9, 2), "layers": m.layers,
                     "hidden": m.hidden, "heads": m.heads, "kv_heads": m.kv_heads, "ffn_hidden": m.ffn_hidden,
                     "ffn_act": m.ffn_act, "vocab": m.vocab, "seq_len": m.seq_len,
                     "experts": m.moe_experts})
    return rows
