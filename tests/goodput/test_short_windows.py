"""A goodput window shorter than one step is refused; one so short that the headline (the long-run
expectation) falls outside the run's own Monte-Carlo p10-p90 says so beside it."""

from __future__ import annotations

import pytest

from clustersim.cli import main

S = "scenarios/llama3_405b_h100x16384.yaml"


def _run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["goodput", S, "--engine", "analytical", *args])
    out = capsys.readouterr()
    return int(exc.value.code), out.out, out.err


def test_a_window_shorter_than_one_step_is_refused(capsys) -> None:
    code, _, err = _run(capsys, "--days", "0.00001")   # 0.86 s against an 8 s step
    assert code == 2 and "a run of at least one step" in err


def test_a_headline_outside_its_monte_carlo_range_is_named(capsys) -> None:
    code, out, _ = _run(capsys, "--days", "0.001")
    assert code == 0 and "the headline is the long-run expectation" in out
    code, out, _ = _run(capsys, "--days", "30")
    assert code == 0 and "the headline is the long-run expectation" not in out
