"""How many query-key pairs a causal attention layer computes under its pattern: full, sliding
window or chunked (clustersim.workload.model_spec, ``attention_pattern``).

Useful pairs (what the model FLOPs count, clustersim.compute.flops). With ``s`` tokens:

* full causal attention: ``s^2 / 2`` pairs;
* a sliding window of ``W`` tokens (each query sees itself and the ``W - 1`` keys before it;
  Mistral 7B, Jiang et al. 2023, arXiv 2310.06825 §2; Longformer, Beltagy et al. 2020, arXiv
  2004.05150 §3.1): ``s W - W^2 / 2`` pairs for ``W <= s`` (the first ``W`` queries form a
  triangle of ``W^2 / 2``, the other ``s - W`` see ``W`` keys each);
* chunked attention with chunks of ``C`` tokens (each query sees the keys of its own chunk up to
  itself; Llama 4's attention_chunk_size, HF transformers Llama4 chunked causal mask): every full
  chunk a triangle of ``C^2 / 2``, the last partial chunk of ``r`` tokens ``r^2 / 2``.

The model-FLOPs formulas count attention "without the causal discount" (Narayanan et al. 2021
eq. 3 counts ``s^2``, twice the causal pairs), so ``equivalent_square`` returns twice the pairs:
``s^2`` for full attention, ``2 s W - W^2`` for a window, ``n C^2 + r^2`` for chunks; each falls
back to ``s^2`` when the span covers the sequence.

Kernel work (``block_fraction``): a flash-attention kernel computes whole ``B x B`` tiles and skips
tiles that lie entirely outside the mask (FlashAttention-2, Dao 2023, arXiv 2307.08691, §3.1.1
"Causal masking": blocks above the diagonal are skipped; its ``window_size`` argument for local
attention skips the blocks left of the window the same way, flash_attn_func docstring). Query
block ``j`` (rows ``jB .. jB+B-1``) needs key blocks from the one holding its first key:

* full causal: blocks ``0 .. j`` (``j + 1``);
* sliding window: from block ``floor((jB - W + 1) / B)``, i.e. ``min(j + 1, m)`` blocks with
  ``m = ceil((W - 1) / B) + 1`` (the edge tiles are computed in full and masked);
* chunked: from the first block of its chunk, ``j - jc + 1`` blocks with ``jc`` that block
  (chunks of ``ceil(C / B)`` blocks when ``B`` divides ``C``, as Llama 4's 8192 does).

``block_fraction`` is the computed tiles over all ``n^2`` tiles (``n = ceil(s / B)``), so that
``fraction x s_q x s_k`` is the kernel's work, and ``blocks_per_query_block`` the mean number of
key blocks one query block visits (the per-block overhead ramp of clustersim.compute.attention).
For full causal attention these are ``(n + 1) / (2 n)`` and ``(n + 1) / 2``, the existing causal
figures.
"""

from __future__ import annotations

import math

from clustersim.workload.model_spec import ModelSpec


def equivalent_square(s: int, pattern: str = "full", window: int = 0) -> int:
    """Twice the useful causal query-key pairs over ``s`` tokens (``s^2`` for full attention)."""
    if pattern == "full" or window <= 0 or window >= s:
        return s * s
    if pattern == "sliding":
        return 2 * s * window - window * window
    full, rest = divmod(s, window)      # chunked
    return full * window * window + rest * rest


def _computed_tiles(n: int, pattern: str, window: int, block: int) -> int:
    """Tiles a flash kernel computes for ``n`` query blocks over ``n`` key blocks (causal)."""
    if pattern == "sliding":
        m = math.ceil((window - 1) / block) + 1
        if n <= m:
            return n * (n + 1) // 2
        return m * (m + 1) // 2 + (n - m) * m
    # chunked: each query block visits the blocks from its chunk's first block to itself
    tiles = 0
    for j in range(n):
        first = (j * block // window) * window // block
        tiles += j - first + 1
    return tiles


def block_fraction(s: int, pattern: str, window: int, block: int) -> tuple[float, float]:
    """(fraction of the ``s x s`` scores a causal flash kernel computes, mean key blocks per query
    block) for a local ``pattern`` (module docstring). Full attention is not priced here."""
    n = max(1, math.ceil(s / block))
    tiles = _computed_tiles(n, pattern, window, block)
    return tiles / (n * n), tiles / n


def layer_span(model: ModelSpec, local: bool) -> tuple[str, int]:
    """The (pattern, window) a layer of ``model`` attends with (``local``: LayerKind.local): the
    model's local pattern, or full attention."""
    if local and model.has_local_attention:
        return model.attention_pattern, model.attention_window
    return "full", 0
