"""The progress bars of `clustersim sweep` and `clustersim compare`: rich bars on stderr, one per
phase, and nothing at all when disabled (``--no-progress``) or when stderr is not a terminal (a
log file gets no control characters)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

SWEEP_PHASES = {"screen": "screen", "estimate": "closed form", "simulate": "event engine"}

Update = Callable[[str, int, int], None]


@contextmanager
def progress_bar(enabled: bool, labels: Mapping[str, str] = SWEEP_PHASES, unit: str = "layouts",
                 console: Console | None = None) -> Iterator[Update | None]:
    """``update(phase, done, total)``: one bar per phase, labelled ``labels[phase]``; None when
    disabled or not on a terminal."""
    console = console or Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        tasks: dict[str, int] = {}

        def update(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(labels.get(phase, phase), total=total)
            bar.update(tasks[phase], completed=done, total=total)

        yield update
