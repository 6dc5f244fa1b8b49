"""docs/ARCHITECTURE.md says what the code does: its interface sketches name the fields and
parameters the code has, its worked example names every file that decides or reads the rules it
changes, and its table of contracts lists every contract of .importlinter."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCH = (ROOT / "docs" / "ARCHITECTURE.md").read_text()

# where each sketched name lives
SKETCHED = {
    "GroupShape": "clustersim.collectives", "Phase": "clustersim.collectives",
    "CollectivePlan": "clustersim.collectives", "plan_collective": "clustersim.collectives",
    "simulate_collective": "clustersim.collectives",
    "Op": "clustersim.compute.ops", "CommOp": "clustersim.compute.ops", "PassCost": "clustersim.compute.ops",
    "LayerCost": "clustersim.compute.ops", "transformer_layer_cost": "clustersim.compute",
    "embedding_cost": "clustersim.compute", "output_cost": "clustersim.compute",
    "optimizer_step_time_s": "clustersim.compute", "model_flops_per_step": "clustersim.compute",
    "memory_report": "clustersim.memory.report", "layer_saved": "clustersim.memory.saved",
    "Action": "clustersim.parallel.pipeline", "build_schedule": "clustersim.parallel.pipeline",
    "validate_schedule": "clustersim.parallel.pipeline", "max_in_flight": "clustersim.parallel.pipeline",
    "CalibrationEvidence": "clustersim.hardware.spec",
}


def _code(line: str) -> str:
    return line.split("#", 1)[0]


def _sketches() -> list[str]:
    return re.findall(r"```python\n(.*?)```", ARCH, re.S)


def _classes() -> dict[str, list[str]]:
    """Field names of each ``class X:`` of the sketches (the class line and its indented lines)."""
    found: dict[str, list[str]] = {}
    for block in _sketches():
        lines = block.splitlines()
        for i, line in enumerate(lines):
            m = re.match(r"class (\w+):(.*)", line)
            if not m:
                continue
            body = [_code(m.group(2))]
            for nxt in lines[i + 1:]:
                if not nxt.startswith(" "):
                    break
                body.append(_code(nxt))
            found[m.group(1)] = re.findall(r"(?:^|;)\s*(\w+):\s", "\n".join(body), re.M)
    return found


def _defs() -> dict[str, list[str]]:
    found = {}
    for block in _sketches():
        text = "\n".join(_code(line) for line in block.splitlines())
        for name, params in re.findall(r"def (\w+)\((.*?)\)\s*->", text, re.S):
            found[name] = [p.split("=")[0].split(":")[0].strip() for p in params.split(",") if p.strip()]
    return found


def test_interface_sketches_name_the_fields_and_parameters_of_the_code() -> None:
    classes, defs = _classes(), _defs()
    assert {"CalibrationEvidence", "CommOp", "Action", "CollectivePlan"} <= set(classes), sorted(classes)
    assert {"optimizer_step_time_s", "memory_report"} <= set(defs), sorted(defs)
    wrong = {}
    for name, fields in classes.items():
        obj = getattr(importlib.import_module(SKETCHED[name]), name)
        code = [f.name for f in dataclasses.fields(obj)]
        if fields != code:
            wrong[name] = (fields, code)
    for name, params in defs.items():
        code = list(inspect.signature(getattr(importlib.import_module(SKETCHED[name]), name)).parameters)
        if params != code:
            wrong[name] = (params, code)
    assert not wrong, f"docs/ARCHITECTURE.md sketch != code (doc, code): {wrong}"


# the rules a new reduction dtype changes, and the names by which the code calls them
REDUCTION_RULES = re.compile(r"\b(reduce_bytes|grad_held_bytes|reduce_dtypes_allowed)\(|"
                             r"import [^\n]*\bREDUCE_DTYPES\b|\(\*REDUCE_DTYPES\b|\[REDUCE_DTYPES\]")


def test_worked_example_names_every_file_of_the_rules_it_changes() -> None:
    """Followed literally, the worked example (a new reduction dtype) is complete: it names every
    file that defines, checks or calls the reduction's dtype list, bytes or held bytes (the
    held gradients of memory/states.py and plan/optimizer_step.py, the scenario's schema)."""
    start = ARCH.index("## Worked example")
    example = ARCH[start:ARCH.index("\n## ", start + 1)]
    files = sorted(str(p.relative_to(ROOT / "clustersim")) for p in (ROOT / "clustersim").rglob("*.py")
                   if REDUCTION_RULES.search(p.read_text()))
    assert {"compute/dtypes.py", "memory/states.py", "plan/optimizer_step.py", "scenario/sections.py"} <= set(files)
    missing = [f for f in files if f not in example]
    assert not missing, f"the worked example does not name {missing}"


def test_contract_table_lists_every_contract() -> None:
    contracts = re.findall(r"^\[importlinter:contract:([\w-]+)\]", (ROOT / ".importlinter").read_text(), re.M)
    listed = set(re.findall(r"^\| `([\w-]+)`(?:, `([\w-]+)`)? \|", ARCH, re.M))
    named = {name for row in listed for name in row if name}
    assert len(contracts) >= 9 and set(contracts) == named, (contracts, named)
