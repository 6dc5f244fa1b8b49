"""A new user's first hour, on a real install: the wheel built from this tree, installed WITHOUT
extras into a fresh virtual environment (pip fetches the core dependencies from the package
index; its cache makes later sessions fast), then the commands a new user types first.

The test suite itself runs from an editable install with every extra, where a missing import, a
data file left out of the wheel or an extra that is not really optional goes unseen; here each
ends as a failure. Every command must end with its documented exit code and a message of the
command line's own, never a Python traceback; each missing extra names the extra to install.
The wheel is built once per session and the commands run side by side.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUBCOMMANDS = ("calibrate", "collective", "compare", "goodput", "import", "list", "run", "serve", "sweep",
               "validate")
TIMEOUT_S = 300


@dataclass(frozen=True)
class Done:
    argv: tuple[str, ...]
    code: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"clustersim {' '.join(self.argv)} -> exit {self.code}\nstdout: {self.out[-1500:]}\nstderr: {self.err[-1500:]}"


def _clean_environ() -> dict[str, str]:
    """This process's environment without what points Python at the checkout or the test venv."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "CLUSTERSIM_"))}


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=_clean_environ())
    if done.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


@pytest.fixture(scope="session")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel of this tree and the core dependencies only."""
    tmp = tmp_path_factory.mktemp("first-hour")
    src = tmp / "src"  # a copy: building in place would leave build/ and *.egg-info in the checkout
    shutil.copytree(ROOT / "clustersim", src / "clustersim", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp / "dist"),
          str(src)])
    (wheel,) = (tmp / "dist").glob("clustersim-*.whl")
    env = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(env)])  # this pip installs into it (no ensurepip)
    _run([sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install", "-q", "--no-compile",
          str(wheel)])
    return env


def _environ(venv: Path) -> dict[str, str]:
    env = _clean_environ()
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    env["COLUMNS"] = "100"
    return env


# What a new user types, each with the exit code it must end in (0 ok, 2 bad input, 1 anything else).
HELP = [("--help",), *((name, "--help") for name in SUBCOMMANDS)]
FIRST_COMMANDS: dict[tuple[str, ...], int] = {
    **{argv: 0 for argv in HELP},
    (): 2,                                                     # a bare `clustersim`: the help, as a usage error
    ("run",): 0,                                               # the embedded default scenario
    ("lst",): 2,                                               # a typo of a command
    ("list", "clusters"): 0,                                   # the shipped hardware profiles are in the wheel
    ("serve",): 2,                                             # without the serve extra
    ("validate",): 2,                                          # without torch (the validation extra)
    ("validate", "--backend", "nccl"): 2,
    ("sweep", "--executor", "dask"): 2,                        # without the dask extra
    ("compare", "--clusters", "dgx-h100", "--executor", "dask"): 2,
    ("sweep", "--out", "all.parquet"): 2,                      # without the parquet extra
}


@pytest.fixture(scope="session")
def first_hour(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, ...], Done]]:
    """Every command of FIRST_COMMANDS run in the venv, side by side, each in an empty folder."""
    env = _environ(venv)
    exe = str(venv / "bin" / "clustersim")
    folders = {argv: tmp_path_factory.mktemp("cwd") for argv in FIRST_COMMANDS}

    def one(argv: tuple[str, ...]) -> Done:
        p = subprocess.run([exe, *argv], capture_output=True, text=True, timeout=TIMEOUT_S, env=env,
                           cwd=folders[argv], stdin=subprocess.DEVNULL)
        return Done(argv, p.returncode, p.stdout, p.stderr)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(FIRST_COMMANDS, pool.map(one, FIRST_COMMANDS), strict=True))
    yield results
    for argv, folder in folders.items():  # a refused command leaves nothing behind
        left = sorted(p.name for p in folder.iterdir())
        assert not left or argv == ("run",), f"clustersim {' '.join(argv)} left {left} in its folder"


def test_the_wheel_installs_no_extra(venv: Path) -> None:
    listed = _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "list",
                   "--format=freeze"]).stdout.lower()
    assert "clustersim==" in listed
    for extra_only in ("torch", "starlette", "uvicorn", "dask", "distributed", "pyarrow", "pytest"):
        assert f"\n{extra_only}==" not in f"\n{listed}", f"{extra_only} is installed without its extra"


@pytest.mark.parametrize("argv", list(FIRST_COMMANDS), ids=lambda a: " ".join(a) or "(bare)")
def test_exit_code_and_no_traceback(first_hour: dict[tuple[str, ...], Done], argv: tuple[str, ...]) -> None:
    done = first_hour[argv]
    assert done.code == FIRST_COMMANDS[argv], str(done)
    assert "Traceback" not in done.out + done.err, str(done)
    if done.code == 2 and argv:
        assert done.err.strip(), str(done)


def test_help_lists_every_subcommand(first_hour: dict[tuple[str, ...], Done]) -> None:
    text = first_hour[("--help",)].out
    for name in SUBCOMMANDS:  # a command whose module did not install would be left out silently
        assert f"\n  {name} " in text, (name, text)
    assert "Usage: clustersim" in first_hour[()].out + first_hour[()].err


def test_run_prints_the_report(first_hour: dict[tuple[str, ...], Done]) -> None:
    out = first_hour[("run",)].out
    assert "step time" in out and "MFU" in out and "memory per GPU" in out


def test_a_typo_names_the_command(first_hour: dict[tuple[str, ...], Done]) -> None:
    assert "No such command 'lst'. Did you mean 'list'?" in first_hour[("lst",)].err


@pytest.mark.parametrize(("argv", "extra"), [
    (("serve",), "serve"), (("validate",), "validation"), (("validate", "--backend", "nccl"), "validation"),
    (("sweep", "--executor", "dask"), "dask"), (("compare", "--clusters", "dgx-h100", "--executor", "dask"), "dask"),
    (("sweep", "--out", "all.parquet"), "parquet"),
])
def test_a_missing_extra_names_it(first_hour: dict[tuple[str, ...], Done], argv: tuple[str, ...], extra: str) -> None:
    err = first_hour[argv].err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, str(first_hour[argv])
    assert f"pip install 'clustersim[{extra}]'" in err, str(first_hour[argv])
    assert "No module named" not in err  # the command line's words, not Python's
