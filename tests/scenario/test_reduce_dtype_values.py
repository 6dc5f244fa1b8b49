"""The dtypes a gradient reduction may run in are one list, clustersim.frameworks.REDUCE_DTYPES:
the scenario file's schema takes training.grad_reduce_dtype's values from it (docs/ARCHITECTURE.md,
"Worked example"), so a dtype added there is one the loader's schema accepts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from clustersim.frameworks import REDUCE_DTYPES
from clustersim.scenario.sections import TrainingSection

ROOT = Path(__file__).resolve().parents[2]


def test_schema_accepts_exactly_the_reduce_dtypes() -> None:
    for dtype in REDUCE_DTYPES:
        assert TrainingSection(grad_reduce_dtype=dtype).grad_reduce_dtype == dtype
    with pytest.raises(ValidationError, match="grad_reduce_dtype"):
        TrainingSection(grad_reduce_dtype="fp8")


def test_a_dtype_added_to_reduce_dtypes_reaches_the_schema() -> None:
    code = ("import clustersim.frameworks as f; f.REDUCE_DTYPES = (*f.REDUCE_DTYPES, 'fp8'); "
            "from clustersim.scenario.sections import TrainingSection; "
            "print(TrainingSection(grad_reduce_dtype='fp8').grad_reduce_dtype)")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT)})
    assert run.returncode == 0 and run.stdout.strip() == "fp8", run.stdout + run.stderr
