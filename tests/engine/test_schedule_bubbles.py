"""Acceptance: the step engine's bubble for each schedule matches its closed form
(clustersim.parallel.bubble) on a dense model where nothing else differs, and the memory each
schedule holds follows the papers' accounting."""

from __future__ import annotations

import math

import pytest

from clustersim.api import estimate, simulate
from clustersim.hardware.load import add_profile_file
from clustersim.parallel.bubble import analytic_bubble
from clustersim.plan.actions import plan_actions
from clustersim.plan.compiled_unit import UnitCache
from clustersim.plan.stage_work import build_step_work
from clustersim.scenario import scenario_from_dict

# a link with no cost, so that the pipeline transfers take no time: the schedule alone sets the bubble
FAST = """fabrics:
  test-instant-link:
    kind: nvswitch
    description: a link with no cost (isolates the pipeline schedule in tests)
    bw_GBps: 1000000
    latency_us: 0.001
"""
CASES = [("1f1b", 1), ("interleaved-1f1b", 2), ("zb-h1", 1), ("zb-v", 1), ("dualpipe", 1), ("dualpipe-v", 1)]


@pytest.fixture(scope="module")
def fast_link(tmp_path_factory):
    path = tmp_path_factory.mktemp("profiles") / "fast.yaml"
    path.write_text(FAST)
    add_profile_file(path)


def _scenario(schedule: str, v: int):
    # 64 layers on 4 ranks (16 per stage, 8 per chunk), a tiny vocabulary so that the embedding and
    # the output head add next to nothing to the end stages, no TP or DP communication
    return scenario_from_dict({
        "model": {"preset": "megatron-7.5b", "layers": 64, "vocab": 256},
        "cluster": {"preset": "dgx-h100", "nodes": 1, "gpus_per_node": 4, "scale_up": "test-instant-link"},
        "parallel": {"tp": 1, "pp": 4, "dp": 1, "micro_batch": 1, "global_batch": 16, "schedule": schedule,
                     "virtual_stages": v},
        "training": {"dtype": "bf16"}})


def _chunk_times(sc) -> tuple[float, float, float]:
    """(F, B input part, W) of one middle chunk, from the units the engine runs."""
    work, cache = build_step_work(sc), UnitCache(sc)
    st = work.stages[1]
    f = sum(cache(w).time_s for w in st.forward)
    b = sum(cache(w).time_s for w in st.backward_input)
    w = sum(cache(x).time_s for x in st.backward_weight)
    return f, b, w


@pytest.mark.parametrize("schedule,v", CASES, ids=[c[0] for c in CASES])
def test_simulated_bubble_matches_the_closed_form(fast_link, schedule: str, v: int) -> None:
    sc = _scenario(schedule, v)
    f, b, w = _chunk_times(sc)
    assert w <= f <= b <= 2 * w  # the closed forms' domain (clustersim.parallel.bubble)
    report = simulate(sc)
    work, cache = build_step_work(sc), UnitCache(sc)
    plans = plan_actions(sc, work)
    r = report.critical_rank
    busy = sum(cache(x).time_s for a in plans[r] for x in a.works)
    # the step's additive waits (clustersim.plan.step_terms) are no pipeline bubble
    extra = report.breakdown["jitter"] + report.breakdown["host"]
    bubble = report.step_time_s - work.optimizer_time_s[r] - busy - extra
    expected = analytic_bubble(schedule, sc.parallel.pp, f, b, w)
    assert math.isclose(bubble, expected, rel_tol=0.02), (schedule, bubble, expected)
    # nothing contends: the closed-form twin agrees with the event engine
    assert math.isclose(estimate(sc).step_time_s, report.step_time_s, rel_tol=1e-6)


def test_zero_bubble_and_dualpipe_beat_1f1b(fast_link) -> None:
    steps = {s: simulate(_scenario(s, v)).step_time_s for s, v in CASES}
    assert steps["zb-h1"] < steps["1f1b"] and steps["zb-v"] < steps["zb-h1"]
    assert steps["dualpipe"] < steps["1f1b"]


def test_peak_memory_per_schedule(fast_link) -> None:
    """1F1B, ZB-H1 and ZB-V hold pp stages' activations at the peak (Qi et al. 2024), DualPipe
    pp + 1 and twice the parameters (DualPipe README)."""
    reports = {s: simulate(_scenario(s, v)) for s, v in CASES}
    act = {s: max(m.activations for m in r.memory_by_stage) for s, r in reports.items()}
    weights = {s: max(m.weights for m in r.memory_by_stage) for s, r in reports.items()}
    # (the last rank of ZB-H1 also holds pp micro-batches, so its output head's share adds a little)
    assert act["zb-h1"] == pytest.approx(act["1f1b"], rel=0.01)
    assert act["zb-v"] == pytest.approx(act["1f1b"], rel=0.01)
    assert act["dualpipe"] == pytest.approx(act["1f1b"] * 5 / 4, rel=0.01)      # pp + 1 over pp
    assert act["dualpipe-v"] == pytest.approx(act["1f1b"] * 4.5 / 4, rel=0.01)  # (2 pp + 1) half stages
    assert weights["dualpipe"] == pytest.approx(2 * weights["1f1b"], rel=0.01)
    assert weights["zb-v"] == pytest.approx(weights["1f1b"], rel=0.01)
