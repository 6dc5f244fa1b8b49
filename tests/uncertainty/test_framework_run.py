"""The framework widening compares what ran, not the label: SC21's ZeRO-3 rows (A100) are
DeepSpeed ZeRO-3 under Megatron-DeepSpeed, recorded as ``framework: megatron-legacy, zero3_impl:
deepspeed``, so a ``framework: deepspeed`` ZeRO-3 job matches them (docs/uncertainty.md,
"Widenings"). Before, it was widened for "framework deepspeed not measured in this regime"."""

from __future__ import annotations

import pytest

from tests.conftest import cli_json

GPT3 = "scenarios/gpt3_175b_a100x1024.yaml"
ZERO3 = ["parallel.tp=1", "parallel.pp=1", "parallel.dp=1024", "parallel.zero_stage=3",
         "parallel.global_batch=2048", "parallel.micro_batch=2"]


def _interval(capsys: pytest.CaptureFixture[str], framework: str, sets: list[str]) -> dict:
    sets = [f"framework={framework}", *sets]
    return cli_json(capsys, "run", GPT3, "--engine", "analytical", "--json",
                    *(a for s in sets for a in ("--set", s)))["interval"]


def test_a_deepspeed_zero3_job_matches_the_measured_deepspeed_zero3_runs(capsys) -> None:
    legacy = _interval(capsys, "megatron-legacy", ZERO3)
    deepspeed = _interval(capsys, "deepspeed", ZERO3)
    assert legacy["regime"] == deepspeed["regime"] == "zero3/a100"
    assert (legacy["validated"], legacy["widened_for"]) == (True, [])
    assert (deepspeed["validated"], deepspeed["widened_for"]) == (True, [])


@pytest.mark.parametrize("framework", ["megatron-core", "torchtitan"])
def test_other_zero3_implementations_still_widen_for_their_framework(capsys, framework: str) -> None:
    iv = _interval(capsys, framework, ZERO3)
    assert not iv["validated"]
    assert f"framework {framework} not measured in this regime" in iv["widened_for"]


def test_megatron_under_torch_fsdp_is_not_deepspeeds_step(capsys) -> None:
    iv = _interval(capsys, "megatron-legacy", [*ZERO3, "parallel.fsdp.version=2"])
    assert "framework megatron-legacy not measured in this regime" in iv["widened_for"]


def test_a_3d_deepspeed_job_still_widens_on_the_3d_regime(capsys) -> None:
    """SC21's 3D rows ran Megatron-LM's own pipeline, not DeepSpeed's: ZeRO-3 matching does not
    carry over to DeepSpeed's ZeRO 0-1 pipeline engine."""
    iv = _interval(capsys, "deepspeed", ["parallel.zero_stage=1"])
    assert iv["regime"] == "3d/a100"
    assert "framework deepspeed not measured in this regime" in iv["widened_for"]
