"""`model: {hf_config: config.json}`: the model fields of a Hugging Face config, family by family.

Families (``model_type``, or the architecture name when the file has none): Llama, Mistral,
Mixtral, Qwen2 / Qwen2.5 (``qwen2``), Qwen3, Qwen2-MoE (``qwen2_moe``: Qwen1.5-MoE, Qwen2-57B-A14B),
Qwen3-MoE, gpt-oss, Gemma 3 (text, and the ``text_config`` of the multimodal
Gemma 3), Llama 4 (text, and the ``text_config`` of the multimodal Llama 4), Mistral 3 (the
``text_config``, a Mistral model, of Mistral-Small-3.1 / 3.2's multimodal file), DeepSeek-V2
(``deepseek_v2``: V2, V2-Lite, V2.5), DeepSeek-V3 and Kimi K2 (``kimi_k2``, DeepSeek-V3's architecture), GLM-4 MoE (GLM-4.5). Every key of the file is
looked up in the family's table (clustersim.workload.hf_config_keys): modelled, irrelevant to
the cost (with the reason), or refused (exit 2 naming the key) when set to a value that changes
the cost in a way clustersim does not model; a key in no table is refused as unknown.

What the architecture fixes without a key (the modelling code of each family in HF transformers,
models/<family>/modeling_<family>.py, v4.55): Qwen3 and Gemma 3 normalise Q and K per head
(``q_norm``/``k_norm``); gpt-oss adds a learned sink logit per head (``sinks``) and biases on
its experts (``GptOssExperts.gate_up_proj_bias``, ``down_proj_bias``); Gemma 3 puts a
norm after the attention and after the MLP (``post_attention_layernorm``,
``post_feedforward_layernorm``); Llama 4's MoE layers have one shared expert beside the routed
ones (``Llama4TextMoe.shared_expert``); Qwen2-MoE's MoE layers have one shared expert of width
``shared_expert_intermediate_size`` scaled by a sigmoid gate (``Qwen2MoeSparseMoeBlock.shared_expert``,
``shared_expert_gate``: a hidden x 1 projection, h weights per layer, under 0.001% of the
parameters and not counted) and Q/K/V biases (``qkv_bias``, as Qwen2's; biases are not counted). Keys a family's config class fills in when the file leaves
them out (the multimodal Gemma 3 files list only what differs) take that class's default
(``DEFAULTS``).

The training sequence length is a job setting: it is never read from the config
(``max_position_embeddings`` is the longest context the positions allow). The scenario's
``model.seq_len`` gives it; without one it is ``DEFAULT_SEQ_LEN`` and the report says so.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from clustersim.errors import InputError
from clustersim.inputs import MAX_YAML_BYTES, read_json_file, read_text
from clustersim.limits import MAX_LAYERS
from clustersim.workload.hf_config_keys import (
    ARCHITECTURES,
    BOOLEAN_KEYS,
    COMMON_IRRELEVANT,
    FAMILIES,
    INTEGER_KEYS,
    MODEL_TYPES,
    WRAPPER_IRRELEVANT,
    WRAPPERS,
    harmless,
    key_table,
)
from clustersim.workload.model_spec import moe_layer_fields
from clustersim.workload.vision_tower import vision_params

DEFAULT_SEQ_LEN = 4096   # the pre-training sequence of Llama 2, DeepSeek-V3 (§4.2) and Megatron-Bridge's recipes

# transformers' config-class defaults for keys a file may leave out (transformers v4.55,
# models/<family>/configuration_<family>.py)
DEFAULTS: dict[str, dict[str, Any]] = {
    # google/gemma-3-4b-pt and -12b-pt list neither head_dim nor vocab_size, and the 4B no head counts
    "gemma3_text": {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                    "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True,
                    "sliding_window": 4096, "sliding_window_pattern": 6},
    "gpt_oss": {"tie_word_embeddings": False, "sliding_window": 128, "head_dim": 64, "swiglu_limit": 7.0,
                "intermediate_size": 2880},
    # LlamaConfig(intermediate_size=11008): Llama 2 7B's MLP width
    "llama": {"intermediate_size": 11008},
    # Qwen3Config(head_dim=128): a file without the key has 128-wide heads (not hidden / heads)
    "qwen3": {"head_dim": 128},
    "llama4_text": {"tie_word_embeddings": False, "interleave_moe_layer_step": 1, "num_experts_per_tok": 1,
                    "use_qk_norm": True, "attention_chunk_size": 8192},
    # MistralConfig(sliding_window=4096): a file without the key has the 4,096-token window (an
    # explicit null has none); MixtralConfig's default is None
    "mistral": {"sliding_window": 4096},
    "qwen3_moe": {"decoder_sparse_step": 1, "intermediate_size": 6144, "moe_intermediate_size": 768},
    # Qwen2MoeConfig (transformers models/qwen2_moe/configuration_qwen2_moe.py): Qwen1.5-MoE-A2.7B's MoE shape
    "qwen2_moe": {"decoder_sparse_step": 1, "shared_expert_intermediate_size": 5632, "num_experts": 60,
                  "num_experts_per_tok": 4, "moe_intermediate_size": 1408},
    # DeepseekV2Config (deepseek-ai/DeepSeek-V2 configuration_deepseek.py): topk_method="greedy"
    "deepseek_v2": {"topk_method": "greedy"},
    # deepseek-ai/DeepSeek-V3 configuration_deepseek.py: topk_method="noaux_tc", the only router its MoEGate runs
    "deepseek_v3": {"topk_method": "noaux_tc"},
}
# The config class each DEFAULTS entry is taken from, as the report's note names it. The MLP widths
# are taken only where the class default is certain: DeepSeek's own configuration_deepseek.py
# (moe_intermediate_size 1407, intermediate_size 11008) and transformers' DeepseekV3Config (2048,
# 18432) disagree, so a DeepSeek file without them exits 2, as every family not listed here does.
CONFIG_CLASSES = {"gemma3_text": "Gemma3TextConfig", "gpt_oss": "GptOssConfig", "llama": "LlamaConfig",
                  "qwen3": "Qwen3Config", "llama4_text": "Llama4TextConfig", "mistral": "MistralConfig",
                  "qwen3_moe": "Qwen3MoeConfig", "qwen2_moe": "Qwen2MoeConfig",
                  "deepseek_v2": "DeepSeek-V2's DeepseekV2Config", "deepseek_v3": "DeepSeek-V3's DeepseekV3Config"}
# the MLP widths every file must give (or its class default above): a width left out was 4 x hidden
MOE_WIDTH_FAMILIES = ("qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "glm4_moe")
# the routers (``topk_method``) of DeepSeek's MoEGate, and whether each limits a token to the
# topk_group best of n_group groups: DeepSeek-V2's modeling_deepseek.py (greedy: V2-Lite;
# group_limited_greedy: V2, V2.5), DeepSeek-V3's (noaux_tc only; Kimi K2 runs DeepSeek-V3's code)
ROUTERS: dict[str, dict[str, bool]] = {"deepseek_v2": {"greedy": False, "group_limited_greedy": True},
                                       "deepseek_v3": {"noaux_tc": True}}

GATED_ACTS = {"silu": "swiglu", "swish": "swiglu", "swiglu": "swiglu", "gelu": "geglu", "gelu_new": "geglu",
              "gelu_pytorch_tanh": "geglu", "gelu_fast": "geglu"}
MLP_NAMES = {"swiglu": "SwiGLU", "geglu": "GeGLU"}


def _bad(path: str, key: str, value: Any, allowed: str) -> InputError:
    return InputError(f"model.hf_config ({path}): {key}", value, allowed)


def _family(cfg: dict[str, Any], path: str) -> str:
    model_type = cfg.get("model_type")
    if model_type is not None:
        if not isinstance(model_type, str):
            raise _bad(path, "model_type", model_type, "a string, one of " + ", ".join(sorted({*MODEL_TYPES, *WRAPPERS})))
        if model_type in MODEL_TYPES:
            return MODEL_TYPES[model_type]
        if model_type in WRAPPERS:
            return model_type
        raise _bad(path, "model_type", model_type, "one of " + ", ".join(sorted({*MODEL_TYPES, *WRAPPERS})))
    archs = cfg.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if arch in ARCHITECTURES:
        return ARCHITECTURES[arch]
    raise _bad(path, "model_type", None, "a config.json naming its model_type (or architectures) among "
               + ", ".join(sorted({*MODEL_TYPES, *WRAPPERS})))


def _unwrap(cfg: dict[str, Any], wrapper: str, path: str) -> tuple[dict[str, Any], str]:
    """The text model of a multimodal config (its ``text_config``), checked key by key."""
    for key, value in cfg.items():
        if key not in WRAPPER_IRRELEVANT and key not in COMMON_IRRELEVANT and key != "tie_word_embeddings":
            raise _bad(path, key, value, f"a key of a {wrapper} config that clustersim knows ("
                       + ", ".join(sorted(WRAPPER_IRRELEVANT)) + ")")
    text = cfg.get("text_config")
    if not isinstance(text, dict):
        raise _bad(path, "text_config", text, f"a JSON object: the language model of the {wrapper} config")
    family = WRAPPERS[wrapper]
    inner = text.get("model_type", family)
    if inner != family:
        raise _bad(path, "text_config.model_type", inner, family)
    out = dict(text)
    if "tie_word_embeddings" in cfg and "tie_word_embeddings" not in out:
        out["tie_word_embeddings"] = cfg["tie_word_embeddings"]
    return out, family


def _check_keys(cfg: dict[str, Any], family: str, path: str) -> None:
    table = key_table(family)
    for key, value in cfg.items():
        if key not in table:
            raise _bad(path, key, value, f"a key clustersim reads for {family} configs: an unknown key could "
                       "change the cost, so it is refused rather than dropped (docs/compute.md, "
                       "\"Hugging Face configs\")")
        if table[key][0] == "refused":
            ok = harmless(family, key)
            if ok is None or not ok(value):
                raise _bad(path, key, value, table[key][1])
        if value is None:
            continue
        if key in INTEGER_KEYS and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise _bad(path, key, value, "a whole number >= 0 (or null)")
        if key in BOOLEAN_KEYS and not isinstance(value, bool):
            raise _bad(path, key, value, "true or false")


def _every(flags: list[bool], key: str, value: Any, path: str, what: str) -> int:
    """N when exactly layers N-1, 2N-1, ... are set (0 when none is), else exit 2 naming ``key``."""
    n = len(flags)
    on = [i for i, f in enumerate(flags) if f]
    if not on:
        return 0
    every = on[0] + 1
    if on == list(range(every - 1, n, every)):
        return every
    raise _bad(path, key, value, f"{what} on every N-th layer (layers N-1, 2N-1, ...): other patterns are not "
               "modelled")


def _moe_layers(flags: list[bool], key: str, value: Any, path: str) -> dict[str, Any]:
    """The ``model.moe`` fields (first_dense_layers / every, or an explicit pattern:
    clustersim.workload.model_spec.moe_layer_fields) of the family's own per-layer rule, applied
    exactly; exit 2 naming ``key`` when it leaves no MoE layer."""
    fields = moe_layer_fields(flags)
    if fields is None:
        raise _bad(path, key, value, "a layout with at least one MoE layer (a config whose every layer is dense is "
                   "not a MoE model)")
    return fields


def _layer_list(cfg: dict[str, Any], key: str, layers: int, path: str) -> list[int]:
    """A list of 0-based layer indices (``mlp_only_layers``, ``moe_layers``), each below ``layers``."""
    value = cfg.get(key) or []
    if not isinstance(value, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < layers
                                          for i in value):
        raise _bad(path, key, value, f"a list of layer indices from 0 to {layers - 1} (num_hidden_layers - 1)")
    return value


def _acts_allowed() -> str:
    """The activations GATED_ACTS reads, by the gated MLP each gives: 'silu, swish, swiglu (SwiGLU) or ...'."""
    by_mlp: dict[str, list[str]] = {}
    for name, mlp in GATED_ACTS.items():
        by_mlp.setdefault(mlp, []).append(name)
    return " or ".join(f"{', '.join(names)} ({MLP_NAMES[mlp]})" for mlp, names in by_mlp.items())


def _act(cfg: dict[str, Any], key: str, path: str) -> str:
    act = cfg.get(key, "silu")
    if not isinstance(act, str):
        raise _bad(path, key, act, f"a string: {_acts_allowed()}")
    if act not in GATED_ACTS:
        raise _bad(path, key, act, f"{_acts_allowed()}: these families' MLPs are gated")
    return GATED_ACTS[act]


def _whole(cfg: dict[str, Any], key: str, path: str, what: str, lo: int = 1, hi: int | None = None) -> int:
    """The config's ``key`` as a whole number from ``lo`` (to ``hi``), else exit 2 naming the key
    (not the scenario field it becomes: the user fixes the file)."""
    value = cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hi is not None and value > hi):
        bound = f"from {lo} to {hi}" if hi is not None else f">= {lo}"
        raise _bad(path, key, value, f"a whole number {bound}: {what}")
    return value


def _window(cfg: dict[str, Any], key: str, path: str, needed: str = "") -> int | None:
    """A window (``sliding_window``) or chunk (``attention_chunk_size``) of tokens, one rule for every
    family: null is no window (where the family allows one; ``needed`` says why it does not), else a
    whole number >= 1 (0 or less exits 2 naming the key: transformers' masks take 0 as no window for some
    families and fail for others)."""
    value = cfg.get(key)
    if value is None and not needed:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _bad(path, key, value, f"a window of at least 1 token ({needed})" if needed
                   else "a window of at least 1 token, or null for none")
    return value


def _window_layers(cfg: dict[str, Any], path: str, fields: dict[str, Any]) -> None:
    """Sliding window W on the layers that layer_types (or sliding_window_pattern) marks local."""
    _window(cfg, "sliding_window", path)
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != fields["layers"] or any(
                t not in ("sliding_attention", "full_attention") for t in types):
            raise _bad(path, "layer_types", types, f"a list of {fields['layers']} entries, each sliding_attention "
                       "or full_attention")
        if all(t == "full_attention" for t in types):
            return
        fields["global_every"] = _every([t == "full_attention" for t in types], "layer_types", types, path,
                                        "full attention")
    elif "sliding_window_pattern" in cfg:   # Gemma3Attention: layer i is local unless (i + 1) % pattern == 0
        fields["global_every"] = _whole(cfg, "sliding_window_pattern", path, "every N-th layer full attention, the "
                                        "others local (num_hidden_layers at most)", 2, fields["layers"])
    if "global_every" in fields:
        why = "layer_types marks sliding_attention layers" if types is not None else "sliding_window_pattern is set"
        fields["attention_pattern"], fields["attention_window"] = "sliding", _window(cfg, "sliding_window", path, why)


def _moe(cfg: dict[str, Any], experts: str, width: str, path: str, shared: str | None = None) -> dict[str, Any]:
    """The routed experts (``experts`` key), their top-k and width (``width`` key): each checked
    here, so that an error names the key of the file."""
    n = _whole(cfg, experts, path, "the routed experts of a MoE layer")
    moe: dict[str, Any] = {"experts": n, "top_k": _whole(cfg, "num_experts_per_tok", path, f"the experts each token "
                                                          f"is routed to ({experts} at most)", 1, n),
                           "expert_ffn_hidden": _whole(cfg, width, path, "the width of one expert's MLP")}
    if shared and cfg.get(shared):
        moe["shared_experts"] = cfg[shared]
    return moe


def _deepseek_like(cfg: dict[str, Any], fields: dict[str, Any], path: str, family: str) -> None:
    """DeepSeek-V2, DeepSeek-V3 (and Kimi K2) and GLM-4 MoE. Which layers are MoE, as the owners' modelling code
    decides it: DeepSeek's DeepseekV3DecoderLayer (deepseek-ai/DeepSeek-V3 modeling_deepseek.py,
    as DeepSeek-V2's): ``layer_idx >= first_k_dense_replace and layer_idx % moe_layer_freq == 0``
    (layers 0, N, 2N, ... past the dense ones: counted from 0, unlike Llama 4's and Qwen's); GLM-4
    MoE's Glm4MoeDecoderLayer (transformers models/glm4_moe/modeling_glm4_moe.py, v4.55):
    ``layer_idx >= first_k_dense_replace`` (no frequency key).

    Group-limited routing (moe.router_num_groups / router_group_topk) where the owner's gate
    limits it: DeepSeek-V3's noaux_tc and GLM's always when n_group > 1; DeepSeek-V2's MoEGate
    (deepseek-ai/DeepSeek-V2 modeling_deepseek.py; transformers models/deepseek_v2
    DeepseekV2Moe.route_tokens_to_experts) only for ``topk_method`` group_limited_greedy (V2, V2.5:
    the topk_group best of n_group groups); its greedy (V2-Lite) takes the top-k over every
    expert whatever n_group says."""
    moe = _moe(cfg, "n_routed_experts", "moe_intermediate_size", path, "n_shared_experts")
    layers, first = cfg["num_hidden_layers"], cfg.get("first_k_dense_replace") or 0
    freq = 1 if cfg.get("moe_layer_freq") is None else cfg["moe_layer_freq"]
    if isinstance(freq, bool) or not isinstance(freq, int) or freq < 1:
        raise _bad(path, "moe_layer_freq", freq, "a whole number >= 1 (layers 0, N, 2N, ... past first_k_dense_replace "
                   "are MoE)")
    if isinstance(layers, int) and not isinstance(layers, bool) and isinstance(first, int):
        moe.update(_moe_layers([i >= first and i % freq == 0 for i in range(layers)],
                               "moe_layer_freq" if freq > 1 else "first_k_dense_replace",
                               freq if freq > 1 else first, path))
    grouped = True
    if family in ROUTERS:
        method = cfg["topk_method"]
        if method not in ROUTERS[family]:
            gate = "DeepSeek-V2's MoEGate" if family == "deepseek_v2" else "DeepSeek-V3's MoEGate, which Kimi K2 runs"
            raise _bad(path, "topk_method", method, f"{' or '.join(ROUTERS[family])} ({gate})")
        grouped = ROUTERS[family][method]
        if family == "deepseek_v2" and grouped and not (isinstance(cfg.get("n_group"), int) and isinstance(cfg.get("topk_group"), int)
                            and cfg["n_group"] >= 1 and 1 <= cfg["topk_group"] <= cfg["n_group"]):
            raise _bad(path, "topk_group", cfg.get("topk_group"), "group_limited_greedy needs n_group >= 1 and "
                       "topk_group from 1 to n_group")
    if grouped and (cfg.get("n_group") or 1) > 1:
        moe["router_num_groups"], moe["router_group_topk"] = cfg["n_group"], cfg.get("topk_group")
    fields["moe"] = moe
    if cfg.get("num_nextn_predict_layers"):
        fields["mtp_layers"] = cfg["num_nextn_predict_layers"]


def _fields(cfg: dict[str, Any], family: str, path: str) -> dict[str, Any]:
    if "_sliding_window_pattern" in cfg:   # the name transformers >= 4.53 saves Gemma 3's pattern under
        cfg = {"sliding_window_pattern": cfg["_sliding_window_pattern"], **cfg}
    cfg = {**DEFAULTS.get(family, {}), **cfg}
    layers = cfg.get("num_hidden_layers")
    if isinstance(layers, int) and layers > MAX_LAYERS:   # before any per-layer list is built
        raise _bad(path, "num_hidden_layers", layers, f"a number <= {MAX_LAYERS}")
    fields: dict[str, Any] = {
        "layers": cfg.get("num_hidden_layers"), "hidden": cfg.get("hidden_size"),
        "heads": cfg.get("num_attention_heads"), "kv_heads": cfg.get("num_key_value_heads"),
        "ffn_hidden": cfg.get("intermediate_size"), "vocab": cfg.get("vocab_size"),
        "tie_embeddings": cfg.get("tie_word_embeddings"), "head_dim": cfg.get("head_dim"),
        "ffn_act": _act(cfg, "hidden_activation" if family == "gemma3_text" else "hidden_act", path),
    }
    missing = [k for k in ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size") if cfg.get(k) is None]
    if missing:
        raise _bad(path, missing[0], None, f"a {family} config.json with num_hidden_layers, hidden_size, "
                   "num_attention_heads and vocab_size")
    for key in ("intermediate_size", "moe_intermediate_size") if family in MOE_WIDTH_FAMILIES else ("intermediate_size",):
        if cfg.get(key) is None:   # was 4 x hidden_size, for the experts too (gpt-oss-20b: 78B)
            raise _bad(path, key, None, f"the MLP width as the published config.json states it (clustersim takes no "
                       f"config-class default for this key of a {family} config: docs/compute.md, \"Hugging Face "
                       "configs\")")
        _whole(cfg, key, path, "an MLP width")
    for key in ("attention_dropout", "hidden_dropout"):   # dropout masks (clustersim.compute.conventions)
        rate = cfg.get(key)
        if rate is None:
            continue
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate < 1:
            raise _bad(path, key, rate, "a dropout rate from 0 up to (not including) 1, or null")
        if rate > 0:
            fields["dropout"] = True
    if family in ("mistral", "mixtral") and _window(cfg, "sliding_window", path) is not None:
        fields["attention_pattern"], fields["attention_window"] = "sliding", cfg["sliding_window"]
    if family == "mixtral":
        fields["moe"] = _moe(cfg, "num_local_experts", "intermediate_size", path)
    if family in ("qwen3", "qwen3_moe"):
        fields["qk_norm"] = True
    if family in ("qwen2_moe", "qwen3_moe"):
        if "num_local_experts" in cfg:   # transformers v5 saves num_experts under this name
            if "num_experts" in cfg and cfg["num_experts"] != cfg["num_local_experts"]:
                raise _bad(path, "num_local_experts", cfg["num_local_experts"], f"num_experts ({cfg['num_experts']})")
            cfg.setdefault("num_experts", cfg["num_local_experts"])
        # Qwen3MoeDecoderLayer (transformers models/qwen3_moe/modeling_qwen3_moe.py, v4.55) and
        # Qwen2MoeDecoderLayer (models/qwen2_moe/modular_qwen2_moe.py): MoE when layer_idx not in
        # mlp_only_layers and (layer_idx + 1) % decoder_sparse_step == 0
        step = cfg["decoder_sparse_step"]
        if isinstance(step, bool) or not isinstance(step, int) or step < 1:
            raise _bad(path, "decoder_sparse_step", step, "a whole number >= 1 (layers N-1, 2N-1, ... are MoE)")
        dense = set(_layer_list(cfg, "mlp_only_layers", cfg["num_hidden_layers"], path))
        flags = [i not in dense and (i + 1) % step == 0 for i in range(cfg["num_hidden_layers"])]
        fields["moe"] = {**_moe(cfg, "num_experts", "moe_intermediate_size", path),
                         **_moe_layers(flags, "mlp_only_layers" if dense else "decoder_sparse_step",
                                       sorted(dense) if dense else step, path)}
        if family == "qwen2_moe" and cfg.get("shared_expert_intermediate_size"):
            fields["moe"]["shared_ffn_hidden"] = cfg["shared_expert_intermediate_size"]
    if family == "gpt_oss":
        if "experts_per_token" in cfg and "num_experts_per_tok" in cfg \
                and cfg["experts_per_token"] != cfg["num_experts_per_tok"]:
            raise _bad(path, "experts_per_token", cfg["experts_per_token"],
                       f"num_experts_per_tok ({cfg['num_experts_per_tok']})")
        cfg.setdefault("num_experts_per_tok", cfg.get("experts_per_token"))
        cfg.setdefault("layer_types", ["full_attention" if (i + 1) % 2 == 0 else "sliding_attention"
                                       for i in range(cfg["num_hidden_layers"])])
        # GptOssExperts always carries gate_up_proj_bias and down_proj_bias (no key switches them)
        fields["moe"] = {**_moe(cfg, "num_local_experts", "intermediate_size", path), "expert_bias": True}
        fields["attention_sinks"] = True
        limit = cfg["swiglu_limit"]
        if isinstance(limit, bool) or not isinstance(limit, int | float) or limit < 0:
            raise _bad(path, "swiglu_limit", limit, "a number >= 0 (the clamp of the SwiGLU's halves; 0: none)")
        fields["activation_clamp"] = limit
        _window_layers(cfg, path, fields)
    if family == "gemma3_text":
        fields["qk_norm"] = fields["sandwich_norm"] = True
        _window_layers(cfg, path, fields)
    if family == "llama4_text":
        _llama4(cfg, path, fields)
    if family in ("deepseek_v2", "deepseek_v3", "glm4_moe"):
        _deepseek_like(cfg, fields, path, family)
    if family in ("deepseek_v2", "deepseek_v3"):
        fields["kv_heads"] = None   # MLA: every head has its own keys and values
        fields["attention"] = "mla"
        for key in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            fields[key] = _whole(cfg, key, path, "a width of multi-head latent attention")
        fields["q_lora_rank"] = cfg.get("q_lora_rank") or 0
        fields["head_dim"] = None
        qk = cfg.get("qk_head_dim")   # DeepseekV3Config saves the sum it derives
        if qk is not None and isinstance(cfg.get("qk_nope_head_dim"), int) and isinstance(cfg.get("qk_rope_head_dim"), int) \
                and qk != cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]:
            raise _bad(path, "qk_head_dim", qk, f"qk_nope_head_dim + qk_rope_head_dim "
                       f"({cfg['qk_nope_head_dim'] + cfg['qk_rope_head_dim']})")
    if family == "glm4_moe" and cfg.get("use_qk_norm"):
        fields["qk_norm"] = True
    if fields["head_dim"] is None and fields.get("attention") != "mla" and _divides(cfg):
        # LlamaConfig, MistralConfig, Qwen2Config, ...: head_dim = hidden_size // num_attention_heads when the
        # file leaves it out. Stated here, so that a model.query_width beside the file is checked against
        # it and does not set it (docs/scenario.md, query_width)
        fields["head_dim"] = cfg["hidden_size"] // cfg["num_attention_heads"]
    return fields


def _divides(cfg: dict[str, Any]) -> bool:
    hidden, heads = cfg.get("hidden_size"), cfg.get("num_attention_heads")
    return isinstance(hidden, int) and isinstance(heads, int) and heads > 0 and hidden % heads == 0


def _llama4(cfg: dict[str, Any], path: str, fields: dict[str, Any]) -> None:
    """Llama 4 text: routed experts plus one shared expert of width intermediate_size, dense
    layers of width intermediate_size_mlp, chunked attention on the RoPE layers and full
    attention on the NoPE ones (no_rope_layers[i] = 0), every interleave_moe_layer_step-th layer
    MoE (HF Llama4TextConfig: moe_layers = range(step - 1, layers, step))."""
    layers = cfg["num_hidden_layers"]
    step = cfg["interleave_moe_layer_step"]
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:   # range(step - 1, layers, step) needs >= 1
        raise _bad(path, "interleave_moe_layer_step", step, "a whole number >= 1 (every N-th layer is MoE)")
    # Llama4TextConfig: moe_layers = the file's list, else range(step - 1, layers, step); the decoder
    # layer is MoE when layer_idx in config.moe_layers (Llama4TextDecoderLayer.is_moe_layer)
    listed = cfg.get("moe_layers")
    moe_at = set(_layer_list(cfg, "moe_layers", layers, path)) if listed is not None \
        else set(range(step - 1, layers, step))
    moe = {**_moe(cfg, "num_local_experts", "intermediate_size", path), "shared_experts": 1,
           **_moe_layers([i in moe_at for i in range(layers)], "moe_layers" if listed is not None
                         else "interleave_moe_layer_step", listed if listed is not None else step, path)}
    fields["moe"] = moe
    fields["ffn_hidden"] = cfg.get("intermediate_size_mlp") or cfg.get("intermediate_size")
    fields["qk_norm"] = bool(cfg.get("use_qk_norm"))
    chunk = _window(cfg, "attention_chunk_size", path)
    interval = cfg.get("no_rope_layer_interval", 4)   # HF Llama4TextConfig: every 4th layer NoPE by default
    if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
        raise _bad(path, "no_rope_layer_interval", interval, "a whole number >= 1 (every N-th layer is NoPE)")
    nope = cfg.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(layers)]
    if not isinstance(nope, list) or len(nope) != layers:
        raise _bad(path, "no_rope_layers", nope, f"a list of {layers} entries (1: RoPE and chunked, 0: NoPE and global)")
    types = cfg.get("layer_types")   # transformers >= 4.57 saves the pattern no_rope_layers gives
    if types is not None:
        want = ["chunked_attention" if rope else "full_attention" for rope in nope]
        if types != want:
            raise _bad(path, "layer_types", types, "chunked_attention on the RoPE layers and full_attention on the "
                       "NoPE ones, as no_rope_layers gives them: other patterns are not modelled")
    if chunk is not None:
        fields["attention_pattern"], fields["attention_window"] = "chunked", chunk
        fields["global_every"] = _every([not r for r in nope], "no_rope_layers", nope, path, "NoPE layers")


def read_hf_config(path: str) -> dict[str, Any]:
    """The scenario's model fields of a Hugging Face ``config.json`` (no ``seq_len``: a job setting).
    Their types and bounds are checked by the scenario loader, as for explicit model fields."""
    return read_hf_model(path)[0]


def _defaults_note(cfg: dict[str, Any], family: str) -> tuple[str, ...]:
    """The report's note on the keys the file leaves out and its config class fills in (``DEFAULTS``)."""
    taken = {k: v for k, v in DEFAULTS.get(family, {}).items() if k not in cfg
             and not (k == "sliding_window_pattern" and ("layer_types" in cfg or "_sliding_window_pattern" in cfg))}
    if not taken:
        return ()
    return (f"{CONFIG_CLASSES[family]}'s defaults for keys the file leaves out: "
            + ", ".join(f"{k} {json.dumps(v)}" for k, v in taken.items()),)


def read_hf_model(path: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``read_hf_config``'s fields and the notes for the report: which keys took their config class's
    default (``DEFAULTS``) because the file leaves them out."""
    what = "a Hugging Face config.json, the model folder holding one, or a repository id (Org/Name) in the local " \
           "Hugging Face cache"
    try:
        cfg = read_json_file(locate(path), "model.hf_config", what, max_bytes=MAX_YAML_BYTES)
    except InputError as exc:   # a family clustersim does not read is named first, whatever else its file holds
        _unknown_family_first(locate(path), path)
        raise exc from None
    if not isinstance(cfg, dict):
        raise InputError("model.hf_config", path, "a config.json holding a JSON object")
    family = _family(cfg, path)
    outer, wrapper = cfg, family
    if family in WRAPPERS:
        cfg, family = _unwrap(outer, family, path)
    _check_keys(cfg, family, path)
    fields = {k: v for k, v in _fields(cfg, family, path).items() if v is not None}
    # Meta's and Mistral's totals count the tower (Llama 4, Mistral 3); Gemma 3's report does not
    fields["vision_params"] = vision_params(wrapper, outer, fields["hidden"], path)
    return {k: v for k, v in fields.items() if v is not None}, _defaults_note(cfg, family)


def _unknown_family_first(found: str, path: str) -> None:
    """Exit 2 naming ``model_type`` when a file the strict reader refused (non-finite numbers, as
    nemotron_h's ``time_step_limit: [0.0, Infinity]``) is of a family clustersim does not read."""
    try:
        loose = json.loads(read_text(found, "model.hf_config", "a config.json", MAX_YAML_BYTES))
    except (InputError, ValueError, RecursionError):
        return
    if isinstance(loose, dict) and isinstance(loose.get("model_type"), str):
        _family(loose, path)


def hub_cache() -> Path:
    """The local Hugging Face hub cache, where huggingface_hub puts it: $HF_HUB_CACHE, else
    $HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or "~/.cache/huggingface"
    return Path(home).expanduser() / "hub"


def locate(path: str) -> str:
    """The config.json that ``model.hf_config`` names: the file itself; a model folder holding one;
    or a repository id (``Qwen/Qwen3-8B``) already downloaded to the local hub cache, at the commit
    its ``refs/main`` names (else its last snapshot by name). Nothing is downloaded; a name that is
    none of these is returned as it is, and reading it fails naming the path."""
    written = Path(path).expanduser()
    if written.is_dir() and (written / "config.json").is_file():
        return str(written / "config.json")
    if written.exists() or written.is_absolute() or path.count("/") != 1 or path.endswith(".json"):
        return path
    repo = hub_cache() / ("models--" + path.replace("/", "--"))
    snapshots = sorted((repo / "snapshots").glob("*"), reverse=True)
    try:   # the commit huggingface_hub last resolved main to (a 40-character hash)
        main = (repo / "refs" / "main").read_text(errors="replace").strip()
    except OSError:
        main = ""
    if main and (repo / "snapshots" / main).is_dir():
        snapshots = [repo / "snapshots" / main]
    found = [snap / "config.json" for snap in snapshots if (snap / "config.json").is_file()]
    return str(found[0]) if found else path


def model_name(path: str) -> str:
    """The model's name from where its config.json lies: the folder (``Qwen3-8B/config.json``), or
    the repository of a Hugging Face hub cache (``models--Qwen--Qwen3-8B/snapshots/<commit>/``)."""
    folder = Path(locate(path)).expanduser().absolute().parent
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        return folder.parent.parent.name.removeprefix("models--").replace("--", "/")
    return folder.name or "hf-model"


def families() -> list[str]:
    """The families the reader knows (docs and tests)."""
    return sorted(FAMILIES)
