"""Errors that the command line turns into exit codes."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

MAX_TYPED_CHARS = 100  # longer text is no typo of a name (and difflib's cost grows with its length)


def close_matches(typed: object, choices: Iterable[object], n: int = 3) -> list[str]:
    """The names among ``choices`` closest to what was typed (``difflib.get_close_matches``,
    its default cutoff 0.6, case-insensitive), best first; empty when nothing is close."""
    names = [str(c) for c in choices]
    by_lower: dict[str, str] = {}
    for name in names:
        by_lower.setdefault(name.lower(), name)
    return [by_lower[m] for m in difflib.get_close_matches(str(typed).lower(), list(by_lower), n=n)]


def did_you_mean(typed: object, choices: Iterable[object], prefix: str | None = None) -> str:
    """``"did you mean 'llama3-8b' or 'llama3-70b'?"``, or ``""`` when no choice is close. With
    ``prefix`` (a misspelt key), the suggestions are the dotted keys: ``did you mean parallel.tp?``."""
    if not isinstance(typed, str) or not typed.strip() or len(typed) > MAX_TYPED_CHARS:
        return ""
    names = [str(c) for c in choices]
    if typed in names:
        return ""
    matches = close_matches(typed, names)
    if not matches:
        return ""
    shown = [repr(m) if prefix is None else f"{prefix}{m}" for m in matches]
    return "did you mean " + (" or ".join(shown) if len(shown) < 3 else f"{', '.join(shown[:-1])} or {shown[-1]}") + "?"


class InputError(ValueError):
    """Bad user input: exit code 2. The message names the field, the value and what is allowed.

    ``allowed`` is a sentence or the list of allowed names. With a list (or ``choices``, the
    names behind a sentence), a value that is close to one of them gets a "did you mean" in the
    message; ``key`` is the unknown key a user typed (then the suggestions are dotted keys).
    Every "did you mean" of the command line is built here."""

    def __init__(self, field: str, value: object, allowed: str | Iterable[object], *,
                 choices: Iterable[object] | None = None, key: str | None = None) -> None:
        if not isinstance(allowed, str):
            allowed = list(allowed)
            if choices is None:
                choices = allowed
            allowed = ", ".join(str(a) for a in allowed)
        self.field = field
        self.value = value
        self.allowed = allowed
        self.choices = None if choices is None else tuple(str(c) for c in choices)
        self.key = key
        if key is None:
            self.hint = did_you_mean(value, self.choices or ())
        else:  # "parallel.tpp" -> "did you mean parallel.tp?"
            self.hint = did_you_mean(key, self.choices or (), field[: -len(key)] if field.endswith(key) else "")
        got = _short(_repr(value)) + (f" ({self.hint})" if self.hint else "")
        super().__init__(f"{_short(field)}: got {got}; allowed: {allowed}")

    def with_field(self, field: str) -> InputError:
        """The same error under another field name (a caller that knows which key it came from)."""
        return type(self)(field, self.value, self.allowed, choices=self.choices, key=self.key)

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        # picklable, so that an error raised in a sweep worker process reaches the parent intact
        return (_rebuild, (type(self), self.field, self.value, self.allowed, self.choices, self.key))


def _rebuild(cls: type[InputError], field: str, value: object, allowed: str, choices: tuple[str, ...] | None,
             key: str | None) -> InputError:
    return cls(field, value, allowed, choices=choices, key=key)


MAX_SHOWN_CHARS = 300  # a hostile value (a pasted log, a 400-digit number) is shortened in the message


def _repr(value: object) -> str:
    """``repr(value)``; an integer too long for Python's int-to-text limit (4,300 digits) by its size."""
    try:
        return repr(value)
    except ValueError:
        if isinstance(value, int):
            return f"an integer of {value.bit_length():,} bits"
        raise


def _short(text: str) -> str:
    if len(text) <= MAX_SHOWN_CHARS:
        return text
    return f"{text[:MAX_SHOWN_CHARS - 60]}...{text[-40:]} ({len(text):,} characters)"


class DoesNotFitError(RuntimeError):
    """The job does not fit in GPU memory: exit code 3 (the report is still printed)."""


class BudgetError(InputError):
    """A simulation larger than its budget (clustersim.limits): exit 2 like any bad input. The
    sweep catches it to keep a layout's cheaper estimate instead of failing."""


class Interrupted(Exception):
    """Ctrl-C: the command stopped cleanly. Exit code 130 with one line on stderr saying what was
    kept (``str(exc)``; empty when nothing needs saying)."""
