"""torchtitan FSDP2 under pipeline parallelism: no reshard after forward by default (torchtitan
parallelize.py apply_fsdp, ``reshard_after_forward = not pp_enabled``) and one reduce-scatter per
unit per step after the stage's last backward (torch/distributed/pipelining/stage.py
``backward_maybe_with_nosync``), in time and memory alike (clustersim.frameworks.fsdp_in_pipeline_stage,
reshards_after_forward). The importer's policy: tests/importers/test_torchtitan_reshard_policy.py."""

from __future__ import annotations

import pytest

from clustersim.api import estimate, simulate
from clustersim.plan.data_parallel import dp_plan
from clustersim.plan.stage_work import build_step_work
from clustersim.scenario import scenario_from_dict


def make(framework="torchtitan", pp=2, gb=32, fsdp=None, **parallel):
    par = {"tp": 1, "pp": pp, "dp": 16 // pp, "zero_stage": 3, "global_batch": gb, "recompute": "full", **parallel}
    if fsdp is not None:
        par["fsdp"] = fsdp
    return scenario_from_dict({"framework": framework, "model": {"preset": "llama2-7b", "seq_len": 4096},
                               "cluster": {"preset": "dgx-h100", "nodes": 2}, "parallel": par})


def plan(sc):
    return dp_plan(sc, build_step_work(sc))


def test_default_keeps_parameters_and_reduces_once_after_the_last_backward():
    dp = plan(make())
    assert dp.zero3.backward_gathers == 0 and dp.zero3.reduce == {}
    for g, stage in enumerate(build_step_work(make()).stages):   # every unit's reduce-scatter, in the tail
        names = [n for n, _ in dp.after_backward[g] if n.startswith("reduce_scatter")]
        assert len(names) == len(stage.unit_params)
    # an explicit reshard_after_forward: true (torchtitan "always") re-gathers in the backward
    always = plan(make(fsdp={"version": 2, "reshard_after_forward": True}))
    assert always.zero3.backward_gathers == 1 and always.zero3.reduce == {}
    # without PP, or another framework's FSDP2: resharded, reduce-scattered every micro-batch
    for sc in (make(pp=1), make("megatron-core", fsdp={"version": 2})):
        assert plan(sc).zero3.backward_gathers == 1 and plan(sc).zero3.reduce


def test_time_and_memory_agree_on_the_default():
    default, never = make(), make(fsdp={"version": 2, "reshard_after_forward": False})
    always = make(fsdp={"version": 2, "reshard_after_forward": True})
    for run in (estimate, simulate):
        d, n, a = run(default), run(never), run(always)
        assert d.step_time_s == pytest.approx(n.step_time_s, rel=1e-9)
        assert a.step_time_s > d.step_time_s            # the backward re-gathers
        # the pipeline stage keeps every unit unsharded after a backward whatever the policy
        assert d.memory.allocated_peak_bytes == n.memory.allocated_peak_bytes == a.memory.allocated_peak_bytes


def test_reduce_scatters_do_not_grow_with_the_micro_batches():
    # without overlap each reduce-scatter runs on the compute stream: 4x the micro-batches must
    # not bring 4x the reduce-scatters (once per step)
    few = estimate(make(gb=32, overlap_grad_reduce=False))
    many = estimate(make(gb=128, overlap_grad_reduce=False))
    per_unit = plan(make(pp=1, gb=16)).zero3.reduce
    rs_s = sum(p.time_s for items in per_unit.values() for _, p in items)
    assert many.breakdown["dp_comm"] - few.breakdown["dp_comm"] < rs_s
