"""The parameters of a multimodal config's vision tower, where the owner's total counts them.

Llama 4 (Meta's model card: "17B active, 109B total" for Scout, "400B total" for Maverick, the
vision encoder included) multiplied out from its ``vision_config`` as HF transformers builds
``Llama4VisionModel`` (models/llama4/modeling_llama4.py, v4.51): a ``patch x patch`` convolution
from 3 channels (no bias), a class embedding and the positional embeddings of every patch and the
class token, two LayerNorms around the encoder (weight and bias), ``num_hidden_layers`` encoder
layers (Q, K, V and O projections and the two MLP matrices, each with a bias; two LayerNorms),
the pixel-shuffle adapter MLP (``hidden / pixel_shuffle_ratio^2 -> projector_input_dim ->
projector_output_dim``, no biases) and the projector to the text width (no bias).

clustersim times the language model only: the tower enters ``model.params`` and the checkpoint,
never the step time or the memory (clustersim.workload.model_spec, ``vision_params``). Gemma 3's
report counts its vision encoder apart from the 27B, so a Gemma 3 config adds none.
"""

from __future__ import annotations

from typing import Any

from clustersim.errors import InputError

LLAMA4_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "patch_size", "image_size",
               "pixel_shuffle_ratio", "projector_input_dim", "projector_output_dim", "vision_output_dim")


def llama4_vision_params(vision: Any, text_hidden: int, path: str) -> int:
    """Parameters of Llama 4's vision tower and projector (module docstring)."""
    if not isinstance(vision, dict):
        raise InputError(f"model.hf_config ({path}): vision_config", vision, "a JSON object (Llama 4's vision tower)")
    for key in LLAMA4_KEYS:
        value = vision.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise InputError(f"model.hf_config ({path}): vision_config.{key}", value, "a positive number")
    h, f, n, p = (int(vision[k]) for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "patch_size"))
    tokens = (int(vision["image_size"]) // p) ** 2 + 1
    layer = 4 * (h * h + h) + (h * f + f) + (f * h + h) + 4 * h
    shuffled = int(h / float(vision["pixel_shuffle_ratio"]) ** 2)
    proj_in, proj_out = int(vision["projector_input_dim"]), int(vision["projector_output_dim"])
    adapter = shuffled * proj_in + proj_in * proj_out
    return 3 * p * p * h + h + tokens * h + 4 * h + n * layer + adapter + int(vision["vision_output_dim"]) * text_hidden
