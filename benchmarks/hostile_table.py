"""Every hostile-input case with its exit code and wall time (the table in docs/hostile-input.md).

    python benchmarks/hostile_table.py            # in-process (clustersim.cli.main), every case
    python benchmarks/hostile_table.py --subprocess   # also the representative subset as `python -m clustersim`

The cases are tests/hostile/cases.py (the tests judge them; this prints them). Times include
reading and refusing the input, not interpreter start-up (in-process) or include it (subprocess).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.hostile import cases as C  # noqa: E402
from tests.hostile.harness import run_in_process, run_subprocess  # noqa: E402


def _row(name: str, outcome, expect: tuple[int, ...]) -> str:
    problems = outcome.problems(expect)
    verdict = "ok" if not problems else "; ".join(problems)[:80]
    message = (outcome.err.strip().splitlines() or [""])[-1][:90].replace("|", "\\|").replace("`", "'")
    return f"| {name} | {outcome.code} | {outcome.seconds:.2f} | {verdict} | {message} |"


def main() -> None:
    subprocesses = "--subprocess" in sys.argv
    tmp = Path(tempfile.mkdtemp(prefix="clustersim-hostile-"))
    work = tmp / "cwd"
    work.mkdir()
    os.chdir(work)
    generic = C.make_generic(tmp / "generic")
    good = C.good_files(tmp)
    print("| case | exit | seconds | verdict | last line of stderr |")
    print("|---|---|---|---|---|")
    rows = bad = 0
    worst = 0.0
    for slot, name in C.file_cases():
        o = run_in_process(C.file_argv(slot, generic[name], tmp, good))
        print(_row(f"{slot} <- {name}", o, C.SLOTS[slot].expect))
        rows, bad, worst = rows + 1, bad + bool(o.problems(C.SLOTS[slot].expect)), max(worst, o.seconds)
    for slot, number in C.number_cases():
        path = C.value_file(tmp, C.SLOTS[slot].kind, number)
        o = run_in_process(C.file_argv(slot, path, tmp, good))
        print(_row(f"{slot} <- {C.SLOTS[slot].kind} with {number}", o, C.SLOTS[slot].expect))
        rows, bad, worst = rows + 1, bad + bool(o.problems(C.SLOTS[slot].expect)), max(worst, o.seconds)
    for case in C.ARGS:
        o = run_in_process(case.argv)
        print(_row(case.name, o, case.expect))
        rows, bad, worst = rows + 1, bad + bool(o.problems(case.expect)), max(worst, o.seconds)
    if subprocesses:
        for slot, name in C.SUBPROCESS_FILE_CASES:
            o = run_subprocess(C.file_argv(slot, generic[name], tmp, good), cwd=work)
            print(_row(f"(subprocess) {slot} <- {name}", o, C.SLOTS[slot].expect))
            rows, bad, worst = rows + 1, bad + bool(o.problems(C.SLOTS[slot].expect)), max(worst, o.seconds)
        for case in C.ARGS:
            if case.subprocess:
                o = run_subprocess(case.argv, cwd=work)
                print(_row(f"(subprocess) {case.name}", o, case.expect))
                rows, bad, worst = rows + 1, bad + bool(o.problems(case.expect)), max(worst, o.seconds)
    print(f"\n{rows} cases, {bad} with a problem, slowest {worst:.2f} s")


if __name__ == "__main__":
    main()
