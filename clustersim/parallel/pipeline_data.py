"""The schedule IR: per pipeline rank, an ordered tuple of :class:`Action`."""

from __future__ import annotations

import re
from dataclasses import dataclass

KINDS = ("F", "B", "W")  # forward; backward (input gradient, and weight gradient unless a W follows); weight gradient

_SHORT = re.compile(r"^(\d+)([FBW])(\d+)(&?)$")


class ScheduleError(ValueError):
    """A schedule that is incomplete, repeats an action, or deadlocks."""


@dataclass(frozen=True, slots=True)
class Action:
    """One pass of one model chunk over one micro-batch on one pipeline rank.

    ``kind`` "B" computes the input gradient, and the weight gradient too unless the rank also
    runs a "W" for the same (chunk, micro-batch) later (zero-bubble split). ``paired``: this action
    and the next one on the rank run as one overlapped pair (DualPipe's forward & backward chunk
    pair, Megatron's EP all-to-all overlap): their computations share the compute stream while
    each one's communication hides behind the other's computation.
    """

    kind: str
    chunk: int
    micro_batch: int
    paired: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Action kind must be one of {KINDS}, got {self.kind!r}")
        if self.chunk < 0 or self.micro_batch < 0:
            raise ValueError(f"Action chunk and micro_batch must be >= 0, got {self.chunk}, {self.micro_batch}")

    def __str__(self) -> str:
        return f"{self.chunk}{self.kind}{self.micro_batch}{'&' if self.paired else ''}"

    @classmethod
    def parse(cls, text: str) -> Action:
        """Inverse of ``str``: ``"1F3"`` -> Action("F", chunk=1, micro_batch=3); a trailing "&"
        marks the first action of an overlapped pair."""
        m = _SHORT.match(text.strip())
        if not m:
            raise ValueError(f"not an action: {text!r} (expected CHUNK KIND MICROBATCH, e.g. 1F3)")
        return cls(kind=m.group(2), chunk=int(m.group(1)), micro_batch=int(m.group(3)), paired=bool(m.group(4)))

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.kind, self.chunk, self.micro_batch)


Schedule = tuple[tuple[Action, ...], ...]
