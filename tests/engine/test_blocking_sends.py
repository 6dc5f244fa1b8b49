"""Pipeline sends that hold their sender (clustersim.frameworks.blocking_sends): Megatron's
non-interleaved schedule, the 2021-22 Megatron-LM and DeepSpeed wait for every transfer; the
interleaved Megatron-Core schedule overlaps them unless --no-overlap-p2p-communication. Both
engines wait alike, the collapse still holds, and the wait is the transfer, under pp_comm."""

from __future__ import annotations

import math
from dataclasses import replace

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


def _last_forward(kinds: list[str]) -> int:
    return max(i for i, k in enumerate(kinds) if k == "F")


@pytest.mark.parametrize("framework,schedule,v,override,held", [
    ("megatron-core", "interleaved-1f1b", 2, None, "cool-down"), ("megatron-core", "interleaved-1f1b", 2, True, "cool-down"),
    ("megatron-core", "interleaved-1f1b", 2, False, "all"), ("megatron-core", "interleaved-1f1b", 1, None, "all"),
    ("megatron-core", "1f1b", 1, None, "all"), ("megatron-core", "1f1b", 1, True, "none"),
    ("megatron-legacy", "interleaved-1f1b", 2, None, "all"), ("megatron-legacy", "interleaved-1f1b", 2, True, "cool-down"),
    ("torchtitan", "interleaved-1f1b", 2, None, "none"), ("deepspeed", "interleaved-1f1b", 2, True, "none"),
    ("megatron-core", "zb-v", 1, None, "none"),
])
def test_the_rule_per_action(framework, schedule, v, override, held):
    """clustersim.frameworks.blocking_from: Megatron's interleaved schedule with overlapped
    exchanges holds the rank on the sends of its cool-down, the backwards after its last forward
    (schedules.py: ``send_backward_recv_backward`` there without ``overlap_p2p_comm=True``);
    every other case is the whole-schedule rule."""
    from types import SimpleNamespace

    from clustersim.frameworks import blocking_from

    kinds = ["F", "F", "F", "B", "F", "B", "F", "B", "B", "B", "B"]
    par = SimpleNamespace(schedule=schedule, overlap_p2p_comm=override, virtual_stages=v)
    expect = {"cool-down": _last_forward(kinds) + 1, "all": 0, "none": len(kinds)}[held]
    assert blocking_from(load_framework(framework), par, kinds) == expect


def _interleaved():
    # Megatron-Core's interleaved schedule (exchanges overlapped by default) over two RoCE nodes, one
    # GPU per stage and no tensor parallelism: no collective shares a link with the transfers in flight
    return scenario_from_dict({
        "framework": "megatron-core",
        "model": {"layers": 16, "hidden": 4096, "heads": 32, "vocab": 32000, "seq_len": 2048},
        "cluster": {"preset": "dgx-a100", "nodes": 2, "gpus_per_node": 4, "scale_out": "roce-200g"},
        "parallel": {"tp": 1, "pp": 8, "dp": 1, "micro_batch": 1, "global_batch": 32,
                     "schedule": "interleaved-1f1b", "virtual_stages": 2},
        "training": {"dtype": "fp16"}})


def test_interleaved_cool_down_waits_in_both_engines():
    """Megatron-Core's interleaved schedule: the plan holds each rank from the backward after its
    last forward; both engines (closed form with and without the periodic collapse, the hybrid
    and the plain event engine) wait there alike, only there (the recorded sends), and the wait
    costs time against the same plan without it."""
    from clustersim.engine.selector import simulate_plan, timing_model
    from clustersim.plan.step_plan import build_plan

    s = _interleaved()
    plan = build_plan(s)
    for rk in plan.ranks:
        assert rk.blocks_from == _last_forward([a.kind for a in rk.actions]) + 1 < len(rk.actions)
    closed, walked = estimate_step(s), estimate_step(s, collapse=False)
    event, simpy = simulate_step(s, record=False), simulate_step(s, record=True, hybrid=False)
    for other in (walked, event, simpy):
        assert math.isclose(closed.step_time_s, other.step_time_s, rel_tol=1e-9), (closed.step_time_s, other.step_time_s)
        assert math.isclose(closed.breakdown["pp_comm"], other.breakdown["pp_comm"], rel_tol=1e-7, abs_tol=1e-12)
    waits = [seg for seg in simpy.timeline.segments if seg.stream == "compute" and seg.name.startswith("send ")]
    assert waits and all(seg.cause == "pp_comm" for seg in waits)
    for seg in waits:
        acts = plan.ranks[seg.rank].actions
        held = {str(a) for a in acts[plan.ranks[seg.rank].blocks_from:]}
        assert seg.name[len("send "):] in held
    free = replace(plan, ranks=tuple(replace(rk, blocks_from=len(rk.actions)) for rk in plan.ranks))
    loose = timing_model("analytical").time(free)
    assert closed.step_time_s > loose.step_time_s and closed.breakdown["pp_comm"] > loose.breakdown["pp_comm"]
    assert math.isclose(simulate_plan(free, False).step_time_s, loose.step_time_s, rel_tol=1e-9)
