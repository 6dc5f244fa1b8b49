"""Where one doc points at another part of the project, the thing it points at is there and does
what the doc says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_doc_cites_a_readme_table_the_readme_does_not_have() -> None:
    """The README's "How far to trust it" is a paragraph with no table (the per-regime table is in
    docs/uncertainty.md): a doc that cites "the README's trust table" points at nothing."""
    readme = (ROOT / "README.md").read_text()
    trust = readme.split("## How far to trust it", 1)[1].split("\n## ", 1)[0]
    assert not re.search(r"^\|", trust, re.M), "the README has a trust table again: cite it"
    cited = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if "README's trust table" in p.read_text()]
    assert not cited, cited


def test_the_notebook_modules_docs_sweep_names_attach_the_displays() -> None:
    """docs/sweep.md names the module that attaches a SweepResult's (and a report's) notebook
    display: importing that module alone attaches it."""
    text = " ".join((ROOT / "docs" / "sweep.md").read_text().split())
    sweep = re.search(r"notebook display is attached by `(clustersim[\w.]+)`", text)
    report = re.search(r"a report's, by `(clustersim[\w.]+)`", text)
    assert sweep and report, "docs/sweep.md no longer names the notebook modules"
    code = ("import importlib, sys; from clustersim.sweep.result import SweepResult; "
            "from clustersim.report import StepReport; importlib.import_module(sys.argv[1]); "
            "print(hasattr(SweepResult, '_repr_html_'), hasattr(StepReport, '_repr_html_'))")

    def attaches(module: str) -> list[str]:
        return subprocess.run([sys.executable, "-c", code, module], cwd=ROOT, capture_output=True, text=True,
                              env={"PYTHONPATH": str(ROOT)}, check=True).stdout.split()

    assert attaches(sweep.group(1))[0] == "True", f"{sweep.group(1)} does not attach SweepResult._repr_html_"
    assert attaches(report.group(1))[1] == "True", f"{report.group(1)} does not attach StepReport._repr_html_"
