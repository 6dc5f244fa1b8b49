"""Zero-bubble and DualPipe schedules: validity, closed-form bubbles, memory, pairs, bad input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import InputError
from clustersim.parallel.bubble import analytic_bubble, analytic_in_flight
from clustersim.parallel.pipeline import (
    Action,
    ScheduleError,
    build_schedule,
    dry_run,
    max_in_flight,
    pair_steady_state,
    stage_graph,
    validate_schedule,
)

NEW = ("zb-h1", "zb-v", "dualpipe", "dualpipe-v")


def _run(schedule: str, pp: int, m: int, f: float, b: float, w: float):
    acts = build_schedule(schedule, pp, m)
    return dry_run(acts, pp, m, 1, f, b + w, w, graph=stage_graph(schedule, pp, 1, m)), acts


def test_zb_h1_pp2_m4_literal() -> None:
    # rank 0: one warm-up F, then F/B with W right after (no delay); rank 1 holds back one W
    acts = build_schedule("zb-h1", 2, 4)
    assert " ".join(map(str, acts[0])) == "0F0 0F1 0B0 0W0 0F2 0B1 0W1 0F3 0B2 0W2 0B3 0W3"
    assert " ".join(map(str, acts[1])) == "0F0 0B0 0F1 0B1 0W0 0F2 0B2 0W1 0F3 0B3 0W2 0W3"


def test_dualpipe_reproduces_the_readme_figure() -> None:
    # deepseek-ai/DualPipe README figure: 8 ranks, 20 micro-batches, F = B_input = W = one cell:
    # device 0 runs 7 forwards, then the reverse direction's F, B, W three times, and idles 6 cells
    run, acts = _run("dualpipe", 8, 20, 1.0, 1.0, 1.0)
    assert [str(a) for a in acts[0][:10]] == ["0F0", "0F1", "0F2", "0F3", "0F4", "0F5", "0F6", "1F10", "1B10", "1W10"]
    assert run.bubble == pytest.approx(6.0)
    assert run.makespan - run.busy[0] == pytest.approx(6.0)


@settings(max_examples=60, deadline=None)
@given(schedule=st.sampled_from(("1f1b",) + NEW), half=st.integers(1, 5), extra=st.integers(0, 6),
       f=st.floats(0.5, 1.5), w_frac=st.floats(0.5, 1.0), b_frac=st.floats(0.0, 1.0))
def test_dry_run_bubble_matches_closed_form(schedule: str, half: int, extra: int, f: float, w_frac: float,
                                            b_frac: float) -> None:
    pp = 2 * half
    m = 2 * pp + 2 * extra
    w = f * w_frac                      # w <= f
    b = f + (2 * w - f) * b_frac if 2 * w >= f else f   # f <= b <= 2w
    run, _ = _run(schedule, pp, m, f, b, w)
    assert run.bubble == pytest.approx(analytic_bubble(schedule, pp, f, b, w), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("schedule", ("1f1b",) + NEW)
@pytest.mark.parametrize("pp", [2, 4, 8])
def test_peak_activations_follow_the_papers(schedule: str, pp: int) -> None:
    m = 4 * pp
    acts = build_schedule(schedule, pp, m)
    validate_schedule(acts, pp, m, graph=stage_graph(schedule, pp, 1, m))
    peak = max(max_in_flight(a) for a in acts)
    assert peak == analytic_in_flight(schedule, pp)
    # in stages' worth of layers: ZB-H1 and ZB-V hold 1F1B's pp, DualPipe(-V) one more
    stage_equiv = peak / (2 if schedule in ("zb-v", "dualpipe-v") else 1)
    assert stage_equiv == {"1f1b": pp, "zb-h1": pp, "zb-v": pp, "dualpipe": pp + 1,
                           "dualpipe-v": pp + 0.5}[schedule]


def test_dualpipe_keeps_two_parameter_copies() -> None:
    g = stage_graph("dualpipe", 4, 1, 16)
    assert g.rank_model_stages(0) == (0, 3) and g.rank_model_stages(3) == (3, 0)
    assert all(g.copies(s) == 2 for s in range(4))
    v = stage_graph("zb-v", 4)
    assert v.rank_model_stages(0) == (0, 7) and v.placement[3] == (3, 0) and v.placement[4] == (3, 1)


def test_w_actions_follow_their_backward() -> None:
    for schedule in NEW:
        acts = build_schedule(schedule, 4, 16)
        for rank_acts in acts:
            seen_b = set()
            for a in rank_acts:
                if a.kind == "B":
                    seen_b.add((a.chunk, a.micro_batch))
                if a.kind == "W":
                    assert (a.chunk, a.micro_batch) in seen_b


def test_w_before_b_is_a_deadlock_with_grid() -> None:
    acts = list(build_schedule("zb-h1", 2, 2))
    r0 = list(acts[0])
    i = r0.index(Action("W", 0, 0))
    j = r0.index(Action("B", 0, 0))
    r0[i], r0[j] = r0[j], r0[i]
    with pytest.raises(ScheduleError, match=r"deadlock: rank 0 at step \d+ \(0W0\) waits for 0B0 on rank 0") as exc:
        validate_schedule((tuple(r0), acts[1]), 2, 2, graph=stage_graph("zb-h1", 2, 1, 2))
    assert "<-- ERROR HERE" in str(exc.value)


def test_pairs_and_short_form() -> None:
    a = Action.parse("0F3&")
    assert a.paired and str(a) == "0F3&"
    paired = pair_steady_state(build_schedule("1f1b", 2, 4))
    # the last stage runs one forward alone first, as Megatron-Core's combined 1F1B does: it had
    # paired each forward with its own micro-batch's backward (0F0& 0B0 0F1& 0B1 ...)
    assert " ".join(map(str, paired[1])) == "0F0 0F1& 0B0 0F2& 0B1 0F3& 0B2 0B3"
    assert " ".join(map(str, paired[0])) == "0F0 0F1 0F2& 0B0 0F3& 0B1 0B2 0B3"
    validate_schedule(paired, 2, 4)
    with pytest.raises(ScheduleError, match="paired"):
        bad = (Action("F", 0, 0), Action("B", 0, 0, True), Action("W", 0, 0))   # a B paired with a W
        validate_schedule((bad,), 1, 1, graph=stage_graph("zb-h1", 1, 1, 1))


def test_bad_dualpipe_input() -> None:
    with pytest.raises(InputError, match="parallel.pp"):
        build_schedule("dualpipe", 3, 12)
    with pytest.raises(InputError, match="num_micro_batches"):
        build_schedule("dualpipe", 4, 6)
    with pytest.raises(InputError, match="num_micro_batches"):
        build_schedule("dualpipe-v", 4, 7)
