"""The import contracts of .importlinter hold (the floors, the plan below the engine, no circles),
and CI runs exactly the README's test command, which checks them before the tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_lint_imports_keeps_every_contract() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}   # this checkout's clustersim, not an installed one
    run = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
                          "lint_imports_command()", "--no-cache", "--no-logo", ".importlinter"],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout, run.stdout


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    command = next(line.split("#")[0].strip() for line in readme.splitlines()
                   if "lint-imports" in line and "pytest" in line)
    assert re.search(r"&& lint-imports && python -m pytest$", command), command
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert command in ci, (command, ci)
