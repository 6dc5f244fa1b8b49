"""Every data file the package reads at run time is shipped by `pip install .`.

A data file missing from `[tool.setuptools.package-data]` works from a checkout
(the tests run from the source tree) and fails only after a real install, so
this checks the globs in pyproject.toml against the files in the package.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "clustersim"


def _globs() -> list[str]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return conf["tool"]["setuptools"]["package-data"]["clustersim"]


def _data_files() -> list[str]:
    out = []
    for p in PKG.rglob("*"):
        if p.is_dir() or "__pycache__" in p.parts or p.suffix in {".py", ".pyc"}:
            continue
        out.append(p.relative_to(PKG).as_posix())
    return sorted(out)


def _shipped(rel: str, globs: list[str]) -> bool:
    # setuptools expands "**" recursively; fnmatch's "*" already crosses "/",
    # so "data/**/*.yaml" also needs to match a file directly under data/.
    return any(fnmatch.fnmatch(rel, g) or fnmatch.fnmatch(rel, g.replace("**/", "")) for g in globs)


def test_every_package_data_file_is_in_package_data():
    globs = _globs()
    files = _data_files()
    assert files, "expected data files under clustersim/"
    missing = [f for f in files if not _shipped(f, globs)]
    assert not missing, f"not installed by `pip install .` (add to package-data): {missing}"


def test_the_check_sees_a_missing_glob():
    assert not _shipped("data/residuals.json", ["data/**/*.yaml", "html/static/*"])
    assert _shipped("data/residuals.json", ["data/*.json"])
