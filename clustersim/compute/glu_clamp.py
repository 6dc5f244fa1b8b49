"""The clamp of a gated activation's input (gpt-oss's ``swiglu_limit``; ``ModelSpec.activation_clamp``).

gpt-oss clamps the two halves of the fc1 output before its SwiGLU: the gate half from above
(``x_glu.clamp(max=v)``), the linear half on both sides (``x_linear.clamp(-v, v)``). No framework
fuses the clamp into its activation kernel; each runs it as eager torch ops on halves of ``f``
elements per token (``f`` the activation's output width), in the activation dtype (``a`` bytes):

* Megatron-Core's routed experts (megatron/core/fusions/fused_bias_geglu.py at Megatron-LM
  2edffadb, the commit Megatron-Bridge v0.4.2 pins, ``weighted_bias_quick_geglu_impl`` lines
  423-432: ``input.chunk(2, -1)``, the two clamps, ``torch.cat`` back into one tensor for the
  fused quick-GEGLU; called by TEGroupedMLP.bias_act_func, megatron/core/transformer/moe/
  experts.py lines 291-299, with ``activation_func_clamp_value``, which Megatron-Bridge's
  gpt_oss_bridge.py at 067f987df sets to 7.0): forward 3 kernels, the clamps reading and writing
  ``f`` elements each and the cat reading and writing ``2f``: ``8 f a`` bytes.
* eager frameworks (torchtitan's gpt-oss, torchtitan/models/gpt_oss/moe.py ``swiglu`` at b5bcd76c6;
  HF transformers GptOssExperts) and the dense MLP in Megatron-Core, whose fused activations take
  no clamp value (megatron/core/transformer/mlp.py at 2edffadb: ``bias_swiglu_impl`` and
  ``bias_geglu_impl``, lines 288-303, are called without it), so that a clamp runs in its
  unfused ``glu`` (lines 312-316): the two clamps on the halves, no cat: 2 kernels, ``4 f a`` bytes.

Backward: autograd's clamp backward (torch/csrc/autograd/FunctionsManual.cpp ``clamp_backward``:
``where((self >= min).logical_and_(self <= max), grad, zero)``, ``where(self <= max, grad, zero)``
for the one-sided clamp, ``zero = at::scalar_tensor(0., grad.options())``, one fill kernel on the
GPU). Per element of a half, with 1-byte masks: the two-sided clamp runs a fill, ``ge`` (read a,
write 1), ``le`` (read a, write 1), ``logical_and_`` (read 2, write 1) and ``where`` (read 1 + a,
write a): ``4a + 6`` bytes, 5 kernels; the one-sided one a fill, ``le`` and ``where``: ``3a + 2``
bytes, 3 kernels. In Megatron's experts the cat's backward hands the fused kernel's input
gradient back as two views (no kernel), and the chunk's backward concatenates the two clamp
gradients into the fc1 output's gradient (``SplitBackward``: one cat, read and write ``2f``,
``4 f a`` bytes); without the clamp the fused kernel's gradient was that tensor. Eager frameworks
slice their halves with or without the clamp, so the clamp adds only its own backward.
Recorded with torch 2.13's dispatcher (``TorchDispatchMode``) by tests/compute/test_glu_clamp.py.
"""

from __future__ import annotations

from clustersim.compute.eager import eager_op
from clustersim.compute.layer_context import LayerContext
from clustersim.compute.ops import Op

MASK_BYTES = 1   # a torch.bool mask element (clamp_backward's comparisons)


def clamp_fwd_bytes_kernels(half_elements: float, act_b: int, cat: bool) -> tuple[float, int]:
    """(bytes, kernels) of the clamps' forward over halves of ``half_elements`` each; ``cat``:
    Megatron's fused expert path, which concatenates the clamped halves (module docstring)."""
    clamps = 2 * (2 * half_elements * act_b)                 # each half read and written
    if cat:
        return clamps + 2 * (2 * half_elements * act_b), 3   # cat: read and write both halves
    return clamps, 2


def clamp_bwd_bytes_kernels(half_elements: float, act_b: int, cat: bool) -> tuple[float, int]:
    """(bytes, kernels) of the clamps' backward (module docstring); ``cat``: with the chunk's
    backward that concatenates the halves' gradients."""
    two_sided = (2 * (act_b + MASK_BYTES) + 3 * MASK_BYTES + (MASK_BYTES + 2 * act_b)) * half_elements
    one_sided = ((act_b + MASK_BYTES) + (MASK_BYTES + 2 * act_b)) * half_elements
    nbytes, kernels = two_sided + one_sided, 5 + 3
    if cat:
        return nbytes + 2 * (2 * half_elements * act_b), kernels + 1
    return nbytes, kernels


def clamp_ops(c: LayerContext, name: str, rows: float, width: int, cat: bool, backward: bool = False) -> list[Op]:
    """The clamp before a gated activation over ``rows`` x ``width`` outputs, as one op (none
    without ``model.activation_clamp``): forward or ``backward``, bytes and kernels as the module
    docstring counts them; ``cat``: Megatron's fused expert path."""
    if not c.model.activation_clamp:
        return []
    rule = clamp_bwd_bytes_kernels if backward else clamp_fwd_bytes_kernels
    nbytes, kernels = rule(rows * width, c.act_b, cat)
    return [eager_op(name, nbytes, kernels, c.gpu)]
