"""FairShareLink: processor sharing, checked against hand-computed completion times."""

import pytest
import simpy

from clustersim.network import FairShareLink


def _run(starts_and_work):
    """Start transfers at (start_s, work_s); return their completion times."""
    env = simpy.Environment()
    link = FairShareLink(env, "l")
    done = {}

    def proc(i, start, work):
        yield env.timeout(start)
        yield link.transfer(work)
        done[i] = env.now

    for i, (start, work) in enumerate(starts_and_work):
        env.process(proc(i, start, work))
    env.run()
    return [done[i] for i in range(len(starts_and_work))]


def test_alone_takes_exactly_its_work():
    assert _run([(0.0, 2.5)]) == [pytest.approx(2.5)]


def test_two_equal_transfers_each_take_twice_as_long():
    # both at rate 1/2 from t=0: 1 s of work finishes at 2 s
    assert _run([(0.0, 1.0), (0.0, 1.0)]) == [pytest.approx(2.0), pytest.approx(2.0)]


def test_staggered_transfers_share_only_while_overlapping():
    # A alone 0..0.5 (0.5 done), then A and B at 1/2: A's last 0.5 takes 1.0 -> A ends at 1.5;
    # B got 0.5 by 1.5, its last 0.5 alone -> B ends at 2.0
    assert _run([(0.0, 1.0), (0.5, 1.0)]) == [pytest.approx(1.5), pytest.approx(2.0)]


def test_short_and_long_transfer():
    # 3 flows at 1/3: the 0.5 s one ends at 1.5; the two 1 s ones have 0.5 left, at 1/2 -> 2.5
    assert _run([(0.0, 0.5), (0.0, 1.0), (0.0, 1.0)]) == [pytest.approx(1.5), pytest.approx(2.5), pytest.approx(2.5)]


def test_zero_work_is_immediate():
    assert _run([(1.0, 0.0)]) == [pytest.approx(1.0)]
