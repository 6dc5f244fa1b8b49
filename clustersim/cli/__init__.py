"""The `clustersim` command. Subcommands live in their own modules and are imported lazily,
so that `clustersim run` never pays for torch or dask.

Exit codes (CONTRACT.md §2): 0 ok; 2 bad input; 3 the job does not fit in memory; 1 anything else.
"""

from __future__ import annotations

import importlib
import sys

import click

from clustersim.errors import InputError

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
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                return None
            raise
        return getattr(module, attr)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="clustersim")
def cli() -> None:
    """Predict step time, MFU and memory of distributed training on GPU clusters."""


def main(argv: list[str] | None = None) -> None:
    """Entry point: maps InputError to exit 2 with a one-line message, never a traceback."""
    try:
        cli.main(args=argv, standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.UsageError as exc:  # unknown option, missing argument, bad choice
        exc.show()
        sys.exit(2)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except InputError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except SystemExit:
        raise
    sys.exit(0)
