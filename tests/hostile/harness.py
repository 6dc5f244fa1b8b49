"""Running the real command line on hostile input and judging the outcome.

``run_in_process`` calls ``clustersim.cli.main`` in this interpreter (milliseconds per case, so the
whole table fits in CI); ``run_subprocess`` runs ``python -m clustersim`` as a user would (start-up
included). Both return an ``Outcome``; ``problems`` lists what a hostile case must not do: end
with another exit code, take 10 s or more, show a traceback, print a report to stdout when it
failed, or leave a file behind.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT_S = 10.0          # every hostile case answers within this (docs/hostile-input.md)
RUNAWAY_S = 60          # an in-process case still running after this is stopped (it has failed anyway)


@dataclass(frozen=True)
class Outcome:
    code: int | None
    out: str
    err: str
    seconds: float
    escaped: str = ""   # an exception that left clustersim.cli.main (a traceback for the user)

    @property
    def traceback(self) -> bool:
        return bool(self.escaped) or "Traceback (most recent call last)" in self.err

    def problems(self, expect: Sequence[int], limit_s: float = LIMIT_S) -> list[str]:
        found = []
        if self.code not in expect:
            found.append(f"exit {self.code}, expected {' or '.join(map(str, expect))}")
        if self.seconds >= limit_s:
            found.append(f"took {self.seconds:.1f} s (limit {limit_s:g} s)")
        if self.traceback:
            found.append(f"traceback: {self.escaped or self.err[-600:]}")
        if self.code == 2 and self.out.strip():
            found.append(f"refused input but printed to stdout: {self.out[:200]!r}")
        if self.code == 2 and not self.err.strip():
            found.append("refused input without a message on stderr")
        return found


class _Runaway(BaseException):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _Runaway()


def _fresh_state() -> contextlib.AbstractContextManager[None]:
    """Profiles registered by one case (--profile) must not leak into the next."""
    from clustersim.hardware import load
    return load.profiles_restored()


def run_in_process(argv: Sequence[str]) -> Outcome:
    """``clustersim ARGV`` through ``clustersim.cli.main`` in this process."""
    from clustersim.cli import main
    out, err = io.StringIO(), io.StringIO()
    code: int | None = None
    escaped = ""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(RUNAWAY_S)
    start = time.perf_counter()
    try:
        with _fresh_state(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(argv))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except _Runaway:
                escaped = f"still running after {RUNAWAY_S} s"
            except BaseException as exc:  # noqa: BLE001 - what a user would see as a traceback
                escaped = f"{type(exc).__name__}: {exc}"[:600]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return Outcome(code, out.getvalue(), err.getvalue(), time.perf_counter() - start, escaped)


def run_subprocess(argv: Sequence[str], cwd: Path | None = None, timeout_s: float = RUNAWAY_S) -> Outcome:
    """``python -m clustersim ARGV`` in a fresh interpreter (this checkout's code)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("CLUSTERSIM_PROFILES", None)
    start = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-m", "clustersim", *argv], cwd=cwd or ROOT, env=env,
                           capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        return Outcome(None, str(exc.stdout or ""), str(exc.stderr or ""), time.perf_counter() - start,
                       f"still running after {timeout_s:g} s")
    return Outcome(p.returncode, p.stdout, p.stderr, time.perf_counter() - start)


def start_subprocess(argv: Sequence[str], cwd: Path | None = None) -> tuple[subprocess.Popen[str], float]:
    """Start ``python -m clustersim ARGV`` (for running several at once); see ``finish``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("CLUSTERSIM_PROFILES", None)
    # as from a terminal: Ctrl-C at its default even when this runner was started with SIGINT
    # ignored (a background job of a non-interactive shell, nohup), which the child would inherit
    p = subprocess.Popen([sys.executable, "-m", "clustersim", *argv], cwd=cwd or ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    return p, time.perf_counter()


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def finish(p: subprocess.Popen[str], started: float, timeout_s: float = RUNAWAY_S) -> Outcome:
    try:
        out, err = p.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return Outcome(None, out, err, time.perf_counter() - started, f"still running after {timeout_s:g} s")
    return Outcome(p.returncode, out, err, time.perf_counter() - started)


def files_under(directory: Path) -> set[str]:
    """Every path below ``directory`` (to find what a refused command left behind)."""
    return {str(p.relative_to(directory)) for p in directory.rglob("*")}
