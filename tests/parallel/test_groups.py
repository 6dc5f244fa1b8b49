"""Rank groups against a brute-force oracle that enumerates coordinates with nested loops."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.parallel.groups import AXES, Coords, axis_size, coords, group_of, rank_groups, rank_of
from clustersim.parallel.layout import ParallelLayout

from .shapes import SHAPES


def _layout(tp: int, cp: int, dp: int, pp: int, ep: int, etp: int = 0) -> ParallelLayout:
    return ParallelLayout(tp=tp, cp=cp, dp=dp, pp=pp, ep=ep, expert_tp=etp)


def _oracle(layout: ParallelLayout) -> dict[str, tuple[tuple[int, ...], ...]]:
    """Groups by brute force: walk the dense grid (pp slowest ... tp fastest) counting ranks, and
    separately walk the expert grid (pp, edp, ep, etp), then group ranks by their other coordinates."""
    tp, cp, dp, pp, ep, etp = layout.tp, layout.cp, layout.dp, layout.pp, layout.ep, layout.etp
    dense: dict[int, tuple[int, int, int, int]] = {}
    for rank, (p, d, c, t) in enumerate(itertools.product(range(pp), range(dp), range(cp), range(tp))):
        dense[rank] = (t, c, d, p)
    expert: dict[int, tuple[int, int, int, int]] = {}
    edp = tp * cp * dp // (ep * etp)
    for rank, (p, e2, e, t) in enumerate(itertools.product(range(pp), range(edp), range(ep), range(etp))):
        expert[rank] = (t, e, e2, p)
    keys = {
        "tp": lambda r: ("d", dense[r][1], dense[r][2], dense[r][3]),
        "cp": lambda r: ("d", dense[r][0], dense[r][2], dense[r][3]),
        "dp": lambda r: ("d", dense[r][0], dense[r][1], dense[r][3]),
        "pp": lambda r: ("d", dense[r][0], dense[r][1], dense[r][2]),
        "dp_cp": lambda r: ("d", dense[r][0], dense[r][3]),
        "ep": lambda r: ("e", expert[r][0], expert[r][2], expert[r][3]),
        "edp": lambda r: ("e", expert[r][0], expert[r][1], expert[r][3]),
        "etp": lambda r: ("e", expert[r][1], expert[r][2], expert[r][3]),
    }
    out = {}
    for axis, key in keys.items():
        groups: dict[tuple, list[int]] = {}
        for r in range(tp * cp * dp * pp):
            groups.setdefault(key(r), []).append(r)
        out[axis] = tuple(sorted(tuple(sorted(g)) for g in groups.values()))
    return out


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "n{}x{}-tp{}cp{}dp{}pp{}ep{}".format(*s))
def test_groups_match_oracle_and_partition(shape: tuple[int, ...]) -> None:
    nodes, gpn, tp, cp, dp, pp, ep = shape
    assert nodes * gpn == tp * cp * dp * pp  # the table itself must be consistent
    layout = _layout(tp, cp, dp, pp, ep)
    oracle = _oracle(layout)
    n = layout.num_gpus
    for axis in AXES:
        groups = rank_groups(layout, axis)
        assert groups == oracle[axis], axis
        size = axis_size(layout, axis)
        assert all(len(g) == size for g in groups), axis
        assert len(groups) == n // size
        flat = sorted(r for g in groups for r in g)
        assert flat == list(range(n)), f"{axis} groups do not partition the ranks"


@pytest.mark.parametrize("shape", SHAPES[:20], ids=lambda s: "n{}x{}-tp{}cp{}dp{}pp{}ep{}".format(*s))
def test_orthogonal_axes_meet_in_at_most_one_rank(shape: tuple[int, ...]) -> None:
    _, _, tp, cp, dp, pp, ep = shape
    layout = _layout(tp, cp, dp, pp, ep)
    dense = ("tp", "cp", "dp", "pp")
    for a, b in itertools.combinations(dense, 2):
        owner_b = {r: i for i, g in enumerate(rank_groups(layout, b)) for r in g}
        pairs: dict[tuple[int, int], int] = {}
        for i, g in enumerate(rank_groups(layout, a)):
            for r in g:
                pairs[(i, owner_b[r])] = pairs.get((i, owner_b[r]), 0) + 1
        # every (a-group, b-group) pair that meets shares exactly one rank, so there are n such pairs
        assert set(pairs.values()) == {1}, (a, b)
        assert len(pairs) == layout.num_gpus
    # ep and edp split each dp_cp group: every ep group lies inside one dp_cp group
    dpcp_of = {r: i for i, g in enumerate(rank_groups(layout, "dp_cp")) for r in g}
    for axis in ("ep", "edp", "dp", "cp"):
        for g in rank_groups(layout, axis):
            assert len({dpcp_of[r] for r in g}) == 1, axis


def test_worked_example_from_docstring() -> None:
    # 8 GPUs, tp=2 dp=2 pp=2 ep=2: rank = tp_i + 2*dp_i + 4*pp_i
    layout = _layout(2, 1, 2, 2, 2)
    assert rank_groups(layout, "tp") == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert rank_groups(layout, "dp") == ((0, 2), (1, 3), (4, 6), (5, 7))
    assert rank_groups(layout, "pp") == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert rank_groups(layout, "ep") == ((0, 2), (1, 3), (4, 6), (5, 7))
    assert rank_groups(layout, "edp") == tuple((r,) for r in range(8))


def test_cp_sits_between_tp_and_dp() -> None:
    # tp=2 cp=2 dp=2: rank = tp_i + 2*cp_i + 4*dp_i; ep=2 takes pairs of consecutive cp*dp positions
    layout = _layout(2, 2, 2, 1, 2)
    assert rank_groups(layout, "cp") == ((0, 2), (1, 3), (4, 6), (5, 7))
    assert rank_groups(layout, "dp") == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert rank_groups(layout, "dp_cp") == ((0, 2, 4, 6), (1, 3, 5, 7))
    assert rank_groups(layout, "ep") == ((0, 2), (1, 3), (4, 6), (5, 7))
    assert rank_groups(layout, "edp") == ((0, 4), (1, 5), (2, 6), (3, 7))


@pytest.mark.parametrize("tp,cp,dp,pp,ep,etp", [(2, 1, 4, 2, 8, 1), (4, 2, 2, 1, 4, 2), (8, 1, 2, 2, 16, 1),
                                                  (2, 2, 2, 2, 2, 1), (4, 1, 4, 1, 2, 4)])
def test_moe_parallel_folding_groups_match_oracle(tp: int, cp: int, dp: int, pp: int, ep: int, etp: int) -> None:
    # Megatron's MoE parallel folding (arXiv 2504.14960): the experts re-read a stage's tp*cp*dp
    # ranks as etp x ep x edp, so EP may span TP ranks (ep > dp*cp) when etp < tp
    layout = _layout(tp, cp, dp, pp, ep, etp)
    oracle = _oracle(layout)
    for axis in ("ep", "edp", "etp"):
        assert rank_groups(layout, axis) == oracle[axis], axis
    for rank in range(layout.num_gpus):
        assert rank_of(coords(rank, layout), layout) == rank


def test_folding_worked_example() -> None:
    # 8 GPUs, tp=2 dp=4 ep=8 etp=1: one EP group of all 8 ranks of the stage, no expert data parallelism
    layout = _layout(2, 1, 4, 1, 8, 1)
    assert rank_groups(layout, "ep") == (tuple(range(8)),)
    assert rank_groups(layout, "edp") == tuple((r,) for r in range(8))
    assert rank_groups(layout, "etp") == tuple((r,) for r in range(8))


dims = st.sampled_from([1, 2, 3, 4, 8])


@settings(max_examples=150, deadline=None)
@given(tp=dims, cp=dims, dp=dims, pp=dims, data=st.data())
def test_coords_round_trip_and_group_of(tp: int, cp: int, dp: int, pp: int, data: st.DataObject) -> None:
    ep = data.draw(st.sampled_from([e for e in range(1, cp * dp + 1) if (cp * dp) % e == 0]))
    layout = _layout(tp, cp, dp, pp, ep)
    rank = data.draw(st.integers(0, layout.num_gpus - 1))
    c = coords(rank, layout)
    assert rank_of(c, layout) == rank
    axis = data.draw(st.sampled_from(AXES))
    g = group_of(rank, layout, axis)
    assert rank in g
    assert g in rank_groups(layout, axis)


def test_bad_arguments_raise_value_error() -> None:
    layout = _layout(2, 1, 2, 1, 1)
    with pytest.raises(ValueError, match="rank 4"):
        coords(4, layout)
    with pytest.raises(ValueError, match="unknown axis"):
        rank_groups(layout, "xp")
    with pytest.raises(ValueError, match="disagree"):
        rank_of(Coords(tp=0, cp=0, dp=1, pp=0, ep=0, edp=0), _layout(2, 1, 2, 1, 2))
    with pytest.raises(ValueError, match="ep"):
        rank_groups(_layout(1, 1, 3, 1, 2), "ep")
