"""The timeline's lanes and blocks: exact below the budget, merged (with totals kept) above it."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.engine.timeline import CAUSES, Segment
from clustersim.html.timeline_data import timeline_data


def seg(rank: int, stream: str, start: float, end: float, cause: str = "compute", name: str = "0F0") -> Segment:
    return Segment(rank, stream, name, cause, start, end)


def test_under_the_budget_every_segment_is_a_block_in_lane_order() -> None:
    segs = [seg(1, "compute", 0.0, 1.0), seg(0, "dp", 0.5, 0.7, "dp_comm", "all_reduce"),
            seg(0, "compute", 0.0, 2.0), seg(0, "pp", 2.0, 2.5, "pp_comm", "send F0")]
    segs.append(seg(0, "rs", 1.0, 1.5, "dp_comm", "reduce_scatter"))
    data = timeline_data(segs, 2.5)
    # lanes: stage 0 compute, pp, dp (the order inside a stage), other streams by name, then stage 1
    assert data.lanes == ("stage 0 compute", "stage 0 pp", "stage 0 dp", "stage 0 rs", "stage 1 compute")
    assert data.resolution_s == 0.0 and data.raw_segments == 5
    assert [(b.lane, b.start_s, b.end_s, b.cause, b.segments) for b in data.blocks] == [
        (0, 0.0, 2.0, "compute", 1), (1, 2.0, 2.5, "pp_comm", 1), (2, 0.5, 0.7, "dp_comm", 1),
        (3, 1.0, 1.5, "dp_comm", 1), (4, 0.0, 1.0, "compute", 1)]


def test_over_the_budget_short_neighbours_merge_and_long_segments_stay() -> None:
    # 100 alternating 10 ms compute / 2 ms tp_comm pieces (0.6 s), then one 2 s optimizer segment.
    segs = []
    t = 0.0
    for i in range(50):
        segs.append(seg(0, "compute", t, t + 0.010, "compute", f"0F{i}"))
        segs.append(seg(0, "compute", t + 0.010, t + 0.012, "tp_comm", "attn_out_tp_reduce"))
        t += 0.012
    segs.append(seg(0, "compute", t, t + 2.0, "optimizer", "optimizer step"))
    data = timeline_data(segs, t + 2.0, max_blocks=20)
    # The finest step / 2**k that fits: step 2.6 s. Windows of 2.6 / 2**6 = 40.6 ms take 6 pieces
    # (3 periods of 12 ms end at 36 ms), so 17 blocks + the optimizer = 18 <= 20; windows of
    # 2.6 / 2**7 = 20.3 ms take 2 pieces: 50 + 1 blocks, too many. So k = 6.
    assert math.isclose(data.resolution_s, (t + 2.0) / 64)
    assert len(data.blocks) == 18
    last = data.blocks[-1]
    assert (last.cause, last.segments, last.name) == ("optimizer", 1, "optimizer step")
    merged = data.blocks[0]
    assert merged.segments > 1 and merged.cause == "compute"
    assert dict(merged.by_cause).keys() == {"compute", "tp_comm"}
    assert math.isclose(sum(b.busy_s for b in data.blocks), sum(s.end_s - s.start_s for s in segs))


def test_same_segments_in_any_order_give_the_same_blocks() -> None:
    segs = [seg(r, s, i * 0.01, i * 0.01 + 0.004, c) for r in range(3) for s in ("compute", "dp")
            for i, c in enumerate(["compute", "tp_comm", "bubble"] * 20)]
    a = timeline_data(segs, 1.0, max_blocks=40)
    b = timeline_data(list(reversed(segs)), 1.0, max_blocks=40)
    assert a == b


_segments = st.lists(
    st.tuples(st.integers(0, 3), st.sampled_from(("compute", "pp", "dp")), st.floats(0, 10, allow_nan=False),
              st.floats(1e-6, 2, allow_nan=False), st.sampled_from(CAUSES)),
    min_size=1, max_size=120)


@settings(max_examples=60, deadline=None)
@given(_segments, st.integers(12, 200))
def test_blocks_cover_every_segment_once_within_the_budget(raw: list, budget: int) -> None:
    # Segments of one lane do not overlap (one stream does one thing at a time): lay them end to end.
    clock: dict[tuple[int, str], float] = {}
    segs = []
    for rank, stream, gap, dur, cause in raw:
        start = clock.get((rank, stream), 0.0) + gap
        segs.append(seg(rank, stream, start, start + dur, cause))
        clock[(rank, stream)] = start + dur
    step = max(s.end_s for s in segs)
    data = timeline_data(segs, step, max_blocks=budget)
    assert len(data.blocks) <= budget  # at most 12 lanes, and a budget of at least 12
    assert sum(b.segments for b in data.blocks) == len(segs)
    for cause in CAUSES:
        want = sum(s.end_s - s.start_s for s in segs if s.cause == cause)
        got = sum(dict(b.by_cause).get(cause, 0.0) for b in data.blocks)
        assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)
    for lane in range(len(data.lanes)):
        blocks = [b for b in data.blocks if b.lane == lane]
        assert all(x.end_s <= y.start_s + 1e-12 for x, y in zip(blocks, blocks[1:], strict=False))
        assert all(b.segments == 1 or b.end_s - b.start_s <= data.resolution_s + 1e-12 for b in blocks)


def test_a_send_that_starts_while_another_runs_takes_the_streams_next_lane() -> None:
    """Two sends of one stage in flight at once (DualPipe sends in both directions) were drawn in
    one lane, on top of each other; the second takes lane "stage 0 pp 2" (the trace's "pp 2"),
    and the lane is free again for the next send that starts after both."""
    segs = [seg(0, "compute", 0.0, 3.0), seg(0, "pp", 1.0, 2.0, "pp_comm", "send F1"),
            seg(0, "pp", 1.0, 2.0, "pp_comm", "send B0"), seg(0, "pp", 2.0, 2.5, "pp_comm", "send F2")]
    data = timeline_data(segs, 3.0)
    assert data.lanes == ("stage 0 compute", "stage 0 pp", "stage 0 pp 2")
    assert [(data.lanes[b.lane], b.name, b.start_s) for b in data.blocks] == [
        ("stage 0 compute", "0F0", 0.0), ("stage 0 pp", "send B0", 1.0), ("stage 0 pp", "send F2", 2.0),
        ("stage 0 pp 2", "send F1", 1.0)]


def test_no_lane_of_a_dualpipe_step_holds_overlapping_blocks() -> None:
    """The simulated DualPipe-V step of a small model, every segment drawn: no lane holds two
    blocks that overlap in time."""
    from clustersim.api import simulate_with_timeline
    from tests.engine.test_step import make

    sc = make(model="megatron-1.7b", nodes=1, tp=2, pp=4, dp=1, global_batch=16, schedule="dualpipe-v")
    _, result = simulate_with_timeline(sc)
    data = timeline_data(result.timeline.segments, result.step_time_s, max_blocks=10**6)
    assert any(name.endswith("pp 2") for name in data.lanes)
    by_lane: dict[int, list[tuple[float, float]]] = {}
    for b in data.blocks:
        by_lane.setdefault(b.lane, []).append((b.start_s, b.end_s))
    for lane, spans in by_lane.items():
        spans.sort()
        assert all(s >= e for (_, e), (s, _) in zip(spans, spans[1:], strict=False)), data.lanes[lane]
