"""The plan's additive waits (clustersim.plan.step_terms): the slowest GPU and the host."""

from __future__ import annotations

import math

from clustersim.api import estimate, simulate
from clustersim.compute import host
from clustersim.compute.variation import sync_wait_fraction
from clustersim.engine.timeline import CAUSES
from clustersim.plan.step_plan import build_plan
from clustersim.plan.step_terms import compute_seconds
from clustersim.scenario import scenario_from_dict


def make(nodes: int = 2, tp: int = 8, pp: int = 1, dp: int = 2, model: str = "megatron-1.7b", **extra):
    return scenario_from_dict({"model": {"preset": model}, "cluster": {"preset": "dgx-h100", "nodes": nodes},
                               "parallel": {"tp": tp, "pp": pp, "dp": dp, "global_batch": 4 * dp, **extra},
                               "training": {"dtype": "bf16"}})


def test_jitter_is_the_expected_wait_on_the_ranks_kernel_seconds() -> None:
    sc = make()
    plan = build_plan(sc)
    rk = plan.ranks[0]
    kernels = sum(compute_seconds(rk.totals[(a.stage, a.part)]) for a in rk.actions) + rk.tail.optimizer_time_s
    assert math.isclose(rk.jitter_s, sync_wait_fraction(16) * kernels, rel_tol=1e-12)
    report = simulate(sc)
    assert math.isclose(report.breakdown["jitter"], rk.jitter_s, rel_tol=1e-9)


def test_both_engines_add_the_same_waits_and_the_breakdown_adds_up() -> None:
    for sc in (make(), make(nodes=1, tp=4, pp=2, dp=1, schedule="gpipe")):
        event, closed = simulate(sc), estimate(sc)
        assert math.isclose(event.step_time_s, closed.step_time_s, rel_tol=1e-9)
        for cause in ("jitter", "host"):
            assert math.isclose(event.breakdown[cause], closed.breakdown[cause], rel_tol=1e-9, abs_tol=1e-12)
        assert math.isclose(sum(event.breakdown[c] for c in CAUSES), event.step_time_s, rel_tol=1e-9)


def test_the_wait_grows_with_the_job_not_with_one_replica() -> None:
    small, big = make(nodes=2, dp=2), make(nodes=64, dp=64)
    per_gpu = [simulate(s).breakdown["jitter"] for s in (small, big)]
    assert per_gpu[1] > 1.5 * per_gpu[0]


def test_one_gpu_has_no_jitter_and_pays_the_megatron_syncs() -> None:
    sc = scenario_from_dict({"model": {"preset": "megatron-1.7b"}, "cluster": {"preset": "dgx-h100", "nodes": 1,
                                                                           "gpus_per_node": 1},
                             "parallel": {"tp": 1, "pp": 1, "dp": 1, "global_batch": 2}, "training": {"dtype": "bf16"}})
    report = simulate(sc)
    assert report.breakdown["jitter"] == 0.0
    assert report.breakdown["host"] >= 0.999 * host.sync_points("megatron-core", "bf16") * host.KERNEL_ISSUE_S


def test_tiny_layers_are_host_bound() -> None:
    # a 2-layer, hidden-256 model: every kernel is shorter than its issue, so the host sets the pace
    sc = scenario_from_dict({"model": {"preset": "megatron-1.7b", "hidden": 256, "heads": 4, "layers": 2,
                                       "seq_len": 256, "vocab": 1024},
                             "cluster": {"preset": "dgx-h100", "nodes": 1, "gpus_per_node": 1},
                             "parallel": {"tp": 1, "pp": 1, "dp": 1, "global_batch": 8}, "training": {"dtype": "bf16"}})
    report = simulate(sc)
    assert report.breakdown["host"] > report.breakdown["compute"]
    assert math.isclose(sum(report.breakdown[c] for c in CAUSES), report.step_time_s, rel_tol=1e-9)
