"""Pipeline sends that hold their sender (clustersim.frameworks.blocking_sends): Megatron's
non-interleaved schedule, the 2021-22 Megatron-LM and DeepSpeed wait for every transfer; the
interleaved Megatron-Core schedule overlaps them unless --no-overlap-p2p-communication. Both
engines wait alike, the collapse still holds, and the wait is the transfer, under pp_comm."""

from __future__ import annotations

import math

import pytest

from clustersim.engine.selector import estimate_step, simulate_step
from clustersim.frameworks import blocking_sends, load_framework, sends_block
from clustersim.scenario import scenario_from_dict


@pytest.mark.parametrize("framework,schedule,override,blocks", [
    ("megatron-core", "1f1b", None, True), ("megatron-core", "gpipe", None, True),
    ("megatron-core", "interleaved-1f1b", None, False), ("megatron-core", "interleaved-1f1b", False, True),
    ("megatron-core", "1f1b", True, False), ("megatron-legacy", "interleaved-1f1b", None, True),
    ("deepspeed", "1f1b", None, True), ("torchtitan", "1f1b", None, False), ("megatron-core", "zb-v", None, False),
])
def test_the_rule(framework, schedule, override, blocks):
    assert blocking_sends(load_framework(framework), schedule, override) is blocks


def _job(**parallel: object):
    # two nodes over 200 Gb/s RoCE, one GPU per stage: the boundary between the nodes is slow
    return scenario_from_dict({
        "framework": "megatron-legacy",
        "model": {"layers": 16, "hidden": 4096, "heads": 32, "vocab": 32000, "seq_len": 2048},
        "cluster": {"preset": "dgx-a100", "nodes": 2, "scale_out": "roce-200g"},
        "parallel": {"tp": 2, "pp": 8, "dp": 1, "micro_batch": 1, "global_batch": 32, **parallel},
        "training": {"dtype": "fp16"}})


@pytest.mark.parametrize("parallel", [dict(schedule="1f1b"), dict(schedule="interleaved-1f1b", virtual_stages=2),
                                      dict(schedule="gpipe")], ids=["1f1b", "interleaved", "gpipe"])
def test_both_engines_wait_alike_and_the_wait_is_pp_comm(parallel):
    blocking, overlapped = _job(**parallel), _job(**parallel, overlap_p2p_comm=True)
    assert sends_block(blocking.framework, blocking.parallel) and not sends_block(overlapped.framework,
                                                                                    overlapped.parallel)
    closed, walked = estimate_step(blocking), estimate_step(blocking, collapse=False)
    event, simpy = simulate_step(blocking, record=False), simulate_step(blocking, record=True, hybrid=False)
    for other in (walked, event, simpy):
        assert math.isclose(closed.step_time_s, other.step_time_s, rel_tol=1e-9), (closed.step_time_s, other.step_time_s)
        assert math.isclose(closed.breakdown["pp_comm"], other.breakdown["pp_comm"], rel_tol=1e-7, abs_tol=1e-12)
    free = estimate_step(overlapped)
    assert closed.step_time_s > free.step_time_s
    assert closed.breakdown["pp_comm"] > free.breakdown["pp_comm"]
