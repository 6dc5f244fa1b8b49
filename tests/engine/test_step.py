"""The training-step engine: event engine vs closed form, breakdown, contention, memory exit code."""

from __future__ import annotations

import math

import pytest

from clustersim.api import estimate, simulate, simulate_with_timeline
from clustersim.engine.timeline import CAUSES
from clustersim.scenario import scenario_from_dict


def make(model: str = "megatron-1.7b", preset: str = "dgx-h100", nodes: int = 1, **parallel: object):
    return scenario_from_dict({"model": {"preset": model}, "cluster": {"preset": preset, "nodes": nodes},
                               "parallel": parallel, "training": {"dtype": "bf16"}})


NO_CONTENTION = [
    # one node, TP only: TP collectives run one at a time on NVLink
    dict(model="megatron-1.7b", nodes=1, tp=8, pp=1, dp=1, global_batch=4),
    # TP inside nodes, DP across them: DP owns the NICs, TP the NVLink; nothing else shares them
    dict(model="megatron-1.7b", nodes=2, tp=8, pp=1, dp=2, global_batch=8, zero_stage=1),
    dict(model="megatron-1.7b", nodes=2, tp=8, pp=1, dp=2, global_batch=8, zero_stage=0, overlap_grad_reduce=False),
    # ZeRO-3 (FSDP2) without TP, one micro-batch, parameters kept from forward to backward: the
    # forward's gathers and the backward's reduce-scatters never run at the same time
    dict(model="megatron-1.7b", nodes=2, tp=1, pp=1, dp=16, global_batch=16, zero_stage=3,
         fsdp={"version": 2, "reshard_after_forward": False}),
    # a pipeline inside one node with GPipe: a stage's sends are far apart in time
    dict(model="megatron-1.7b", nodes=1, tp=4, pp=2, dp=1, global_batch=4, schedule="gpipe"),
]


@pytest.mark.parametrize("case", NO_CONTENTION, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_event_engine_equals_closed_form_without_contention(case: dict) -> None:
    sc = make(**case)
    event, closed = simulate(sc), estimate(sc)
    assert math.isclose(event.step_time_s, closed.step_time_s, rel_tol=1e-9), (event.step_time_s, closed.step_time_s)
    for cause in CAUSES:
        assert math.isclose(event.breakdown[cause], closed.breakdown[cause], rel_tol=1e-6, abs_tol=1e-9), cause


@pytest.mark.parametrize("case", NO_CONTENTION + [dict(model="megatron-18b", nodes=4, tp=8, pp=4, dp=1,
                                                        global_batch=16, schedule="1f1b")],
                         ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_breakdown_adds_up_to_step_time(case: dict) -> None:
    report = simulate(make(**case))
    total = sum(report.breakdown[c] for c in CAUSES)
    assert math.isclose(total, report.step_time_s, rel_tol=1e-9)
    assert all(v >= 0 for v in report.breakdown.values())


def test_overlapped_tp_collectives_contend_on_nvlink() -> None:
    # With sequence parallelism the backward's async all-gather runs beside the dgrad GEMM and
    # meets the dgrad reduce-scatter on the same NVLink port: the event engine sees it.
    sc = make(model="megatron-3.6b", nodes=1, tp=8, pp=1, dp=1, global_batch=4, sequence_parallel=True)
    assert simulate(sc).step_time_s >= estimate(sc).step_time_s


def test_shared_nic_makes_the_event_engine_slower_than_the_closed_form() -> None:
    # PP and DP both cross nodes on each GPU's rail NIC, over slow Ethernet: they must contend.
    sc = scenario_from_dict({"model": {"preset": "megatron-3.6b"},
                             "cluster": {"preset": "dgx-h100", "nodes": 4, "scale_out": "eth-10g", "nics_per_node": 1},
                             "parallel": {"tp": 8, "pp": 2, "dp": 2, "global_batch": 16, "micro_batch": 1}})
    event, closed = simulate(sc), estimate(sc)
    assert event.step_time_s > closed.step_time_s * 1.001


def test_more_micro_batches_shrink_the_bubble_share() -> None:
    small = simulate(make(model="megatron-18b", nodes=4, tp=8, pp=4, dp=1, global_batch=4))
    large = simulate(make(model="megatron-18b", nodes=4, tp=8, pp=4, dp=1, global_batch=32))
    share = lambda r: r.breakdown["bubble"] / r.step_time_s  # noqa: E731
    assert share(large) < share(small)
    # 1F1B bubble (Narayanan et al. 2021 §2.2.1): (pp-1)/(m+pp-1) of the step, roughly, on the
    # critical stage; with m=4, pp=4 that is 3/7 = 0.43
    assert 0.25 < share(small) < 0.6


def test_interleaving_reduces_step_time() -> None:
    base = dict(model="megatron-18b", nodes=4, tp=8, pp=4, dp=1, global_batch=8)
    plain = simulate(make(**base, schedule="1f1b"))
    inter = simulate(make(**base, schedule="interleaved-1f1b", virtual_stages=2))
    assert inter.step_time_s < plain.step_time_s


def test_recompute_costs_time_and_saves_memory() -> None:
    base = dict(model="megatron-7.5b", nodes=1, tp=8, pp=1, dp=1, global_batch=8)
    none, full = simulate(make(**base, recompute="none")), simulate(make(**base, recompute="full"))
    assert full.step_time_s > none.step_time_s
    assert full.memory.peak_bytes_per_gpu < none.memory.peak_bytes_per_gpu
    assert full.model_flops_per_step == none.model_flops_per_step


def test_mfu_and_throughput_definitions() -> None:
    r = simulate(make(nodes=1, tp=1, pp=1, dp=8, global_batch=16))
    j = r.to_json()
    assert j["tokens_per_s"] == pytest.approx(16 * 2048 / j["step_time_s"])
    assert j["tflops_per_gpu"] == pytest.approx(j["model_flops_per_step"] / j["step_time_s"] / 8 / 1e12)
    assert j["mfu"] == pytest.approx(j["tflops_per_gpu"] / 989)
    assert 0 < j["mfu"] < 1


def test_trace_has_a_track_per_rank_and_stream() -> None:
    from clustersim.trace import trace_events

    sc = make(model="megatron-18b", nodes=4, tp=8, pp=4, dp=1, global_batch=8)
    _, result = simulate_with_timeline(sc)
    trace = trace_events(result.timeline, sc)
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in spans} == {0, 1, 2, 3}
    assert {e["cat"] for e in spans} >= {"compute", "tp_comm", "pp_comm"}
    assert all(e["dur"] >= 0 for e in spans)


def test_trace_has_a_thread_for_every_stream_the_engine_uses() -> None:
    from clustersim.engine.event import STREAMS
    from clustersim.trace import trace_events

    sc = make(model="megatron-18b", nodes=4, tp=8, pp=2, dp=2, global_batch=8, zero_stage=3)
    _, result = simulate_with_timeline(sc)
    trace = trace_events(result.timeline, sc)  # ZeRO-3 puts segments on the "rs" stream
    threads = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {s.stream for s in result.timeline.segments} <= threads and set(STREAMS) <= threads


def test_expert_gradients_reduce_over_the_expert_data_parallel_group() -> None:
    from clustersim.plan.comm_plans import group_shape
    from clustersim.plan.data_parallel import dp_plan
    from clustersim.plan.stage_work import build_step_work

    sc = make(model="mixtral-8x7b", nodes=8, tp=2, pp=1, dp=32, ep=8, global_batch=64, sequence_parallel=True,
              zero_stage=1)
    plan = dp_plan(sc, build_step_work(sc))
    names = [name for items in plan.grad_buckets.values() for name, _ in items]
    assert any("experts" in n for n in names) and any("experts" not in n for n in names)
    # dp x cp / ep = 32 / 8 = 4 expert-data-parallel ranks; the dense gradients span all 32
    assert group_shape(sc, "edp").num_ranks == 4
    assert group_shape(sc, "dp_cp").num_ranks == 32


def test_framework_gradient_buffer_passes_are_priced_per_rank():
    """Megatron-Core streams the whole fp32 gradient buffer 16 B/param per step outside the optimizer
    (zeroing, NaN check, 1/dp scaling: frameworks.yaml); ZeRO-3 keeps no whole buffer."""
    from clustersim.compute.optimizer import adam_kernel_s, grad_buffer_time_s
    from clustersim.compute.roofline import memory_time_s
    from clustersim.plan.stage_work import build_step_work
    from clustersim.scenario import scenario_from_dict

    def work(framework: str, zero: int):
        return build_step_work(scenario_from_dict({
            "framework": framework, "model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "nodes": 2},
            "parallel": {"tp": 2, "pp": 2, "dp": 4, "zero_stage": zero, "global_batch": 32}}))

    mc, tt = work("megatron-core", 0), work("torchtitan", 0)   # DDP: torchtitan has no ZeRO-1
    gpu = scenario_from_dict({"model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "nodes": 2},
                              "parallel": {"tp": 2, "pp": 2, "dp": 4, "global_batch": 32}}).cluster.gpu
    for rank, params in enumerate(mc.params_per_rank):
        extra = mc.optimizer_time_s[rank] - tt.optimizer_time_s[rank]
        # the pass zeroes the whole buffer, so Adam leaves its own 4 B of zeroing over the rank's
        # parameters (no ZeRO shard at stage 0) out (it was counted in both)
        shard = params
        zeroing = adam_kernel_s(shard * 38, gpu) - adam_kernel_s(shard * 34, gpu)
        assert abs(extra - (memory_time_s(16 * params, gpu) - zeroing)) < 1e-9
        assert abs(extra - (grad_buffer_time_s(params, 16, gpu) - zeroing)) < 1e-9
    z3 = work("megatron-core", 3)
    z3_tt = work("torchtitan", 3)
    assert z3.optimizer_time_s == z3_tt.optimizer_time_s
    assert grad_buffer_time_s(10**9, 0, gpu) == 0.0
