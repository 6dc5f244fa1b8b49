"""PyTorch's caching allocator: memory reserved above the allocated peak (fragmentation).

The allocator (c10/cuda/CUDACachingAllocator.cpp) never moves blocks; it splits cached segments
and keeps a pool per stream, so a step's interleaved allocation lifetimes leave free pieces too
small or on the wrong stream for the next request, and ``max_memory_reserved`` exceeds
``max_memory_allocated``. The states (weights, gradients, optimizer) are allocated once, at
start-up, in large exact blocks; the fragmentation comes from what is allocated and freed every
step (activations, transients, buffers).

FRAGMENTATION: GMLake (Guo et al., ASPLOS 2024, arXiv 2401.08156, abstract and §6) measured the
caching allocator's fragmentation on eight LLMs on A100 80 GB and removed on average 15% (up to
33%) of the reserved memory by defragmenting; taken as the share of the churned memory that is
reserved but not allocated: reserved = allocated / (1 - 0.15) on that part. The evidence
interval (evidence.py) covers how far real runs land from it.
"""

from __future__ import annotations

FRAGMENTATION_SHARE = 0.15                       # of the reserved churned memory (GMLake, see above)
FRAGMENTATION = FRAGMENTATION_SHARE / (1.0 - FRAGMENTATION_SHARE)   # as a fraction of the allocated part


def fragmentation_bytes(churned_bytes: float) -> float:
    """Reserved above allocated for ``churned_bytes`` of per-step allocations."""
    return max(0.0, churned_bytes) * FRAGMENTATION
