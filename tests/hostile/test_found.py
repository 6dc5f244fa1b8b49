"""Regression tests for what the hostile table and the fuzzers found (docs/hostile-input.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile import cases as C
from tests.hostile.harness import files_under, run_in_process


def test_calibrate_log_the_model_cannot_explain_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """8 ms per iteration for a 7B model on 16 GPUs: the fit is off by hundreds of times. It used to
    write the profile, then refuse to read it back (exit 2 with the file left behind); it is faster
    than the GPUs' peak allows, which is now what the refusal says."""
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "fast.log"
    log.write_text(C.VALUE_FILES["megatron-log"]("8"))
    before = files_under(tmp_path)
    outcome = run_in_process(["calibrate", "--log", str(log), "--cluster", "dgx-h100", "--out", "cal.yaml"])
    assert not outcome.problems((2,)), outcome
    assert "--log" in outcome.err and "MFU 100%" in outcome.err
    assert files_under(tmp_path) == before


@pytest.mark.parametrize(("kind", "slot"), [("megatron-log", "import megatron-log"),
                                            ("torchtitan-log", "import torchtitan-log")])
def test_log_exponents_are_read_whole(tmp_path: Path, kind: str, slot: str) -> None:
    """`1e308` was read as `1` (the exponent dropped); now it is a step time no run has."""
    path = tmp_path / f"{kind}.log"
    path.write_text(C.VALUE_FILES[kind]("1e308"))
    good = C.good_files(tmp_path)
    outcome = run_in_process(C.file_argv(slot, path, tmp_path, good))
    assert not outcome.problems((2,)), outcome
    assert "step time" in outcome.err


def test_profile_number_beyond_any_gpu(tmp_path: Path) -> None:
    path = tmp_path / "evil.yaml"
    path.write_text(C.VALUE_FILES["profile"]("1.0e+308"))
    outcome = run_in_process(["collective", "all_reduce", "--size", "1MiB", "--profile", str(path)])
    assert not outcome.problems((2,)), outcome
    assert "gpus.evil-gpu.peak_TFLOPS.bf16" in outcome.err


@pytest.mark.parametrize("content", [b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)), b"\xff\xfe\x00\x00" * 3])
def test_validate_refuses_hostile_records_before_starting(tmp_path: Path, content: bytes) -> None:
    """validate resumes from OUT/records.jsonl: a binary file there is refused up front (it was
    refused only after importing torch and drawing the progress bar)."""
    (tmp_path / "records.jsonl").write_bytes(content)
    outcome = run_in_process(["validate", "--ci", "--nprocs", "2", "--out", str(tmp_path)])
    assert not outcome.problems((2,), limit_s=2.0), outcome
    assert "records.jsonl" in outcome.err and "validate" not in outcome.err.split("error:")[0]
