"""Megatron-Core's fc2 bias of the routed experts, added expert by expert (``ModelSpec.moe_expert_bias``).

With ``add_bias_linear`` (Megatron-Bridge's gpt_oss_bridge.py at 067f987df sets it for gpt-oss)
TEGroupedMLP's fc1 adds its bias inside TE's GroupedLinear (``skip_bias_add=False``: no op of
its own), but its fc2 returns the bias (``skip_bias_add=True``) and ``TEGroupedMLP._apply_bias``
(megatron/core/transformer/moe/experts.py at Megatron-LM 2edffadb, lines 250-268, called at
line 398 after linear_fc2) adds it in a Python loop over the rank's local experts, weighted by
each token's routing probability::

    torch.cat([t + b * p for t, b, p in zip(split(out, tokens_per_expert), biases,
                                              split(probs, tokens_per_expert))]).view(shape).to(out.dtype)

with ``t`` an expert's ``tokens_e x h`` rows of the fc2 output (activation dtype, ``a`` bytes),
``b`` its ``[h]`` bias and ``p`` its tokens' ``[tokens_e, 1]`` routing probabilities. ``p`` is
fp32 under the flex dispatcher (DeepEP and HybridEP take only fp32 probabilities and cast them:
megatron/core/transformer/moe/token_dispatcher.py at 2edffadb, lines 1033-1039 and 1182-1188) and
otherwise in the router's output dtype, the activation dtype (router.py lines 101-106 without
``moe_router_dtype``, which gpt-oss's bridge leaves unset; TE's fused router writes its
probabilities in the logits' dtype). The sum runs in the wider of the two dtypes (``q`` bytes);
the final cast is a kernel only when that is wider than the activations.

Counted per element of the ``tokens x h`` rows of the rank (``E`` of them), the ``[h]`` and
``[tokens_e]`` reads and writes left out (one row beside ``tokens_e`` rows):

* forward, per local expert ``b * p`` (write q) and the add (read a + q, write q), then the cat
  (read q, write q) and, with ``q > a``, the cast (read q, write a): ``5q + a (+ q + a)`` bytes,
  ``2 x local experts + 1 (+ 1)`` kernels. Not recomputed by ``--recompute-modules moe_act``
  (its checkpoint covers bias_act_func only, experts.py lines 379-390).
* backward, as autograd runs it (recorded with torch 2.13's dispatcher by
  tests/compute/test_expert_bias.py): the cast's backward (read a, write q; with the cast only),
  the cat's backward (views); per local expert, the add hands ``t`` its gradient (cast to the
  activation dtype when ``q > a``: read q, write a) and the mul's backward forms ``grad x p`` for
  ``b`` (read q, write q), reduces it over the expert's tokens (read q; a cast of the ``[h]`` result
  when ``q > a``) and forms ``grad x b`` for ``p`` (read q, write q) and reduces it over ``h``
  (read q); then the splits' backwards concatenate the experts' gradients of ``t`` (read a, write
  a) and of ``p`` (``tokens x 1``): ``6q + 2a (+ 2(q + a))`` bytes, ``4 x local experts + 2`` kernels
  (``6 x local experts + 3`` with the casts).

Other frameworks are not priced here (torchtitan's gpt-oss adds its expert biases with
``repeat_interleave`` and an add, torchtitan/models/gpt_oss/moe.py at b5bcd76c6; not modelled).
"""

from __future__ import annotations

from clustersim.compute.eager import eager_op
from clustersim.compute.layer_context import LayerContext
from clustersim.compute.ops import Op

FP32_BYTES = 4


def probs_bytes(c: LayerContext) -> int:
    """Bytes of one routing probability as the experts receive it (module docstring)."""
    return FP32_BYTES if c.model.moe_token_dispatcher == "flex" else c.act_b


def bias_fwd_bytes_kernels(elements: float, local_experts: int, act_b: int, q: int) -> tuple[float, int]:
    """(bytes, kernels) of ``_apply_bias``'s forward over ``elements`` = tokens x h (module docstring)."""
    cast = q > act_b
    return elements * (5 * q + act_b + (q + act_b if cast else 0)), 2 * local_experts + 1 + int(cast)


def bias_bwd_bytes_kernels(elements: float, local_experts: int, act_b: int, q: int) -> tuple[float, int]:
    """(bytes, kernels) of ``_apply_bias``'s backward (module docstring)."""
    cast = q > act_b
    nbytes = elements * (6 * q + 2 * act_b + (2 * (q + act_b) if cast else 0))
    return nbytes, int(cast) + local_experts * (4 + 2 * int(cast)) + 2


def expert_bias_ops(c: LayerContext, name: str, tokens: float, local_experts: int,
                    backward: bool = False) -> list[Op]:
    """Megatron's fc2 bias loop over ``tokens`` expert rows of this GPU's ``local_experts`` as one
    op (none unless the model's experts have biases and the framework is Megatron's:
    ``LayerContext.expert_bias_loop``)."""
    if not c.expert_bias_loop:
        return []
    q = max(c.act_b, probs_bytes(c))
    rule = bias_bwd_bytes_kernels if backward else bias_fwd_bytes_kernels
    nbytes, kernels = rule(tokens * c.h, local_experts, c.act_b, q)
    return [eager_op(name, nbytes, kernels, c.gpu)]
