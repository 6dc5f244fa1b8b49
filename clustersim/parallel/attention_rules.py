"""Rules on the model language that involve the layout (exit 2 naming the field and what is allowed).

* Local attention and context parallelism: Transformer Engine runs sliding-window attention under
  context parallelism only with the all-to-all (Ulysses) exchange ("The context parallel running
  configs cannot support sliding window attention!", transformer_engine/pytorch/attention/
  dot_product_attention/context_parallel.py, attn_forward_func_with_cp: ``cp_comm_type`` a2a or
  all_gather); learned softmax offsets (attention sinks, ``softmax_type`` learnable) likewise
  need a2a (get_attention_backend in the same package's utils.py, "Filter: Softmax type").
  Chunked attention (Llama 4) is held to the same rule: a ring step's key block crosses chunk
  boundaries as it crosses a window's edge.
``clustersim.parallel.rules.check_extensions`` calls ``check_attention_layout``.
"""

from __future__ import annotations

from clustersim.errors import InputError
from clustersim.parallel.layout import ParallelLayout
from clustersim.workload.model_spec import ModelSpec


def a2a_required(model: ModelSpec) -> str:
    """Why ``model`` runs context parallelism with the all-to-all exchange only ("" if it does not):
    local attention layers or attention sinks (module docstring)."""
    if model.has_local_attention:
        return (f"a model with {model.attention_pattern} attention layers (Transformer Engine's context "
                "parallelism runs local attention with the all-to-all exchange only)")
    if model.attention_sinks:
        return ("a model with attention sinks (Transformer Engine's context parallelism runs learned softmax "
                "offsets with a2a only)")
    return ""


def check_attention_layout(model: ModelSpec, par: ParallelLayout) -> None:
    if par.cp <= 1 or par.cp_comm == "a2a":
        return
    why = a2a_required(model)
    if why:
        raise InputError("parallel.cp_comm", par.cp_comm, f"a2a for {why}, or cp 1")
