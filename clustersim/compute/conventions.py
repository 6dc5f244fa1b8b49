"""Model conventions that ModelSpec does not spell out, decided once for compute and memory.

The MLP activation names the family a model belongs to, and the family decides the rest:

| ffn_act       | MLP matrices | norm      | dropout | RoPE | family (source)                                   |
|---------------|--------------|-----------|---------|------|---------------------------------------------------|
| gelu          | 2            | LayerNorm | 0.1     | no   | GPT-3, Megatron-LM SC21/2022 models               |
| relu          | 2            | LayerNorm | 0.1     | no   | OPT (Zhang et al. 2022, arXiv 2205.01068 §2.1)    |
| swiglu        | 3            | RMSNorm   | none    | yes  | Llama 2/3, Mistral, Qwen3, gpt-oss, DeepSeek      |
| geglu         | 3            | RMSNorm   | none    | yes  | Gemma 3 (gelu_pytorch_tanh gate, HF Gemma3 config) |
| squared-relu  | 2            | LayerNorm | none    | yes  | Nemotron-4 (arXiv 2402.16819 §2.1: squared ReLU,  |
|               |              |           |         |      | RoPE, no dropout; Megatron --normalization LayerNorm) |

* Norm: ``ModelSpec.uses_layernorm`` reads the column above (the parameter count needs it too).
* Dropout: GPT-style models train with hidden and attention dropout 0.1 (Megatron-LM
  examples/pretrain_gpt*.sh; Korthikanti et al. 2022 §4.1 counts the dropout masks). Llama-style
  models train without dropout (Llama 2/3 configs: attention_dropout 0.0; Megatron-LM llama
  examples --attention-dropout 0 --hidden-dropout 0). A model's ``dropout: true|false`` overrides
  the family (GLM-130B: GEGLU with Megatron-LM's default dropout 0.1; an HF config with a nonzero
  attention_dropout or hidden_dropout).
* What the activation keeps for its backward beyond the fc2 input (``activation_saved_widths``):
  GeLU its input (torch gelu_backward reads x; Megatron bias_gelu_back too); ReLU nothing (its
  backward reads its output, which is the fc2 input: threshold_backward); squared ReLU
  ``relu(x)**2`` the ReLU output (pow's backward reads its input); fused SwiGLU / GeGLU the fc1
  output, gate and up (megatron/core/fusions/fused_bias_swiglu.py and fused_bias_geglu.py save
  their input); eager gated units ``w2(act(w1 x) * w3 x)`` keep w1's output, the activation's
  output and w3's output (torchtitan FeedForward).
"""

from __future__ import annotations

from clustersim.workload.model_spec import GATED_ACTS, ModelSpec

_DROPOUT_ACTS = ("gelu", "relu")
_ROPE_ACTS = ("swiglu", "geglu", "squared-relu")


def uses_dropout(model: ModelSpec) -> bool:
    """Attention and hidden dropout: the model's own ``dropout`` where stated, else the family's."""
    if model.dropout is not None:
        return model.dropout
    return model.ffn_act in _DROPOUT_ACTS


def norm_statistics(model: ModelSpec) -> int:
    """fp32 statistics a norm keeps per token: LayerNorm mean and rstd (2), RMSNorm rstd (1)."""
    return 2 if model.uses_layernorm else 1


def uses_rope(model: ModelSpec) -> bool:
    """Rotary embeddings applied to Q and K as a separate op (MLA applies its own)."""
    return model.ffn_act in _ROPE_ACTS and not model.is_mla


def local_kv_heads(model: ModelSpec, tp: int) -> int:
    """KV heads per TP rank; with kv_heads < tp Megatron replicates each KV head over tp/kv_heads ranks."""
    return max(1, model.kv_heads // tp)


def gated_factor(model: ModelSpec) -> int:
    """Output columns of the first MLP GEMM per ffn_hidden: 2 for gated units (gate and up fused), else 1."""
    return 2 if model.ffn_act in GATED_ACTS else 1


def activation_saved_widths(model: ModelSpec, eager: bool = False) -> int:
    """Elements per token and MLP column that the activation keeps for the backward besides the
    fc2 input (module docstring): 1 for GeLU and squared ReLU, 0 for ReLU, 2 for a fused gated unit
    (its fc1 output, gate and up), 3 for an eager one."""
    if model.ffn_act in GATED_ACTS:
        return 3 if eager else 2
    return 0 if model.ffn_act == "relu" else 1


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
