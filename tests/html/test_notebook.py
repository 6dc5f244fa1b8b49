"""docs/notebook.ipynb: its code cells, run as one plain script, work and display richly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.html.conftest import ROOT

NOTEBOOK = ROOT / "docs" / "notebook.ipynb"
# After the notebook's own cells: the objects it displays must have a rich display, and the
# frames must hold what the notebook promises.
CHECKS = """
assert "<table" in report._repr_html_() and "step time" in report._repr_html_()
assert "Layout sweep" in result._repr_html_()
assert (frame["rank"] > 0).any() and {"tp", "pp", "dp", "step_time_s", "peak_bytes_per_gpu"} <= set(frame.columns)
assert sorted(clusters["cluster"]) == ["dgx-h100", "hgx-h200"] and (clusters["cost_usd"] > 0).all()
assert list(clusters["rank"]) == [1, 2]  # compare ranks its rows (by time to train by default)
assert {"best_layout.tp", "layout", "time_to_train_s"} <= set(clusters.columns)
assert Path("llama3_8b_report.html").stat().st_size > 100_000
print("notebook ok")
"""


def notebook_code() -> str:
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), "outputs are stripped"
    return "\n\n".join(cells)


def test_notebook_runs_as_a_script(tmp_path: Path) -> None:
    (tmp_path / "scenarios").symlink_to(ROOT / "scenarios")  # the notebook runs from a checkout's root
    script = tmp_path / "notebook.py"
    script.write_text(notebook_code() + "\n" + CHECKS)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().endswith("notebook ok")
