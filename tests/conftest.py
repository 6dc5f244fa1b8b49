"""Shared fixtures and the --update-golden flag."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str) -> subprocess.CompletedProcess:
    """`python -m clustersim ARGS` in its own process, from the repository root, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "clustersim", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    """`clustersim ARGV` (a --json command) in this process: it must exit 0; its JSON."""
    from clustersim.cli import main
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    out = capsys.readouterr().out
    assert exc.value.code == 0
    return json.loads(out)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="Rewrite tests/golden/*.json from the current code (review the diff!).")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture(autouse=True)
def _profiles_of_one_command():
    """Each test forgets the calibration profiles it registered (``run --profile``, ``calibrate``
    in this process), as a command run in its own process does: a test that ran ``run --profile
    my-h100.yaml`` left ``my-h100`` loadable for the tests after it (clustersim.hardware.load
    ``profiles_restored``)."""
    from clustersim.hardware.load import profiles_restored

    with profiles_restored():
        yield


def preset(name: str):
    """A model preset as a ModelSpec."""
    from clustersim.scenario import model_from_fields
    from clustersim.workload.presets import MODEL_PRESETS

    return model_from_fields(name, MODEL_PRESETS[name])


@pytest.fixture(scope="session")
def a100():
    from clustersim.hardware.load import load_gpu

    return load_gpu("a100-sxm-80gb")


@pytest.fixture(scope="session")
def h100():
    from clustersim.hardware.load import load_gpu

    return load_gpu("h100-sxm-80gb")


# Property tests draw the same examples on every run (CI reproducible; a failure found once is
# found again). Tests still set their own max_examples; explore locally with
# `--hypothesis-seed=N` or HYPOTHESIS_PROFILE=explore.
def _hypothesis_profiles() -> None:
    import os

    from hypothesis import settings

    settings.register_profile("ci", derandomize=True)
    settings.register_profile("explore", derandomize=False)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


_hypothesis_profiles()
