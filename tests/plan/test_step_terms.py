"""The plan's additive waits (clustersim.plan.step_terms): the slowest GPU and the host."""

from __future__ import annotations

import math

from clustersim.api import estimate, simulate
from clustersim.compute import host
from clustersim.compute.ops import Op
from clustersim.compute.variation import sync_wait_fraction
from clustersim.engine.timeline import CAUSES
from clustersim.plan.stage_work import build_step_work
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


def tiny(framework: str = "megatron-core", **parallel) -> object:
    """A 4-layer, hidden-256 model on one H100: every layer is far shorter on the GPU than on the host."""
    return scenario_from_dict({"model": {"preset": "megatron-1.7b", "hidden": 256, "heads": 4, "layers": 4,
                                         "seq_len": 256, "vocab": 1024},
                               "cluster": {"preset": "dgx-h100", "nodes": 1, "gpus_per_node": 1},
                               "framework": framework,
                               "parallel": {"tp": 1, "pp": 1, "dp": 1, "global_batch": 8, **parallel},
                               "training": {"dtype": "bf16"}})


def test_a_megatron_layer_costs_the_host_what_megatron_core_was_measured_to_spend() -> None:
    # 8 micro-batches x 4 layers x (forward + backward): at least the measured Python time, which
    # kernels x KERNEL_ISSUE_S (this layer names about 40 kernels) falls well short of
    sc = tiny()
    layer_s = host.MEGATRON_LAYER_HOST_S[("dense", "F")] + host.MEGATRON_LAYER_HOST_S[("dense", "B")]
    report = estimate(sc)
    assert report.step_time_s >= 8 * 4 * layer_s
    assert report.breakdown["host"] > 0.5 * 8 * 4 * layer_s


def test_other_frameworks_keep_the_kernel_count() -> None:
    st = build_step_work(tiny("torchtitan")).stages[0]
    for part, works in (("F", st.forward), ("B", st.backward)):
        for u, work in zip(st.issues(part, False, False), works, strict=True):
            kernels = sum(op.kernels for op in work if isinstance(op, Op))
            assert math.isclose(u.host_s, kernels * host.KERNEL_ISSUE_S) and not u.syncs


def test_full_recompute_pays_the_forward_again_on_the_host() -> None:
    plain, full = estimate(tiny()), estimate(tiny(recompute="full"))
    extra = full.breakdown["host"] - plain.breakdown["host"]
    # the backward re-runs each layer's forward: its measured host time, less what the GPU hides
    assert extra > 0.5 * 8 * 4 * host.MEGATRON_LAYER_HOST_S[("dense", "F")]


def moe(**moe_fields) -> object:
    return scenario_from_dict({"model": {"preset": "mixtral-8x7b", "moe": moe_fields},
                               "cluster": {"preset": "dgx-h100", "nodes": 8},
                               "parallel": {"tp": 1, "pp": 4, "dp": 16, "ep": 8, "virtual_stages": 8,
                                            "schedule": "interleaved-1f1b", "global_batch": 256},
                               "training": {"dtype": "bf16"}})


def test_each_dropless_moe_forward_waits_for_its_token_counts() -> None:
    # Mixtral's layers keep the GPU busier than the host: what remains is one kernel issue after
    # each MoE layer's forward sync, 32 layers / 4 stages x 16 micro-batches on every rank
    dropless = build_plan(moe()).ranks[0]
    assert dropless.host_s >= 8 * 16 * host.KERNEL_ISSUE_S
    # with the input padded to capacity the token counts are known in advance: no sync
    padded = build_plan(moe(capacity_factor=1.5, pad_to_capacity=True)).ranks[0]
    assert padded.host_s < 0.1 * dropless.host_s
