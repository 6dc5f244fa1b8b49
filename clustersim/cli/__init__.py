"""The `clustersim` command. Subcommands live in their own modules and are imported lazily,
so that `clustersim run` never pays for torch or dask.

Exit codes (docs/output.md): 0 ok; 2 bad input; 3 the job does not fit in memory; 1 anything else;
130 interrupted (Ctrl-C; 143 SIGTERM, 129 SIGHUP, stopped alike): one line on stderr says what was kept, never a traceback. The first
Ctrl-C stops the command; further ones are ignored while it cleans up (stops worker processes,
removes temporary files), so that the clean-up itself cannot be cut short.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import os
import signal
import stat
import sys
import threading
from typing import Any

import click

from clustersim.errors import InputError, Interrupted, did_you_mean

_COMMANDS = {
    "run": ("clustersim.cli.run_cmd", "run"),
    "collective": ("clustersim.cli.collective_cmd", "collective"),
    "list": ("clustersim.cli.list_cmd", "list_"),
    "sweep": ("clustersim.cli.sweep_cmd", "sweep"),
    "compare": ("clustersim.cli.compare_cmd", "compare"),
    "validate": ("clustersim.cli.validate_cmd", "validate"),
    "calibrate": ("clustersim.cli.calibrate_cmd", "calibrate"),
    "serve": ("clustersim.cli.serve_cmd", "serve"),
    "import": ("clustersim.cli.import_cmd", "import_"),
    "goodput": ("clustersim.cli.goodput_cmd", "goodput"),
}


class _LazyGroup(click.Group):
    """Imports a subcommand's module only when that subcommand runs (click's lazy-group pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name, (mod, _) in _COMMANDS.items() if importlib.util.find_spec(mod))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _COMMANDS:
            return None
        module_name, attr = _COMMANDS[cmd_name]
        # The imports build long-lived objects only (modules, classes, pydantic schemas): no cycle
        # collection while they run, and afterwards they move to the permanent generation, which
        # later collections skip (Python docs, gc.freeze). Measured on `clustersim run` of the 405B
        # scenario: docs/development.md, "Start-up".
        gc.disable()
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                return None
            raise
        finally:
            gc.freeze()
            gc.enable()
        return getattr(module, attr)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:  # `clustersim lst`: name the command that was meant
            hint = did_you_mean(args[0], _COMMANDS) if args else ""
            if hint:
                exc.message = f"{exc.message} {hint[0].upper()}{hint[1:]}"
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # a command that says nothing about what it kept
            raise Interrupted("") from None


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="clustersim")
def cli() -> None:
    """Predict step time, MFU and memory of distributed training on GPU clusters."""


# SIGTERM (a job scheduler's kill, `timeout`) and SIGHUP (a closed terminal) stop the command as
# Ctrl-C does: the clean-up runs (validate stops its ranks, a sweep its workers), what was measured
# is kept and one line says so; the exit code is 128 + the signal (130 for Ctrl-C, 143 for SIGTERM).
# Left at their defaults, they ended clustersim at once and validate's ranks ran on, orphaned,
# writing into the records a rerun then read.
_STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []


def _first_interrupt(signum: int, frame: Any) -> None:
    for sig in _STOPPING:   # later signals must not cut the clean-up short
        signal.signal(sig, signal.SIG_IGN)
    _received.append(signum)
    raise KeyboardInterrupt


def _interrupted(note: str) -> None:
    click.echo(f"interrupted{': ' + note if note else ''}", err=True)
    sys.exit(128 + (_received[0] if _received else signal.SIGINT))


def main(argv: list[str] | None = None) -> None:
    """Entry point: maps InputError to exit 2 with a one-line message, never a traceback."""
    # only in the main thread (signal.signal's rule), and not over a handler the caller installed
    own: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in _STOPPING:
            before = signal.getsignal(sig)
            if before in (signal.default_int_handler, signal.SIG_DFL):
                own[sig] = before
                signal.signal(sig, _first_interrupt)
    _received.clear()
    try:
        _main(argv)
    finally:
        for sig, before in own.items():
            signal.signal(sig, before)


def _stdout_kind() -> int:
    """st_mode and st_rdev of what stdout is now (0 where it cannot be read)."""
    try:
        st = os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return 0
    return hash((stat.S_IFMT(st.st_mode), st.st_rdev))


def _pipe_closed(before: int) -> bool:
    """Whether rich's broken-pipe handler (Console.on_broken_pipe: stdout pointed at /dev/null, then
    SystemExit(1)) ran: stdout was something else when the command started and is /dev/null now."""
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return before != _stdout_kind() == hash((stat.S_IFMT(null.st_mode), null.st_rdev))


def _main(argv: list[str] | None) -> None:
    stdout_before = _stdout_kind()
    try:
        cli.main(args=argv, standalone_mode=False)
    except Interrupted as exc:
        _interrupted(str(exc))
    except (click.exceptions.Abort, KeyboardInterrupt):
        _interrupted("")
    except click.UsageError as exc:  # unknown option, missing argument, bad choice
        exc.show()
        sys.exit(2)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except InputError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except BrokenPipeError:   # the reader closed stdout (`clustersim run | head -1`): as a shell's SIGPIPE
        _quiet_stdout()
        sys.exit(128 + signal.SIGPIPE)
    except SystemExit as exc:
        if exc.code == 1 and _pipe_closed(stdout_before):   # rich's exit on a closed pipe is no defect
            sys.exit(128 + signal.SIGPIPE)
        raise
    sys.exit(0)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush of a closed pipe stays silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
