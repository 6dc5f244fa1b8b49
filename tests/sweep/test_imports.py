"""What import-linter cannot say about the sweep (docs/sweep.md, "Where the screen and the bounds
live"): its modules import no private name of another module, and keep no module-level memo
keyed by a scenario, a layout or an object's identity (a run's tables live in its SweepMemo)."""

from __future__ import annotations

import ast
from pathlib import Path

import clustersim.sweep

SWEEP = Path(clustersim.sweep.__file__).parent


def _modules() -> list[tuple[str, ast.Module]]:
    return [(p.name, ast.parse(p.read_text(), str(p))) for p in sorted(SWEEP.glob("*.py"))]


def test_no_private_names_across_modules():
    bad = []
    for name, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("clustersim"):
                bad += [f"{name}: from {node.module} import {a.name}" for a in node.names
                        if a.name.startswith("_") and a.name != "__future__"]
    assert not bad


def _is_cache(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr in ("lru_cache", "cache") or \
        isinstance(target, ast.Name) and target.id in ("lru_cache", "cache")


def test_no_module_memo_keyed_by_a_run():
    """Module-level caches in the sweep take integers and strings only (pure schedule tables);
    nothing memoises on ``id()``."""
    run_types = ("Scenario", "ParallelLayout", "Screen", "SweepMemo")
    bad = []
    for name, tree in _modules():
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and any(_is_cache(d) for d in node.decorator_list):
                for arg in node.args.args:
                    if arg.annotation is not None and any(t in ast.unparse(arg.annotation) for t in run_types):
                        bad.append(f"{name}: {node.name}({arg.arg})")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id" \
                    and _keys_a_memo(tree, node):
                bad.append(f"{name}: {ast.unparse(node)}")
    assert not bad


def _keys_a_memo(tree: ast.Module, call: ast.Call) -> bool:
    """Whether ``id(...)`` is used as a key of a dict that outlives the expression (a subscript or
    ``get``/``setdefault`` of an attribute: ``self._x[id(w)]``), not to dedupe in a comprehension."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and node.slice is call and isinstance(node.value, ast.Attribute):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("get", "setdefault") and call in node.args and \
                isinstance(node.func.value, ast.Attribute):
            return True
    return False


def test_the_sweep_imports_no_timing_model_even_by_name():
    """The closed form and the event engine come in as functions (``SweepSpec.evaluators``, filled
    by ``clustersim.api.SWEEP_EVALUATORS``): no sweep module imports the API, the engine or
    per-rank mode, not inside a function and not by a module name in a string (``importlib``),
    which ``lint-imports`` would not see."""
    above = ("clustersim.api", "clustersim.engine", "clustersim.perrank")
    bad = []
    for name, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                mods = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.Name) and node.id == "__import__":
                mods = ["__import__"]
            else:
                continue
            bad += [f"{name}: {m}" for m in mods
                    if m.startswith(above) or m.split(".")[0] in ("importlib", "__import__")]
    assert not bad
