"""The README's sample output is what `clustersim run` prints today, and the README stays short.

The block under the README's heading "What `clustersim run` prints" is the readable report of the
embedded default scenario. This test runs `clustersim run` as a user does (a subprocess of the
installed entry point, this checkout's code first on PYTHONPATH) with a fixed terminal width
(``COLUMNS=100``, no colour) and compares it with that block, line by line with trailing blanks
dropped. When the report changes on purpose, regenerate the block and review the diff:

    python -m pytest tests/docs --update-readme
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
HEADING = "## What `clustersim run` prints"
FENCE_OPEN, FENCE_CLOSE = "```text", "```"
COLUMNS = "100"
MAX_LINES = 150


def run_output() -> list[str]:
    """``clustersim run`` as a user types it, at a fixed width, trailing blanks dropped."""
    script = shutil.which("clustersim", path=str(Path(sys.executable).parent))
    argv = [script, "run"] if script else [sys.executable, "-m", "clustersim", "run"]
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
               COLUMNS=COLUMNS, LINES="50", NO_COLOR="1", PYTHONIOENCODING="utf-8")
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, encoding="utf-8", timeout=300)
    assert done.returncode == 0, f"`clustersim run` exited {done.returncode}:\n{done.stderr}"
    return [line.rstrip() for line in done.stdout.rstrip("\n").splitlines()]


def block_span(lines: list[str]) -> tuple[int, int]:
    """Indexes of the first and last line inside the fenced block under ``HEADING``."""
    assert HEADING in lines, f"README.md has no heading {HEADING!r}"
    start = lines.index(HEADING)
    try:
        open_at = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == FENCE_OPEN)
        close_at = next(i for i in range(open_at + 1, len(lines)) if lines[i].strip() == FENCE_CLOSE)
    except StopIteration:
        raise AssertionError(f"README.md: no {FENCE_OPEN} ... {FENCE_CLOSE} block under {HEADING!r}") from None
    assert not any(line.startswith("## ") for line in lines[start + 1:open_at]), \
        f"README.md: the {FENCE_OPEN} block must come before the next section after {HEADING!r}"
    return open_at + 1, close_at


def write_block(output: list[str]) -> None:
    lines = README.read_text().splitlines()
    first, end = block_span(lines)
    README.write_text("\n".join(lines[:first] + output + lines[end:]) + "\n")


def test_readme_sample_is_what_clustersim_run_prints(update_readme: bool) -> None:
    output = run_output()
    if update_readme:
        write_block(output)
    lines = README.read_text().splitlines()
    first, end = block_span(lines)
    shown = [line.rstrip() for line in lines[first:end]]
    if shown != output:
        diff = next(i for i in range(max(len(shown), len(output)))
                    if i >= len(shown) or i >= len(output) or shown[i] != output[i])
        got = output[diff] if diff < len(output) else "(nothing)"
        want = shown[diff] if diff < len(shown) else "(nothing)"
        raise AssertionError(
            f"README.md's sample of `clustersim run` (under {HEADING!r}) differs from what it prints now, "
            f"first at line {first + diff + 1} of README.md:\n  README: {want!r}\n  prints: {got!r}\n"
            "If the change is intended, regenerate it and review the diff: "
            "python -m pytest tests/docs --update-readme")


def test_readme_is_at_most_150_lines() -> None:
    n = len(README.read_text().splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines; at most {MAX_LINES}: move details to docs/"
