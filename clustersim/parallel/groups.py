"""Rank-group arithmetic for the order "tp-cp-ep-dp-pp" (Megatron-core's default order).

Pure functions of a :class:`~clustersim.parallel.layout.ParallelLayout`; no I/O, no state.

Dense grid (tensor, context, data, pipeline; ``tp`` varies fastest)::

    rank = tp_i + tp * (cp_i + cp * (dp_i + dp * pp_i))

with ``0 <= tp_i < tp``, ``0 <= cp_i < cp``, ``0 <= dp_i < dp``, ``0 <= pp_i < pp``. This is
Megatron-core's ``RankGenerator`` with ``order="tp-cp-ep-dp-pp"`` (megatron/core/parallel_state.py,
``generate_masked_orthogonal_rank_groups``): the rank is a mixed-radix number whose digits are the
coordinates, the first named axis being the least significant digit.

Expert grid (MoE parallel folding, Liu et al. 2025, arXiv 2504.14960; Megatron-core
parallel_state.py builds a separate expert ``RankGenerator`` with tp = expert_tensor_parallel_size,
ep, dp = expert data parallel and the same pp, order "tp-ep-dp-pp"): the ``tp * cp * dp`` ranks
of one pipeline stage are re-read as ``etp * ep * edp``. Writing ``l = rank mod (tp * cp * dp)``
for a rank's position in its stage::

    l = etp_i + etp * (ep_i + ep * edp_i)   (0 <= etp_i < etp, 0 <= ep_i < ep, 0 <= edp_i < edp)

so an expert-parallel group has stride ``etp`` and size ``ep`` and the expert-data-parallel group
("edp") strides over the ``etp * ep`` blocks. With ``etp = tp`` (Megatron's default) an EP group
is a block of ``ep`` consecutive ``cp * dp`` positions sharing ``tp_i``.

A group of axis ``a`` is the set of ranks that agree on every coordinate except ``a``. Axes:
``tp``, ``cp``, ``dp``, ``pp`` (the dense grid), ``ep`` and ``edp`` (the expert grid), and
``dp_cp`` (the ``cp * dp`` ranks that reduce gradients together when ``cp > 1``, Megatron's
"dp-cp" group).

Worked example, 8 GPUs, tp=2, cp=1, dp=2, pp=2, ep=2 (rank = tp_i + 2*dp_i + 4*pp_i)::

    tp groups:  (0, 1) (2, 3) (4, 5) (6, 7)
    dp groups:  (0, 2) (1, 3) (4, 6) (5, 7)
    pp groups:  (0, 4) (1, 5) (2, 6) (3, 7)
    ep groups:  (0, 2) (1, 3) (4, 6) (5, 7)      (ep = dp here: experts spread over the replicas)
    edp groups: (0,) (1,) (2,) (3,) (4,) (5,) (6,) (7,)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from clustersim.parallel.layout import ParallelLayout

AXES = ("tp", "cp", "dp", "pp", "ep", "edp", "dp_cp", "etp")
FSDP_AXES = ("fsdp_shard", "fsdp_replicate")  # HSDP's sub-groups of dp_cp (ZeRO-3 only)
CP_AXES = ("cp_a2a", "cp_p2p")  # hierarchical context parallelism: all-to-all inside, ring across


@dataclass(frozen=True, slots=True)
class Coords:
    """The coordinates of one rank on every axis (``ep``/``edp`` follow from ``cp``/``dp``)."""

    tp: int
    cp: int
    dp: int
    pp: int
    ep: int
    edp: int


def _check_layout(layout: ParallelLayout) -> None:
    for name in ("tp", "cp", "dp", "pp", "ep"):
        value = getattr(layout, name)
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    stage = layout.tp * layout.cp * layout.dp
    if stage % (layout.ep * layout.etp):
        raise ValueError(f"ep * expert_tp ({layout.ep} * {layout.etp}) must divide tp * cp * dp ({stage})")


def coords(rank: int, layout: ParallelLayout) -> Coords:
    """The coordinates of ``rank`` (inverse of :func:`rank_of`)."""
    _check_layout(layout)
    if not 0 <= rank < layout.num_gpus:
        raise ValueError(f"rank {rank} outside 0..{layout.num_gpus - 1}")
    tp_i = rank % layout.tp
    rest = rank // layout.tp
    cp_i = rest % layout.cp
    rest //= layout.cp
    dp_i = rest % layout.dp
    pp_i = rest // layout.dp
    e = (rank % (layout.tp * layout.cp * layout.dp)) // layout.etp
    return Coords(tp=tp_i, cp=cp_i, dp=dp_i, pp=pp_i, ep=e % layout.ep, edp=e // layout.ep)


def rank_of(c: Coords, layout: ParallelLayout) -> int:
    """The rank at coordinates ``c`` (uses tp, cp, dp, pp; ep/edp must agree with them)."""
    _check_layout(layout)
    for name, size in (("tp", layout.tp), ("cp", layout.cp), ("dp", layout.dp), ("pp", layout.pp)):
        value = getattr(c, name)
        if not 0 <= value < size:
            raise ValueError(f"coordinate {name}={value} outside 0..{size - 1}")
    rank = c.tp + layout.tp * (c.cp + layout.cp * (c.dp + layout.dp * c.pp))
    e = (rank % (layout.tp * layout.cp * layout.dp)) // layout.etp
    if (c.ep, c.edp) != (e % layout.ep, e // layout.ep):
        raise ValueError(f"ep/edp coordinates {c.ep}/{c.edp} disagree with tp/cp/dp {c.tp}/{c.cp}/{c.dp}")
    return rank


def stride_and_size(layout: ParallelLayout, axis: str) -> tuple[int, int]:
    """Every group of ``axis`` is an arithmetic progression of ranks: (stride, size).

    From the rank equation: cp moves in steps of tp, dp in steps of tp * cp, pp in steps of
    tp * cp * dp; in the expert grid ep moves in steps of etp and edp in steps of etp * ep.
    """
    tp, cp, dp, pp, ep, etp = layout.tp, layout.cp, layout.dp, layout.pp, layout.ep, layout.etp
    table = {
        "tp": (1, tp),
        "cp": (tp, cp),
        "dp": (tp * cp, dp),
        "pp": (tp * cp * dp, pp),
        "ep": (etp, ep),
        "edp": (etp * ep, tp * cp * dp // (etp * ep)),
        "dp_cp": (tp, cp * dp),
        "etp": (1, etp),
        # a2a+p2p context parallelism (Megatron --hierarchical-context-parallel-sizes [a2a, p2p]):
        # the first a2a consecutive cp positions run the all-to-all, the ring strides over them
        "cp_a2a": (tp, layout.cp_a2a),
        "cp_p2p": (tp * layout.cp_a2a, layout.cp_p2p),
        # HSDP (ZeRO-3 with parallel.fsdp.hsdp_replicas = R): the dp_cp ranks split into R blocks of
        # consecutive positions that each shard the model (torch DeviceMesh (replicate, shard), shard
        # innermost), and the R ranks at one position that replicate it
        "fsdp_shard": (tp, cp * dp // layout.hsdp_replicas),
        "fsdp_replicate": (tp * cp * dp // layout.hsdp_replicas, layout.hsdp_replicas),
    }
    if axis not in table:
        raise ValueError(f"unknown axis {axis!r}; allowed: {', '.join((*AXES, *FSDP_AXES, *CP_AXES))}")
    return table[axis]


@lru_cache(maxsize=256)
def rank_groups(layout: ParallelLayout, axis: str) -> tuple[tuple[int, ...], ...]:
    """All groups of ``axis``: each a sorted tuple of ranks; groups sorted by their first rank.

    The groups of one axis partition ``range(layout.num_gpus)``; each has the axis's size
    (``tp``, ``cp``, ``dp``, ``pp``, ``ep``, ``tp * cp * dp / (etp * ep)`` for edp, ``cp * dp``
    for dp_cp, ``etp``).
    A group with stride ``s`` and size ``n`` starts at ``b * s * n + i`` (block ``b``, offset
    ``0 <= i < s``); the blocks of ``s * n`` consecutive ranks tile the ranks. (The tests check
    this against a brute-force grouping by coordinates.)
    """
    _check_layout(layout)
    stride, size = stride_and_size(layout, axis)
    block = stride * size
    return tuple(tuple(range(b * block + i, (b + 1) * block, stride))
                 for b in range(layout.num_gpus // block) for i in range(stride))


def axis_size(layout: ParallelLayout, axis: str) -> int:
    """The number of ranks in one group of ``axis``."""
    return stride_and_size(layout, axis)[1]


def group_of(rank: int, layout: ParallelLayout, axis: str) -> tuple[int, ...]:
    """The group of ``axis`` that holds ``rank`` (computed directly, without listing all groups)."""
    if not 0 <= rank < layout.num_gpus:
        raise ValueError(f"rank {rank} outside 0..{layout.num_gpus - 1}")
    _check_layout(layout)
    stride, size = stride_and_size(layout, axis)
    block = stride * size
    start = (rank // block) * block + rank % stride
    return tuple(range(start, start + block, stride))
