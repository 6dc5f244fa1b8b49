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


MAX_FILE_LINES = 600   # small files, one concept each (docs/ARCHITECTURE.md, "Working rules")


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


def _floors() -> str:
    text = (ROOT / ".importlinter").read_text()
    return text.split("[importlinter:contract:floors]", 1)[1].split("[importlinter:contract:", 1)[0]


def test_every_module_sits_on_a_floor_the_docs_name() -> None:
    """Every module and package of clustersim is on a floor of the floors contract (so the contract
    checks its imports), and docs/ARCHITECTURE.md's floors and the README's code map name it."""
    floors = set(re.findall(r"clustersim\.(\w+)", _floors()))
    arch = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    readme = (ROOT / "README.md").read_text()
    tops = sorted(p.stem if p.is_file() else p.name for p in (ROOT / "clustersim").iterdir()
                  if (p.suffix == ".py" and p.stem != "__init__")
                  or (p.is_dir() and any(q.stem != "__init__" for q in p.glob("*.py"))))   # not data/: YAML only
    off = [t for t in tops if t not in floors]
    assert not off, f"on no floor of .importlinter: {off}"
    shown = {t: f"{t}.py" if (ROOT / "clustersim" / f"{t}.py").exists() else f"{t}/" for t in tops}
    unnamed = [s for t, s in shown.items() if s not in arch and t != "__main__"]
    assert not unnamed, f"docs/ARCHITECTURE.md's floors do not name {unnamed}"
    unmapped = [s for t, s in shown.items() if f"`{s}`" not in readme and t != "__main__"]
    assert not unmapped, f"the README's code map does not name {unmapped}"


def test_collectives_import_the_network_never_the_reverse() -> None:
    """The collective model is a floor above the network: no module of clustersim/network imports
    clustersim.collectives (not even inside a function), the floors contract keeps them on two
    lines and the no-circles contract covers both packages."""
    back = [str(p.relative_to(ROOT)) for p in (ROOT / "clustersim" / "network").rglob("*.py")
            if re.search(r"^\s*(from|import) clustersim\.collectives\b", p.read_text(), re.M)]
    assert not back, f"network imports collectives: {back}"
    lines = [line.strip() for line in _floors().splitlines()]
    assert lines.index("clustersim.collectives") < lines.index("clustersim.network"), lines
    circles = (ROOT / ".importlinter").read_text().split("[importlinter:contract:no-circles]", 1)[1]
    assert "clustersim.collectives\n" in circles and "clustersim.network\n" in circles, circles


def test_code_cites_docs_not_issue_numbers() -> None:
    """Source, benchmarks, the validation harness and the tests cite docs/ or say what they mean,
    never an internal issue number (an external one names its project: "Megatron-LM issue 756")."""
    cited = {}
    for folder in ("clustersim", "benchmarks", "validation", "tests"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".sh") and path.is_file():
                for line in path.read_text().splitlines():
                    if re.search(r"(?<![\w-]\s)\bissues? \d", line, re.I) and not re.search(r"\w+/[\w-]+ (GitHub )?issue", line):
                        cited.setdefault(str(path.relative_to(ROOT)), []).append(line.strip())
    assert not cited, cited
