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
        super().__init__(f"{field}: got {value!r}; allowed: {allowed}")

    def __reduce__(self) -> tuple[type, tuple[str, object, str]]:
        # picklable, so that an error raised in a sweep worker process reaches the parent intact
        return (type(self), (self.field, self.value, self.allowed))


class DoesNotFitError(RuntimeError):
    """The job does not fit in GPU memory: exit code 3 (the report is still printed)."""
