"""The parameters of a multimodal config's vision tower, where the owner's total counts them.

Llama 4 (Meta's model card: "17B active, 109B total" for Scout, "400B total" for Maverick, the
vision encoder included) multiplied out from its ``vision_config`` as HF transformers builds
``Llama4VisionModel`` (models/llama4/modeling_llama4.py, v4.51): a ``patch x patch`` convolution
from 3 channels (no bias), a class embedding and the positional embeddings of every patch and the
class token, two LayerNorms around the encoder (weight and bias), ``num_hidden_layers`` encoder
layers (Q, K, V and O projections and the two MLP matrices, each with a bias; two LayerNorms),
the pixel-shuffle adapter MLP (``hidden / pixel_shuffle_ratio^2 -> projector_input_dim ->
projector_output_dim``, no biases) and the projector to the text width (no bias).

Mistral 3 (mistralai/Mistral-Small-3.1-24B-*-2503, 3.2-24B-Instruct-2506: "24B", the vision
encoder included: 23.57B of text model + 0.44B) multiplied out from its ``vision_config`` as HF
transformers builds ``PixtralVisionModel`` (models/pixtral/modeling_pixtral.py) and the
``Mistral3MultiModalProjector`` (models/mistral3/modeling_mistral3.py): a ``patch x patch``
convolution from ``num_channels`` (no bias), an RMSNorm before the encoder, ``num_hidden_layers``
layers (Q, K, V and O projections and a gated MLP of three matrices, no biases; two RMSNorms; RoPE,
no positional parameters), then the projector: an RMSNorm, the patch merger
(``hidden * spatial_merge_size^2 -> hidden``, no bias) and two linears to the text width
(``hidden * feature layers -> text hidden -> text hidden``, biased when
``multimodal_projector_bias``).

clustersim times the language model only: the tower enters ``model.params`` and the checkpoint,
never the step time or the memory (clustersim.workload.model_spec, ``vision_params``). Gemma 3's
report counts its vision encoder apart from the 27B, so a Gemma 3 config adds none.
"""

from __future__ import annotations

from typing import Any

from clustersim.errors import InputError

PIXTRAL_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "patch_size")
LLAMA4_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "patch_size", "image_size",
               "pixel_shuffle_ratio", "projector_input_dim", "projector_output_dim", "vision_output_dim")


def vision_params(wrapper: str, outer: dict[str, Any], text_hidden: int, path: str) -> int | None:
    """The vision tower's parameters where the owner's total counts them (``wrapper``: the
    multimodal config's model_type; ``outer``: its whole file), else None (Gemma 3, a text-only file)."""
    if "vision_config" not in outer:
        return None
    if wrapper == "llama4":
        return llama4_vision_params(outer["vision_config"], text_hidden, path)
    if wrapper == "mistral3":
        return pixtral_vision_params(outer, text_hidden, path)
    return None


def _checked(vision: Any, keys: tuple[str, ...], what: str, path: str) -> dict[str, Any]:
    if not isinstance(vision, dict):
        raise InputError(f"model.hf_config ({path}): vision_config", vision, f"a JSON object ({what})")
    for key in keys:
        value = vision.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise InputError(f"model.hf_config ({path}): vision_config.{key}", value, "a positive number")
    return vision


def pixtral_vision_params(outer: dict[str, Any], text_hidden: int, path: str) -> int:
    """Parameters of Mistral 3's Pixtral tower and multimodal projector (module docstring)."""
    vision = _checked(outer["vision_config"], PIXTRAL_KEYS, "Mistral 3's Pixtral vision tower", path)
    h, f, n, p = (int(vision[k]) for k in PIXTRAL_KEYS)
    channels, merge = vision.get("num_channels", 3), outer.get("spatial_merge_size", 2)
    for key, value in (("vision_config.num_channels", channels), ("spatial_merge_size", merge)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"model.hf_config ({path}): {key}", value, "a whole number >= 1")
    layer = 4 * h * h + 3 * h * f + 2 * h
    feature = outer.get("vision_feature_layer", -1)   # one layer (an int) or a list of layers, concatenated
    features = len(feature) if isinstance(feature, list) and feature else 1
    bias = bool(outer.get("multimodal_projector_bias"))
    projector = h + h * merge * merge * h + (h * features * text_hidden + bias * text_hidden) \
        + (text_hidden * text_hidden + bias * text_hidden)
    return channels * p * p * h + h + n * layer + projector


def llama4_vision_params(vision: Any, text_hidden: int, path: str) -> int:
    """Parameters of Llama 4's vision tower and projector (module docstring)."""
    _checked(vision, LLAMA4_KEYS, "Llama 4's vision tower", path)
    h, f, n, p = (int(vision[k]) for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "patch_size"))
    tokens = (int(vision["image_size"]) // p) ** 2 + 1
    layer = 4 * (h * h + h) + (h * f + f) + (f * h + h) + 4 * h
    shuffled = int(h / float(vision["pixel_shuffle_ratio"]) ** 2)
    proj_in, proj_out = int(vision["projector_input_dim"]), int(vision["projector_output_dim"])
    adapter = shuffled * proj_in + proj_in * proj_out
    return 3 * p * p * h + h + tokens * h + 4 * h + n * layer + adapter + int(vision["vision_output_dim"]) * text_hidden
