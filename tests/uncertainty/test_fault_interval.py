"""A run with faults gets no validated interval: no measured run had a slow GPU, a straggler or a
slow link, and the fault model's cost of a GPU that paces its stage is low by about J of that
stage's kernel seconds (docs/perrank.md), so the band widens at least by that (docs/uncertainty.md,
"Faults"). Before, the healthy regime's band was moved onto the faulted step and called validated."""

from __future__ import annotations

import math

import pytest

from clustersim.compute.variation import sync_wait_fraction
from clustersim.hardware.spec import CalibrationEvidence
from clustersim.scenario import scenario_from_dict
from clustersim.uncertainty import features, step_interval
from clustersim.uncertainty.calibrated import calibrated_interval
from clustersim.uncertainty.interval import K_S, Z_80, _stored
from clustersim.uncertainty.regimes import cover_key
from tests.conftest import cli_json

GPT3 = "scenarios/gpt3_175b_a100x1024.yaml"   # 3d/a100, 1,024 GPUs: inside the measured 384-1,536


def _run(capsys: pytest.CaptureFixture[str], *sets: str) -> dict:
    return cli_json(capsys, "run", GPT3, "--engine", "analytical", "--json", *(a for s in sets for a in ("--set", s)))


def _sigma(interval: dict) -> float:
    """1 sigma (ln units) of a band read off its step-time interval."""
    lo, hi = interval["step_time_s"]
    return math.log(hi / lo) / (2 * Z_80)


@pytest.mark.parametrize(("fault", "kind"), [
    ("faults.slow_gpus=[{rank: 1000, speed: 0.5}]", "slow_gpus"),
    ("faults.stragglers={fraction: 0.1, slowdown: 1.5}", "stragglers"),
    ("faults.slow_links=[{node: 3, nic: 0, speed: 0.25}]", "slow_links"),
])
def test_a_run_with_faults_is_not_validated_and_names_the_fault(capsys, fault: str, kind: str) -> None:
    healthy = _run(capsys)
    faulted = _run(capsys, fault)
    assert healthy["interval"]["validated"] is True and healthy["interval"]["widened_for"] == []
    iv = faulted["interval"]
    assert iv["validated"] is False and iv["regime"] == "3d/a100"
    assert [w for w in iv["widened_for"] if w.startswith(f"faults ({kind}): no measured run has faults")]
    assert _sigma(iv) > _sigma(healthy["interval"])


def test_a_slow_gpu_widens_by_at_least_the_documented_bias(capsys) -> None:
    """The widening (1 sigma) is at least ln(1 + J): J of the paced stage's kernel seconds is at most
    J of the step (J = 0.053 for 1,024 GPUs)."""
    healthy = _run(capsys)
    faulted = _run(capsys, "faults.slow_gpus=[{rank: 1000, speed: 0.5}]")
    n = healthy["interval"]["evidence_runs"]
    grown = math.sqrt(_sigma(faulted["interval"]) ** 2 - _sigma(healthy["interval"]) ** 2)
    widening = grown / math.sqrt(1 + 1 / (n + K_S))
    assert widening >= math.log1p(sync_wait_fraction(1024)) - 1e-9
    why = " ".join(faulted["interval"]["widened_for"])
    assert "J = 5.3%" in why and "docs/perrank.md" in why


@pytest.mark.parametrize("nothing_slow", ["faults={}", "faults.slow_gpus=[{rank: 5, speed: 0.99}]"])
def test_faults_that_slow_nothing_keep_the_healthy_interval(capsys, nothing_slow: str) -> None:
    """``faults: {}`` and a GPU within the healthy spread (speed above 1 / (1 + J)) predict as the
    healthy cluster, and their interval is the healthy one."""
    healthy = _run(capsys)
    same = _run(capsys, nothing_slow)
    assert same["interval"] == healthy["interval"]


def _small(**extra: object) -> dict:
    return {"name": "small", "model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "nodes": 8},
            "parallel": {"tp": 8, "pp": 1, "dp": 8, "global_batch": 64}, **extra}


def test_mixed_gpus_with_faults_name_both() -> None:
    mixed = {**_small(faults={"slow_links": [{"node": 0, "nic": 0, "speed": 0.5}]}),
             "cluster": {"groups": [{"preset": "dgx-a100", "nodes": 2}, {"preset": "dgx-h100", "nodes": 2}],
                         "nodes_per_leaf": 32},
             "parallel": {"tp": 8, "pp": 1, "dp": 4, "micro_batch": 1, "global_batch": 64, "zero_stage": 1}}
    iv = step_interval(scenario_from_dict(mixed))
    assert not iv.validated and iv.why[0].startswith("mixed GPUs (3d/a100, 3d/hopper)")
    assert "3d/a100: faults (slow_links): no measured run has faults" in iv.why
    assert "3d/hopper: faults (slow_links): no measured run has faults" in iv.why


def test_a_calibration_of_healthy_runs_does_not_cover_faults() -> None:
    """A profile fitted on healthy runs ("dense 3D") does not vouch for a faulty GPU: the scenario is
    outside its cover and gets the fault widening, not the calibrated runs' tight band."""
    f = features(scenario_from_dict(_small(faults={"slow_gpus": [{"rank": 3, "speed": 0.5}]})))
    assert f.faults == ("slow_gpus",) and cover_key(f) == "dense 3D + faults"
    regimes, pooled = _stored()
    ev = CalibrationEvidence(runs=3, loo_rel_errors=(0.01, -0.01, 0.0), cover=("dense 3D",), min_gpus=64,
                             max_gpus=64, frameworks=("megatron-core",))
    iv = calibrated_interval(f, ev, regimes.get(f.regime), pooled, frozenset({f.generation}))
    assert not iv.validated
    assert any(w.startswith("faults (slow_gpus)") for w in iv.why)
