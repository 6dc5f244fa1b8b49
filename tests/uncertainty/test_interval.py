"""The prediction interval: residuals that match the model, widening where evidence is thin."""

from __future__ import annotations

import json
import math

import pytest

from clustersim.calibrate.residuals import compute_residuals
from clustersim.scenario import scenario_from_dict
from clustersim.uncertainty import features, step_interval
from clustersim.uncertainty import interval as interval_module
from clustersim.uncertainty.interval import RESIDUALS_FILE, WIDEN, Evidence, interval_from, widenings


def scenario(**parallel: object) -> object:
    base = {"model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "nodes": 8},
            "parallel": {"tp": 8, "pp": 1, "dp": 8, "global_batch": 64, **parallel}}
    return scenario_from_dict(base)


def test_stored_residuals_are_those_of_the_current_model():
    """clustersim/data/residuals.json must be regenerated (benchmarks/accuracy.py --write) whenever the
    cost model changes: the interval would otherwise describe another model's errors."""
    stored = {r["name"]: r for r in json.loads(RESIDUALS_FILE.read_text())["runs"]}
    fresh = compute_residuals()
    assert sorted(stored) == sorted(r.name for r in fresh)
    for r in fresh:
        assert math.isclose(stored[r.name]["predicted_step_time_s"], r.predicted_step_time_s, rel_tol=1e-5), r.name
        assert stored[r.name]["regime"] == r.regime


def test_interval_is_a_band_around_the_prediction():
    iv = step_interval(scenario())
    assert iv.level == 0.8 and iv.lo_factor < 1 < iv.hi_factor
    lo, hi = iv.of(10.0)
    assert lo < 10 < hi and (lo, hi) == (10 * iv.lo_factor, 10 * iv.hi_factor)
    r_lo, r_hi = iv.of_rate(0.5)
    assert math.isclose(r_lo, 0.5 / iv.hi_factor) and math.isclose(r_hi, 0.5 / iv.lo_factor)


def width(iv) -> float:
    return math.log(iv.hi_factor / iv.lo_factor)


def test_missing_evidence_widens_the_interval_and_says_why():
    base = step_interval(scenario())
    assert base.regime == "3d/hopper" and base.evidence_runs == 9
    cases = {
        "fp8": scenario_from_dict({"model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "nodes": 8},
                                   "parallel": {"tp": 8, "dp": 8, "global_batch": 64},
                                   "training": {"dtype": "fp8"}}),
        "cp": scenario(cp=2, dp=4),
        "scale": scenario_from_dict({"model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100",
                                     "nodes": 4096}, "parallel": {"tp": 8, "dp": 4096, "global_batch": 4096}}),
        "framework": scenario_from_dict({"framework": "torchtitan", "model": {"preset": "llama3-8b"},
                                         "cluster": {"preset": "dgx-h100", "nodes": 8},
                                         "parallel": {"tp": 8, "dp": 8, "global_batch": 64}}),
    }
    for name, sc in cases.items():
        iv = step_interval(sc)
        assert width(iv) > width(base), name
        assert iv.why and not iv.validated, name
    moe = scenario_from_dict({"model": {"preset": "mixtral-8x7b"}, "cluster": {"preset": "dgx-h100", "nodes": 8},
                              "parallel": {"tp": 2, "dp": 32, "ep": 8, "global_batch": 64,
                                           "sequence_parallel": True}})
    assert any("mixture of experts" in w for w in step_interval(moe).why)


def test_zero3_beyond_measured_sizes_and_implementations_widens():
    sc21 = {"framework": "megatron-legacy", "model": {"preset": "gpt3-175b"}, "cluster": {"preset": "dgx-a100"},
            "parallel": {"tp": 1, "pp": 1, "zero_stage": 3, "recompute": "full", "global_batch": 1536}}
    inside = scenario_from_dict({**sc21, "cluster": {"preset": "dgx-a100", "nodes": 96},
                                 "parallel": {**sc21["parallel"], "dp": 768, "micro_batch": 2}})
    beyond = scenario_from_dict({**sc21, "cluster": {"preset": "dgx-a100", "nodes": 768},
                                 "parallel": {**sc21["parallel"], "dp": 6144, "micro_batch": 1,
                                              "global_batch": 6144}})
    fsdp = scenario_from_dict({**sc21, "framework": "torchtitan", "cluster": {"preset": "dgx-a100", "nodes": 96},
                               "parallel": {**sc21["parallel"], "dp": 768, "micro_batch": 2}})
    a, b, c = step_interval(inside), step_interval(beyond), step_interval(fsdp)
    assert a.regime == b.regime == c.regime == "zero3/a100"
    assert a.validated and not b.validated and not c.validated
    assert width(b) > width(a) and width(c) > width(a)
    assert any("fsdp2" in w for w in c.why)


def test_interval_math_by_hand():
    # one regime of three runs measured 10% slower than predicted: r = ln(1/1.1) each
    r = math.log(1 / 1.1)
    ev = Evidence((r, r, r), frozenset({"megatron-core"}), frozenset(), 8, 64)
    pooled = Evidence((r, r, r, 0.1, -0.1), frozenset(), frozenset(), 8, 64)
    f = features(scenario())
    iv = interval_from(f, ev, pooled, frozenset({"hopper"}))
    mu = 3 * r / (3 + 2)
    spread = math.sqrt(sum((x - sum(pooled.log_ratios) / 5) ** 2 for x in pooled.log_ratios) / 4)
    s = math.sqrt(3 * spread ** 2 / (2 + 3)) * math.sqrt(1 + 1 / 6)
    assert math.isclose(iv.lo_factor, math.exp(-mu - 1.2816 * s), rel_tol=1e-12)
    assert math.isclose(iv.hi_factor, math.exp(-mu + 1.2816 * s), rel_tol=1e-12)
    # a feature without evidence adds its widening in quadrature
    assert widenings(f, ev, frozenset({"ampere"}), True)[0][1] == WIDEN["generation"]


@pytest.mark.parametrize("path", ["scenarios/llama3_70b_h100x512.yaml", "scenarios/gpt3_175b_a100x1024.yaml"])
def test_run_json_carries_the_contract_interval(path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "clustersim", "run", path, "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    iv = d["interval"]
    assert iv["level"] == 0.8
    for key in ("step_time_s", "mfu", "tokens_per_s"):
        lo, hi = iv[key]
        assert lo < hi
    assert iv["step_time_s"][0] < d["step_time_s"] * 1.2 and iv["step_time_s"][1] > d["step_time_s"] * 0.8
    assert math.isclose(iv["tokens_per_s"][0] * iv["step_time_s"][1], d["tokens_per_s"] * d["step_time_s"],
                        rel_tol=1e-9)


def test_scale_widening_per_doubling_only_above_the_largest_measured_run():
    """What grows with the GPU count widens upward; below the smallest measured run only the
    change of the modelled slowest-GPU wait does (clustersim.uncertainty.interval.scale_widening)."""
    from clustersim.compute.variation import sync_wait_fraction
    from clustersim.uncertainty.interval import JITTER_MODEL_UNCERTAINTY, scale_widening

    def jitter(a: int, b: int) -> float:
        return JITTER_MODEL_UNCERTAINTY * abs(math.log1p(sync_wait_fraction(a)) - math.log1p(sync_wait_fraction(b)))

    assert scale_widening(16, 384) == pytest.approx(jitter(16, 384))
    assert scale_widening(12288, 1536) == pytest.approx(math.hypot(jitter(12288, 1536), WIDEN["scale_per_doubling"] * 3))
    assert scale_widening(384, 384) == 0.0


def test_a_pipeline_schedule_no_measured_run_used_widens():
    """The regime's measured pipelined runs vouch for their schedules only (residuals.json
    "schedule"): on Hopper they ran interleaved 1F1B, so a 1F1B or ZB-H1 pipeline there widens the
    band by WIDEN["schedule"] and says so; the interleaved one and a job without a pipeline do not."""
    regimes, _ = interval_module._stored()
    assert regimes["3d/hopper"].schedules == frozenset({"interleaved-1f1b"})
    assert regimes["3d/a100"].schedules == frozenset({"1f1b"})
    assert regimes["zero3/a100"].schedules == frozenset()       # no pipelined run
    big = {"model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "nodes": 16}}
    par = {"tp": 8, "pp": 4, "dp": 4, "global_batch": 64}
    measured = step_interval(scenario_from_dict({**big, "parallel": {**par, "schedule": "interleaved-1f1b",
                                                                      "virtual_stages": 2}}))
    assert not any("schedule" in w for w in measured.why)
    assert features(scenario()).schedule == "" and not any("schedule" in w for w in step_interval(scenario()).why)
    for schedule in ("1f1b", "zb-h1"):
        iv = step_interval(scenario_from_dict({**big, "parallel": {**par, "schedule": schedule}}))
        assert f"pipeline schedule {schedule} not measured in this regime" in iv.why
        assert width(iv) > width(measured), schedule
        grown = (width(iv) / (2 * 1.2816)) ** 2 - (width(measured) / (2 * 1.2816)) ** 2   # sigma^2 added
        assert math.isclose(grown, WIDEN["schedule"] ** 2 * (1 + 1 / (9 + 3)), rel_tol=1e-6), schedule
