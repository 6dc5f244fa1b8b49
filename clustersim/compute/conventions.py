"""Model conventions that ModelSpec does not spell out, decided once for compute and memory.

* Dropout: GPT-style models (GELU MLP: GPT-3, the Megatron-LM SC21/2022 models) train with
  hidden and attention dropout 0.1 (Megatron-LM examples/pretrain_gpt*.sh; Korthikanti et al.
  2022 §4.1 counts the dropout masks). Llama-style models (SwiGLU) train without dropout
  (Llama 2/3 configs: attention_dropout 0.0; Megatron-LM llama examples --attention-dropout 0
  --hidden-dropout 0). So dropout masks exist iff ``ffn_act == "gelu"``.
"""

from __future__ import annotations

from clustersim.workload.model_spec import ModelSpec


def uses_dropout(model: ModelSpec) -> bool:
    return model.ffn_act == "gelu"


def local_kv_heads(model: ModelSpec, tp: int) -> int:
    """KV heads per TP rank; with kv_heads < tp Megatron replicates each KV head over tp/kv_heads ranks."""
    return max(1, model.kv_heads // tp)


def gated_factor(model: ModelSpec) -> int:
    """Output columns of the first MLP GEMM per ffn_hidden: 2 for SwiGLU (gate and up fused), 1 for GELU."""
    return 2 if model.ffn_act == "swiglu" else 1


ATTENTION_IMPLS = ("auto", "flash", "standard")


def resolve_attention(attention: str, gpu_name: str) -> str:
    """The attention core implementation: "flash" (fused, FlashAttention-2/3, cuDNN/TE fused
    attention) or "standard" (unfused QK^T, softmax, dropout, PV).

    A scenario resolves "auto" by its framework (clustersim/data/frameworks.yaml: flash for
    megatron-core, torchtitan and deepspeed; standard for megatron-legacy, the fused-softmax
    kernels of the 2021-22 Megatron-LM papers) when it is built. "auto" reaching this function
    (cost functions called without a scenario) takes the default framework's kernel, flash, on
    every GPU generation: since 2023 every framework runs flash attention on A100 as on Hopper.
    """
    if attention not in ATTENTION_IMPLS:
        from clustersim.errors import InputError
        raise InputError("attention", attention, ATTENTION_IMPLS)
    return "flash" if attention == "auto" else attention
