"""Errors that the command line turns into exit codes."""

from __future__ import annotations

from collections.abc import Iterable


class InputError(ValueError):
    """Bad user input: exit code 2. The message names the field, the value and what is allowed."""

    def __init__(self, field: str, value: object, allowed: str | Iterable[object]) -> None:
        if not isinstance(allowed, str):
            allowed = ", ".join(str(a) for a in allowed)
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{_short(field)}: got {_short(repr(value))}; allowed: {allowed}")


MAX_SHOWN_CHARS = 300  # a hostile value (a pasted log, a 400-digit number) is shortened in the message


def _short(text: str) -> str:
    if len(text) <= MAX_SHOWN_CHARS:
        return text
    return f"{text[:MAX_SHOWN_CHARS - 60]}...{text[-40:]} ({len(text):,} characters)"

    def __reduce__(self) -> tuple[type, tuple[str, object, str]]:
        # picklable, so that an error raised in a sweep worker process reaches the parent intact
        return (type(self), (self.field, self.value, self.allowed))


class DoesNotFitError(RuntimeError):
    """The job does not fit in GPU memory: exit code 3 (the report is still printed)."""


class BudgetError(InputError):
    """A simulation larger than its budget (clustersim.limits): exit 2 like any bad input. The
    sweep catches it to keep a layout's cheaper estimate instead of failing."""


class Interrupted(Exception):
    """Ctrl-C: the command stopped cleanly. Exit code 130 with one line on stderr saying what was
    kept (``str(exc)``; empty when nothing needs saying)."""
