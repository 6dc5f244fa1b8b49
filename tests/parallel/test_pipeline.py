"""Pipeline schedules: literal small cases, properties, dry-run timing and deadlock detection."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import InputError
from clustersim.parallel.pipeline import (
    Action,
    ScheduleError,
    build_schedule,
    dry_run,
    format_grid,
    max_in_flight,
    stage_layers,
    validate_schedule,
)


def _acts(text: str) -> tuple[Action, ...]:
    return tuple(Action.parse(t) for t in text.split())


# --- literal schedules, pp=2 m=4 -------------------------------------------------------------

def test_gpipe_pp2_m4() -> None:
    expected = _acts("0F0 0F1 0F2 0F3 0B0 0B1 0B2 0B3")
    assert build_schedule("gpipe", 2, 4) == (expected, expected)


def test_1f1b_pp2_m4() -> None:
    # rank 0: pp - 0 - 1 = 1 warm-up forward; rank 1 (last): none
    assert build_schedule("1f1b", 2, 4) == (
        _acts("0F0 0F1 0B0 0F2 0B1 0F3 0B2 0B3"),
        _acts("0F0 0B0 0F1 0B1 0F2 0B2 0F3 0B3"),
    )


def test_interleaved_pp2_m4_v2() -> None:
    # virtual micro-batch k: chunk (k % 4) // 2, micro-batch (k // 4) * 2 + k % 2; backward chunk 1 - that.
    # warm-up: rank 0 (2-0-1)*2 + (2-1)*2 = 4, rank 1 (2-1-1)*2 + 2 = 2; then F(k+warmup), B(k)
    assert build_schedule("interleaved-1f1b", 2, 4, 2) == (
        _acts("0F0 0F1 1F0 1F1 0F2 1B0 0F3 1B1 1F2 0B0 1F3 0B1 1B2 1B3 0B2 0B3"),
        _acts("0F0 0F1 1F0 1B0 1F1 1B1 0F2 0B0 0F3 0B1 1F2 1B2 1F3 1B3 0B2 0B3"),
    )


def test_dry_run_start_times_1f1b_pp2_m2() -> None:
    # rank0: F0 [0,1) F1 [1,2); rank1: F0 [1,2) B0 [2,3) F1 [3,4) (rank busy until 3) B1 [4,5);
    # rank0: B0 waits for rank1's B0 -> [3,4), B1 waits for rank1's B1 -> [5,6)
    run = dry_run(build_schedule("1f1b", 2, 2), 2, 2)
    assert run.start == ((0, 1, 3, 5), (1, 2, 3, 4))
    assert run.makespan == 6
    # busy 4 per rank, idle 2: bubble 2/4 = (pp - 1) / m
    assert run.bubble_fraction == 0.5


# --- Action short form ----------------------------------------------------------------------

@given(kind=st.sampled_from(["F", "B", "W"]), chunk=st.integers(0, 99), mb=st.integers(0, 9999))
def test_action_round_trip(kind: str, chunk: int, mb: int) -> None:
    a = Action(kind, chunk, mb)
    assert Action.parse(str(a)) == a


def test_action_short_form_and_bad_text() -> None:
    assert str(Action("F", 1, 3)) == "1F3"
    assert Action.parse("1F3") == Action("F", 1, 3)
    for bad in ("F3", "1X3", "", "1F", "-1F2"):
        with pytest.raises(ValueError):
            Action.parse(bad)
    with pytest.raises(ValueError):
        Action("Q", 0, 0)


# --- properties ------------------------------------------------------------------------------

@settings(max_examples=120, deadline=None)
@given(pp=st.integers(1, 8), m=st.integers(1, 24), schedule=st.sampled_from(["gpipe", "1f1b"]))
def test_flush_schedules_valid_and_bubble(pp: int, m: int, schedule: str) -> None:
    acts = build_schedule(schedule, pp, m)
    validate_schedule(acts, pp, m, 1)
    run = dry_run(acts, pp, m)
    # Narayanan et al. 2021 §2.2.1: bubble time (pp - 1)(tf + tb) over ideal m (tf + tb)
    assert Fraction(run.makespan - 2 * m) / (2 * m) == Fraction(pp - 1, m)
    assert run.bubble_fraction == pytest.approx((pp - 1) / m, rel=1e-12)
    if schedule == "1f1b":
        assert max_in_flight(acts[0]) == min(pp, m)
        assert max_in_flight(acts[-1]) == 1
    else:
        assert all(max_in_flight(a) == m for a in acts)


@settings(max_examples=120, deadline=None)
@given(pp=st.integers(1, 8), groups=st.integers(1, 4), v=st.integers(1, 4))
def test_interleaved_valid_and_bubble(pp: int, groups: int, v: int) -> None:
    m = pp * groups
    acts = build_schedule("interleaved-1f1b", pp, m, v)
    validate_schedule(acts, pp, m, v)
    run = dry_run(acts, pp, m, v)
    # Narayanan et al. 2021 §2.2.2: each chunk op takes 1/v of a stage's time, bubble (pp-1)/(v m)
    assert run.makespan == 2 * m * v + 2 * (pp - 1)
    assert run.bubble_fraction == pytest.approx((pp - 1) / (v * m), rel=1e-12)
    if v > 1:
        warmup0 = 2 * (pp - 1) + (v - 1) * pp
        assert max_in_flight(acts[0]) == min(warmup0 + 1, m * v)


def test_interleaved_requires_multiple_of_pp() -> None:
    with pytest.raises(InputError, match="multiple of pp"):
        build_schedule("interleaved-1f1b", 4, 6, 2)


def test_bad_arguments() -> None:
    with pytest.raises(InputError, match="parallel.schedule"):
        build_schedule("zb-h3", 2, 4)
    with pytest.raises(InputError, match="virtual_stages"):
        build_schedule("1f1b", 2, 4, 2)
    with pytest.raises(InputError, match="parallel.pp"):
        build_schedule("1f1b", 0, 4)


# --- validation errors ----------------------------------------------------------------------

def test_deadlock_is_named_with_grid() -> None:
    # rank 1 runs its backward of micro-batch 0 before the forward it needs
    rank0, rank1 = build_schedule("1f1b", 2, 4)
    broken = (rank0, (rank1[1], rank1[0]) + rank1[2:])
    with pytest.raises(ScheduleError) as exc:
        validate_schedule(broken, 2, 4, 1)
    text = str(exc.value)
    assert text.startswith("deadlock:")
    assert "rank 1 at step 0 (0B0) waits for 0F0 on rank 1" in text
    assert "rank 0 at step 2 (0B0) waits for 0B0 on rank 1" in text
    lines = text.splitlines()
    assert lines[2].startswith("Step 00:") and lines[2].endswith("<-- ERROR HERE (rank 1)")
    assert lines[4].startswith("Step 02:") and lines[4].endswith("<-- ERROR HERE (rank 0)")
    assert "ERROR" not in lines[3]


def test_cross_rank_deadlock() -> None:
    # cycle: rank 0's B0 needs rank 1's B0, which rank 1 runs after its F1, which needs rank 0's F1,
    # which rank 0 runs after its B0
    acts = (_acts("0F0 0B0 0F1 0B1"), _acts("0F0 0F1 0B1 0B0"))
    with pytest.raises(ScheduleError, match="deadlock: rank 0 at step 1 .0B0. waits for 0B0 on rank 1; "
                                            "rank 1 at step 1 .0F1. waits for 0F1 on rank 0"):
        validate_schedule(acts, 2, 2, 1)
    # the forwards may come in any order on the first stage, and the last stage may reorder backwards
    validate_schedule((_acts("0F1 0F0 0B0 0B1"), _acts("0F0 0F1 0B0 0B1")), 2, 2, 1)
    validate_schedule((_acts("0F0 0F1 0B0 0B1"), _acts("0F0 0F1 0B1 0B0")), 2, 2, 1)


def test_missing_and_duplicate_actions() -> None:
    with pytest.raises(ScheduleError, match="missing actions 0B3"):
        validate_schedule((_acts("0F0 0F1 0F2 0F3 0B0 0B1 0B2"),), 1, 4, 1)
    with pytest.raises(ScheduleError, match="appears twice"):
        validate_schedule((_acts("0F0 0F0 0B0"),), 1, 1, 1)
    with pytest.raises(ScheduleError, match="not in chunks"):
        validate_schedule((_acts("0F0 1F0 0B0 1B0"),), 1, 1, 1)
    with pytest.raises(ScheduleError, match="expected pp = 2"):
        validate_schedule((_acts("0F0 0B0"),), 2, 1, 1)


def test_format_grid() -> None:
    grid = format_grid(build_schedule("1f1b", 2, 2))
    assert grid.splitlines() == [
        "         Rank 0 Rank 1",
        "Step 00: 0F0    0F0",
        "Step 01: 0F1    0B0",
        "Step 02: 0B0    0F1",
        "Step 03: 0B1    0B1",
    ]


# --- layers per stage ------------------------------------------------------------------------

def test_stage_layers_llama3_405b() -> None:
    # 126 = 16 * 7 + 14: the 14 middle stages get 8, first and last 7 (Llama 3 paper §3.3.2)
    assert stage_layers(126, 16) == (7,) + (8,) * 14 + (7,)


def test_stage_layers_examples() -> None:
    assert stage_layers(96, 8) == (12,) * 8
    assert stage_layers(10, 4) == (2, 3, 3, 2)
    assert stage_layers(11, 4) == (3, 3, 3, 2)  # 3 extra: the middle two, then index 0 before index 3
    assert stage_layers(9, 2, 2) == (2, 3, 2, 2)
    with pytest.raises(InputError, match="model.layers"):
        stage_layers(7, 4, 2)


@given(layers=st.integers(1, 300), pp=st.integers(1, 16), v=st.integers(1, 4))
def test_stage_layers_properties(layers: int, pp: int, v: int) -> None:
    if layers < pp * v:
        with pytest.raises(InputError):
            stage_layers(layers, pp, v)
        return
    out = stage_layers(layers, pp, v)
    assert len(out) == pp * v
    assert sum(out) == layers
    assert max(out) - min(out) <= 1
    # no end stage holds more layers than a middle stage
    if len(out) > 2:
        assert max(out[0], out[-1]) <= max(out[1:-1])


# --- random orders against an independent oracle ---------------------------------------------

@settings(max_examples=200, deadline=None)
@given(pp=st.integers(1, 4), m=st.integers(1, 4), v=st.integers(1, 2), data=st.data())
def test_random_orders_deadlock_iff_dependency_cycle(pp: int, m: int, v: int, data: st.DataObject) -> None:
    import networkx as nx

    if data.draw(st.booleans()):  # a random order on every rank (mostly deadlocks)
        ranks = []
        for _ in range(pp):
            acts = [Action(k, c, i) for k in ("F", "B") for c in range(v) for i in range(m)]
            ranks.append(tuple(data.draw(st.permutations(acts))))
        sched = tuple(ranks)
    else:  # a generated schedule with two actions of one rank swapped (often still valid)
        kind = "interleaved-1f1b" if v > 1 else data.draw(st.sampled_from(["gpipe", "1f1b"]))
        m = m * pp if v > 1 else m
        base = [list(a) for a in build_schedule(kind, pp, m, v)]
        r = data.draw(st.integers(0, pp - 1))
        i = data.draw(st.integers(0, len(base[r]) - 1))
        j = data.draw(st.integers(0, len(base[r]) - 1))
        base[r][i], base[r][j] = base[r][j], base[r][i]
        sched = tuple(tuple(a) for a in base)
    # oracle: nodes (rank, action); edges from each action to the next on its rank and from each
    # dependency (F of stage k-1; own F and B of stage k+1 for B); a deadlock is a cycle
    g = nx.DiGraph()
    for r, acts in enumerate(sched):
        for a, b in zip(acts, acts[1:], strict=False):
            g.add_edge((r, a), (r, b))
        for a in acts:
            g.add_node((r, a))
            stage = a.chunk * pp + r
            if a.kind == "F" and stage > 0:
                g.add_edge(((stage - 1) % pp, Action("F", (stage - 1) // pp, a.micro_batch)), (r, a))
            if a.kind == "B":
                g.add_edge((r, Action("F", a.chunk, a.micro_batch)), (r, a))
                if stage < pp * v - 1:
                    g.add_edge(((stage + 1) % pp, Action("B", (stage + 1) // pp, a.micro_batch)), (r, a))
    cyclic = not nx.is_directed_acyclic_graph(g)
    try:
        run = dry_run(sched, pp, m, v)
    except ScheduleError as exc:
        assert cyclic and str(exc).startswith("deadlock:") and "<-- ERROR HERE" in str(exc)
        return
    assert not cyclic
    # the dry run respects every edge with unit durations: start(b) >= start(a) + 1
    start = {(r, a): run.start[r][i] for r, acts in enumerate(sched) for i, a in enumerate(acts)}
    for a, b in g.edges:
        assert start[b] >= start[a] + 1
    # and is as early as possible: each action starts at 0 or right when a predecessor finishes
    for node in g.nodes:
        preds = [start[p] + 1 for p in g.predecessors(node)]
        assert start[node] == max(preds, default=0.0)
