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
    """.ci/run runs the README's test command, as its last line, and no other check: what a
    developer runs from the README is what CI runs (the lines before it only install the browser
    the browser tests need)."""
    readme = (ROOT / "README.md").read_text()
    commands = [line.split("#")[0].strip() for line in readme.splitlines() if "lint-imports" in line and "pytest" in line]
    assert len(commands) == 1, commands
    command = commands[0]
    assert re.search(r"&& lint-imports && python -m pytest$", command), command
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    code = [line for line in ci if line and not line.startswith("#")]
    assert code[-1] == command, (command, code[-1])
    others = [line for line in code[:-1] if re.search(r"pytest|lint-imports|ruff|pip install", line)]
    assert not others, f".ci/run runs more than the README's test command: {others}"


MAX_FILE_LINES = 600   # issue 26: no file of the house over 600 lines (docs/ARCHITECTURE.md)


def test_no_source_file_over_600_lines() -> None:
    """Small files with one concept each: every source file of the package, the benchmarks and the
    validation harness stays within MAX_FILE_LINES lines."""
    long = {}
    for folder in ("clustersim", "benchmarks", "validation"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".js", ".sh") and path.is_file():
                lines = len(path.read_text().splitlines())
                if lines > MAX_FILE_LINES:
                    long[str(path.relative_to(ROOT))] = lines
    assert not long, f"files over {MAX_FILE_LINES} lines: {long}"
