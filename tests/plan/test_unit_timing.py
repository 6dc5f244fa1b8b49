"""The closed form's innermost loop (``plan.compiled_unit.unit_timing``) runs every kernel as
``plan.overlap.advance`` runs it: the same end and the same seconds per cause, to the bit, for
any unit (kernels, blocking collectives, overlapped collectives and the joins that wait for
them) beside any collectives in flight on the rank's other streams."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.plan.compiled_unit import Step, unit_timing
from clustersim.plan.overlap import advance


def reference(steps, start_s, busy, slowdown):
    """Each kernel through ``overlap.advance`` beside the busy intervals and the unit's own
    overlapped collectives in flight; blocking collectives hold the stream; a join waits."""
    t, causes, pending, index = start_s, {}, [], {}
    busy = [iv for iv in busy if iv[1] > start_s and iv[0] < iv[1]]
    for i, s in enumerate(steps):
        if s.join >= 0:
            iv = index.pop(s.join)
            pending.remove(iv)
            if iv[1] > t:
                causes[iv[2]] = causes.get(iv[2], 0.0) + (iv[1] - t)
                t = iv[1]
        elif s.plan is not None and s.overlapped:
            iv = (t, t + s.time_s, s.cause)
            pending.append(iv)
            index[i] = iv
        elif s.plan is not None:
            t += s.time_s
            causes[s.cause] = causes.get(s.cause, 0.0) + s.time_s
        else:
            causes["compute"] = causes.get("compute", 0.0) + s.time_s
            if s.time_s > 0:
                t, lost = advance(t, s.time_s, busy + pending, slowdown)
                for cause, sec in lost.items():
                    causes[cause] = causes.get(cause, 0.0) + sec
    for _, end, cause in pending:
        if end > t:
            causes[cause] = causes.get(cause, 0.0) + (end - t)
            t = end
    return t, causes


PLAN = object()   # stands for a collective's plan: unit_timing only asks whether there is one


@st.composite
def units(draw):
    steps, open_ = [], []
    for _ in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["kernel", "kernel", "kernel", "blocking", "overlapped", "join"]))
        time_s = draw(st.floats(0.0, 2.0))
        if kind == "kernel":
            steps.append(Step("k", "compute", time_s))
        elif kind == "blocking":
            steps.append(Step("c", "tp_comm", time_s, PLAN))
        elif kind == "overlapped":
            open_.append(len(steps))
            steps.append(Step("o", draw(st.sampled_from(["tp_comm", "cp_comm"])), time_s, PLAN, True))
        elif open_:
            steps.append(Step("j", "", 0.0, join=open_.pop(draw(st.integers(0, len(open_) - 1)))))
    return tuple(steps)


intervals = st.lists(st.tuples(st.floats(0.0, 8.0), st.floats(0.0, 4.0), st.sampled_from(["dp_comm", "ep_comm"]))
                     .map(lambda x: (x[0], x[0] + x[1], x[2])), max_size=8)


@settings(max_examples=400, deadline=None)
@given(steps=units(), start=st.floats(0.0, 4.0), busy=intervals,
       slowdown=st.sampled_from([0.0, 24 / 132, 24 / 108, 0.5, 0.9]))
def test_unit_timing_is_advance_to_the_bit(steps, start, busy, slowdown):
    got = unit_timing(steps, start, busy, slowdown)
    want = reference(steps, start, busy, slowdown)
    assert got[0] == want[0]
    assert got[1] == want[1]


def test_a_backlog_of_intervals_slows_each_kernel_once():
    """Three back-to-back reductions on the data-parallel stream (a ZeRO-2 backlog) and two
    kernels of 1 s at a 0.2 slow-down: both run at 0.8 of their rate, 2.5 s in all."""
    steps = (Step("k", "compute", 1.0), Step("k", "compute", 1.0))
    busy = [(0.0, 1.0, "dp_comm"), (1.0, 2.0, "dp_comm"), (2.0, 3.0, "dp_comm")]
    end, causes = unit_timing(steps, 0.0, busy, 0.2)
    assert end == reference(steps, 0.0, busy, 0.2)[0]
    assert abs(end - 2.5) < 1e-12 and abs(causes["dp_comm"] - 0.5) < 1e-12
