"""Every link and every path the README and docs/ name points at something that exists.

Checked in README.md and docs/*.md:

* relative Markdown links ``[text](target)`` (web links and pure ``#anchor`` links aside): the
  target exists relative to the file that links it; an ``#anchor`` into a Markdown file names one
  of its headings (GitHub's heading ids);
* ``docs/...`` mentioned in the text, from the repository root;
* repository paths in the text (``clustersim/...``, ``tests/...``, ``benchmarks/...``,
  ``validation/...``, ``scenarios/...``, ``hardware_profiles/...``) and paths inside the package
  written from a subpackage (``engine/event.py``, ``plan/zero3.py``);
* dotted module names (``clustersim.plan.zero3.zero3_plan``, or in backticks from a subpackage:
  ``plan.zero3.zero3_plan``): a module that exists, followed by at most one name that the module
  defines or imports.

Paths in other projects' repositories (``megatron/core/...``) are not checked; the few that look
like ours, and the files a GPU run will write, are listed in ``NOT_HERE`` with the reason. A path
broken over two lines of a paragraph (``tests/`` at one line's end) reads as two words: keep paths
on one line.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PACKAGE = ROOT / "clustersim"
SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
TOP_DIRS = ("clustersim", "tests", "benchmarks", "validation", "scenarios", "hardware_profiles")

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~)")
_DOCS_MENTION = re.compile(r"(?<![\w/.-])docs/[\w./*-]*[\w*/]")
_REPO_PATH = re.compile(r"(?<![\w/.-])((?:%s)/[\w./*-]*\.[A-Za-z]+)(?![\w/])" % "|".join(TOP_DIRS))
_SUB_PATH = re.compile(r"(?<![\w/.-])((?:%s)/[\w/]*\w\.py)\b" % "|".join(SUBPACKAGES))
_DOTTED = re.compile(r"(?<![\w.])clustersim(?:\.\w+)+")
# subpackages whose names are no scenario section or JSON key (`parallel.tp`, `memory.fits` are)
_SHORT = ("engine", "plan", "sweep", "perrank", "uncertainty", "collectives", "network", "compute",
          "hardware", "workload", "html", "serve", "cli", "calibrate", "importers")
_DOTTED_SHORT = re.compile(r"`((?:%s)(?:\.\w+)+)" % "|".join(_SHORT))

# Paths named in the docs that are not in this repository, each with the reason.
NOT_HERE = {
    "docs/performance.md": "torchtitan's repository (its published runs, docs/memory.md)",
    "benchmarks/llama3_h100_202412_torchtitan.md": "torchtitan's repository (its published runs)",
    "docs/performance-summary-archive.md": "Megatron-Bridge's repository (docs/moe.md)",
    "docs/validation/gpus-*": "written by validation/gpu_check.sh on a GPU machine (docs/validation.md)",
    "docs/validation/gpus-quick.json": "written by validation/gpu_check.sh on a GPU machine",
    "docs/validation/gpus-memory.json": "written by validation/gpu_check.sh on a GPU machine",
    "docs/validation/calibrated-gpus.yaml": "written by validation/gpu_check.sh on a GPU machine",
    "docs/validation/gpus-quick.png": "written by validation/gpu_check.sh on a GPU machine",
    "docs/validation/gpus-env.txt": "written by validation/gpu_check.sh on a GPU machine",
}


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _lines(page: Path) -> list[tuple[int, str]]:
    return list(enumerate(page.read_text().splitlines(), 1))


def _anchors(page: Path) -> set[str]:
    """GitHub's ids of the headings of ``page``: lower case, punctuation dropped, spaces to hyphens,
    a repeated id numbered ``-1``, ``-2``, ..."""
    seen: dict[str, int] = {}
    out = set()
    in_code = False
    for _, line in _lines(page):
        if _FENCE.match(line):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _exists(path: str, base: Path = ROOT) -> bool:
    return bool(glob.glob(str(base / path))) if "*" in path else (base / path).exists()


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_relative_links_point_at_files(page: Path) -> None:
    broken = []
    for n, line in _lines(page):
        for target in _LINK.findall(line):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{_rel(page)}:{n}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{_rel(page)}:{n}: {target} (no heading #{anchor} in {dest.name})")
    assert not broken, "links to nothing:\n" + "\n".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_named_paths_exist(page: Path) -> None:
    missing = []
    for n, line in _lines(page):
        for path in _DOCS_MENTION.findall(line) + _REPO_PATH.findall(line):
            if path.rstrip(".") not in NOT_HERE and not _exists(path.rstrip(".")):
                missing.append(f"{_rel(page)}:{n}: {path}")
        for path in _SUB_PATH.findall(line):
            if not _exists(path, PACKAGE):
                missing.append(f"{_rel(page)}:{n}: {path} (as clustersim/{path})")
    assert not missing, "paths that do not exist (moved? renamed?):\n" + "\n".join(missing)


def _module_file(parts: list[str]) -> Path | None:
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_named_modules_exist(page: Path) -> None:
    missing = []
    for n, line in _lines(page):
        for name in _DOTTED.findall(line) + ["clustersim." + n for n in _DOTTED_SHORT.findall(line)]:
            parts = name.split(".")
            k = next((k for k in range(len(parts), 0, -1) if _module_file(parts[:k])), 0)
            rest = parts[k:]
            source = _module_file(parts[:k]).read_text() if k else ""
            if len(rest) > 1 or (rest and not re.search(rf"\b{re.escape(rest[0])}\b", source)):
                missing.append(f"{_rel(page)}:{n}: {name}")
    assert not missing, "module names that do not resolve (moved? renamed?):\n" + "\n".join(missing)
