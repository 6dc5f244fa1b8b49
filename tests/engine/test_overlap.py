"""What overlapped communication costs the compute beside it: by hand, and the event engine's lane
against the closed form's integration."""

from __future__ import annotations

import math

import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.engine.lane import ComputeLane
from clustersim.hardware.load import load_gpu
from clustersim.plan.overlap import (
    MIN_COMPUTE_RATE,
    NCCL_CTAS,
    advance,
    advance_many,
    advance_one,
    compute_rate,
    overlap_slowdown,
)


def test_slowdown_per_gpu_by_hand():
    # 24 NCCL CTAs of 132 SMs (H100) and of 108 (A100); Lee et al. 2025 measured 18.9% on average
    assert math.isclose(overlap_slowdown(load_gpu("h100-sxm-80gb")), 24 / 132)
    assert math.isclose(overlap_slowdown(load_gpu("a100-sxm-80gb")), 24 / 108)
    assert NCCL_CTAS == 24
    assert compute_rate(0.2, 0) == 1.0 and compute_rate(0.2, 2) == 0.6 and compute_rate(0.3, 5) == MIN_COMPUTE_RATE


def test_advance_by_hand():
    # 1 s of work from t=0 beside a collective during [0, 0.5] at slowdown 0.2: the first 0.5 s
    # do 0.4 s of work, the remaining 0.6 s run at full rate: end 1.1 s, 0.1 s lost to dp_comm
    end, lost = advance(0.0, 1.0, [(0.0, 0.5, "dp_comm")], 0.2)
    assert math.isclose(end, 1.1) and math.isclose(lost["dp_comm"], 0.1)
    # two collectives at once cost twice the SMs: during [0, 1] the rate is 0.6
    end, lost = advance(0.0, 0.3, [(0.0, 1.0, "dp_comm"), (0.0, 1.0, "tp_comm")], 0.2)
    assert math.isclose(end, 0.5) and math.isclose(lost["dp_comm"], 0.1) and math.isclose(lost["tp_comm"], 0.1)
    # collectives that ended before the work starts change nothing
    assert advance(2.0, 1.0, [(0.0, 1.0, "dp_comm")], 0.2) == (3.0, {})


intervals = st.lists(st.tuples(st.floats(0, 5), st.floats(0.01, 3), st.sampled_from(["dp_comm", "tp_comm"])),
                     max_size=6)


@settings(max_examples=60, deadline=None)
@given(start=st.floats(0, 3), work=st.floats(0.01, 4), raw=intervals, slowdown=st.sampled_from([0.182, 0.222, 0.4]))
def test_lane_equals_closed_form(start, work, raw, slowdown):
    busy = [(s, s + d, c) for s, d, c in raw]
    env = simpy.Environment()
    lane = ComputeLane(env, slowdown)
    out: dict = {}

    def comm(s, e, cause):
        yield env.timeout(s)
        lane.comm_started(cause)
        yield env.timeout(e - s)
        lane.comm_ended(cause)

    def job():
        yield env.timeout(start)
        lost = yield lane.run(work)
        out["end"], out["lost"] = env.now, lost

    for s, e, c in busy:
        env.process(comm(s, e, c))
    env.process(job())
    env.run()
    end, lost = advance(start, work, busy, slowdown)
    assert math.isclose(out["end"], end, rel_tol=1e-9, abs_tol=1e-12)
    for cause in set(lost) | set(out["lost"]):
        assert math.isclose(out["lost"].get(cause, 0.0), lost.get(cause, 0.0), rel_tol=1e-7, abs_tol=1e-10)
    assert math.isclose(end - start, work + sum(lost.values()), rel_tol=1e-9)


@settings(max_examples=400, deadline=None)
@given(start=st.floats(0.0, 10.0), work=st.floats(1e-9, 5.0), begin=st.floats(0.0, 12.0), length=st.floats(1e-9, 5.0),
       slowdown=st.sampled_from([0.05, 24 / 132, 24 / 148, 0.189, 0.5]))
def test_one_collective_fast_path_is_the_general_loop_to_the_bit(start, work, begin, length, slowdown):
    """``advance`` beside a single collective takes a fast path (the closed form's commonest
    call); it must give exactly what the segment-by-segment loop gives, end and blame."""
    iv = (begin, begin + length, "dp_comm")
    if not (iv[1] > start and iv[0] < iv[1]):
        return
    assert advance_one(start, work, iv, slowdown) == advance_many(start, work, [iv], slowdown)


@settings(max_examples=400, deadline=None)
@given(start=st.floats(0.0, 10.0), work=st.floats(1e-9, 5.0),
       near=st.lists(st.tuples(st.floats(0.0, 12.0), st.floats(1e-9, 5.0)), max_size=4),
       far=st.lists(st.tuples(st.floats(0.0, 100.0), st.floats(1e-9, 5.0)), min_size=1, max_size=6),
       slowdown=st.sampled_from([0.05, 24 / 132, 0.189, 0.5]))
def test_collectives_after_the_horizon_change_nothing(start, work, near, far, slowdown):
    """``advance`` leaves out the collectives that start after the work must have ended at the
    least rate: the result is the loop's over every collective, to the bit."""
    ivs = [(b, b + d, f"c{i}") for i, (b, d) in enumerate(near)]
    late = [(start + work / MIN_COMPUTE_RATE * (1 + 1e-6) + b, start + work / MIN_COMPUTE_RATE * (1 + 1e-6) + b + d,
             f"late{i}") for i, (b, d) in enumerate(far)]
    everything = [iv for iv in ivs + late if iv[1] > start and iv[0] < iv[1]]
    assert advance(start, work, ivs + late, slowdown) == advance_many(start, work, everything, slowdown)
