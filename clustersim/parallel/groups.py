"""Rank-group arithmetic for the order "tp-cp-ep-dp-pp" (Megatron-core's default order).

Pure functions of a :class:`~clustersim.parallel.layout.ParallelLayout`; no I/O, no state.

Dense grid (tensor, context, data, pipeline; ``tp`` varies fastest)::

    rank = tp_i + tp * (cp_i + cp * (dp_i + dp * pp_i))

with ``0 <= tp_i < tp``, ``0 <= cp_i < cp``, ``0 <= dp_i < dp``, ``0 <= pp_i < pp``. This is
Megatron-core's ``RankGenerator`` with ``order="tp-cp-ep-dp-pp"`` (megatron/core/parallel_state.py,
``generate_masked_orthogonal_rank_groups``): the rank is a mixed-radix number whose digits are the
coordinates, the first named axis being the least significant digit.

Expert grid: expert parallelism folds into the ``cp * dp`` ranks of one pipeline stage
(Megatron-core >= 0.9 builds a separate expert ``RankGenerator`` whose ``ep`` and expert-data
dimensions together cover the ``cp * dp`` positions, parallel_state.py ``initialize_model_parallel``,
with expert tensor parallelism equal to ``tp``). Writing ``j = cp_i + cp * dp_i`` for the
position of a rank among the ``cp * dp`` ranks of its stage that share its ``tp_i``::

    j = ep_i + ep * edp_i          (0 <= ep_i < ep, 0 <= edp_i < cp * dp / ep)

so an expert-parallel group is a block of ``ep`` consecutive ``j`` (a sub-block of a "dp_cp"
group) and the expert-data-parallel group ("edp") strides over those blocks.

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

AXES = ("tp", "cp", "dp", "pp", "ep", "edp", "dp_cp")


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
    if (layout.cp * layout.dp) % layout.ep:
        raise ValueError(f"ep ({layout.ep}) must divide cp * dp ({layout.cp * layout.dp})")


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
    j = cp_i + layout.cp * dp_i
    return Coords(tp=tp_i, cp=cp_i, dp=dp_i, pp=pp_i, ep=j % layout.ep, edp=j // layout.ep)


def rank_of(c: Coords, layout: ParallelLayout) -> int:
    """The rank at coordinates ``c`` (uses tp, cp, dp, pp; ep/edp must agree with them)."""
    _check_layout(layout)
    for name, size in (("tp", layout.tp), ("cp", layout.cp), ("dp", layout.dp), ("pp", layout.pp)):
        value = getattr(c, name)
        if not 0 <= value < size:
            raise ValueError(f"coordinate {name}={value} outside 0..{size - 1}")
    j = c.cp + layout.cp * c.dp
    if (c.ep, c.edp) != (j % layout.ep, j // layout.ep):
        raise ValueError(f"ep/edp coordinates {c.ep}/{c.edp} disagree with cp/dp {c.cp}/{c.dp}")
    return c.tp + layout.tp * (c.cp + layout.cp * (c.dp + layout.dp * c.pp))


def _key(c: Coords, axis: str) -> tuple[int, ...]:
    """The coordinates that a group of ``axis`` holds fixed."""
    if axis == "tp":
        return (c.pp, c.dp, c.cp)
    if axis == "cp":
        return (c.pp, c.dp, c.tp)
    if axis == "dp":
        return (c.pp, c.cp, c.tp)
    if axis == "pp":
        return (c.dp, c.cp, c.tp)
    if axis == "ep":
        return (c.pp, c.edp, c.tp)
    if axis == "edp":
        return (c.pp, c.ep, c.tp)
    if axis == "dp_cp":
        return (c.pp, c.tp)
    raise ValueError(f"unknown axis {axis!r}; allowed: {', '.join(AXES)}")


@lru_cache(maxsize=256)
def rank_groups(layout: ParallelLayout, axis: str) -> tuple[tuple[int, ...], ...]:
    """All groups of ``axis``: each a sorted tuple of ranks; groups sorted by their first rank.

    The groups of one axis partition ``range(layout.num_gpus)``; each has the axis's size
    (``tp``, ``cp``, ``dp``, ``pp``, ``ep``, ``cp * dp / ep`` for edp, ``cp * dp`` for dp_cp).
    """
    _check_layout(layout)
    if axis not in AXES:
        raise ValueError(f"unknown axis {axis!r}; allowed: {', '.join(AXES)}")
    groups: dict[tuple[int, ...], list[int]] = {}
    for rank in range(layout.num_gpus):
        groups.setdefault(_key(coords(rank, layout), axis), []).append(rank)
    # ranks were appended in increasing order, so each group is sorted
    return tuple(sorted(tuple(g) for g in groups.values()))


def axis_size(layout: ParallelLayout, axis: str) -> int:
    """The number of ranks in one group of ``axis``."""
    sizes = {"tp": layout.tp, "cp": layout.cp, "dp": layout.dp, "pp": layout.pp, "ep": layout.ep,
             "edp": layout.cp * layout.dp // layout.ep, "dp_cp": layout.cp * layout.dp}
    if axis not in sizes:
        raise ValueError(f"unknown axis {axis!r}; allowed: {', '.join(AXES)}")
    return sizes[axis]


def group_of(rank: int, layout: ParallelLayout, axis: str) -> tuple[int, ...]:
    """The group of ``axis`` that holds ``rank`` (computed directly, without listing all groups)."""
    c = coords(rank, layout)
    key = _key(c, axis)
    members = []
    for other in _axis_members(c, layout, axis):
        if _key(other, axis) == key:
            members.append(rank_of(other, layout))
    return tuple(sorted(members))


def _axis_members(c: Coords, layout: ParallelLayout, axis: str) -> list[Coords]:
    """Coordinates that differ from ``c`` only along ``axis``."""
    out = []
    if axis in ("tp", "pp"):
        size = layout.tp if axis == "tp" else layout.pp
        for i in range(size):
            out.append(Coords(**{**_asdict(c), axis: i}))
        return out
    # axes living inside the cp * dp positions of a stage
    for j in range(layout.cp * layout.dp):
        cp_i, dp_i = j % layout.cp, j // layout.cp
        out.append(Coords(tp=c.tp, cp=cp_i, dp=dp_i, pp=c.pp, ep=j % layout.ep, edp=j // layout.ep))
    return out


def _asdict(c: Coords) -> dict[str, int]:
    return {"tp": c.tp, "cp": c.cp, "dp": c.dp, "pp": c.pp, "ep": c.ep, "edp": c.edp}
