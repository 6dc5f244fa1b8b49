"""The representative subset of the hostile table as a user runs it: ``python -m clustersim`` in a
fresh interpreter (start-up, argument parsing, stderr and the exit code as the shell sees them).
Two at a time: the CI machine has two cores."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile import cases as C
from tests.hostile.harness import LIMIT_S, files_under, finish, start_subprocess

PARALLEL = 2


def _argvs(tmp: Path) -> list[tuple[str, list[str], tuple[int, ...]]]:
    generic = C.make_generic(tmp / "generic")
    good = C.good_files(tmp)
    out = [(f"{slot} <- {name}", C.file_argv(slot, generic[name], tmp, good), C.SLOTS[slot].expect)
           for slot, name in C.SUBPROCESS_FILE_CASES]
    return out + [(a.name, list(a.argv), a.expect) for a in C.ARGS if a.subprocess]


def test_representative_subset_in_subprocesses(tmp_path: Path) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    cases = _argvs(tmp_path)
    before = files_under(tmp_path)
    problems: dict[str, list[str]] = {}
    for i in range(0, len(cases), PARALLEL):
        batch = [(name, start_subprocess(argv, cwd=work), expect) for name, argv, expect in cases[i:i + PARALLEL]]
        for name, (proc, started), expect in batch:
            # two share the CPU, so each is judged on its own limit plus its neighbour's start-up
            found = finish(proc, started).problems(expect, limit_s=LIMIT_S * PARALLEL)
            if found:
                problems[name] = found
    assert not problems, problems
    assert files_under(tmp_path) == before, "a refused command left a file behind"
    assert len(cases) >= 12


@pytest.mark.parametrize("argv", [["run", "--set", "parallel.tp=.nan"], ["collective", "all_reduce", "--size", "lots"]])
def test_one_line_on_stderr(tmp_path: Path, argv: list[str]) -> None:
    """What the user sees: one ``error:`` line naming the field, exit 2, nothing on stdout."""
    outcome = finish(*start_subprocess(argv, cwd=tmp_path))
    assert outcome.code == 2 and not outcome.out
    lines = outcome.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and ("parallel.tp" in lines[0] or "--size" in lines[0])
