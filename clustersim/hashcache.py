"""Hashes of the big frozen specs, computed once per object.

The cost functions are memoised with ``functools.lru_cache`` on the scenario (``comm_plan``,
``build_step_work``, ``dp_plan`` ...), and a frozen dataclass hashes all of its fields, the
nested specs included, on every call: in a sweep that was about a fifth of the compiled units'
time. ``cache_hash(cls)`` makes the class's generated ``__hash__`` remember its value per object.

The memo is keyed by ``id`` and holds the object itself, so an id cannot be reused while its
entry lives; the oldest entries go first once ``LIMIT`` are held. The values are the generated
hash's own, so every dict and cache orders and finds exactly as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TypeVar

LIMIT = 1 << 16
_MEMO: dict[int, tuple[object, int]] = {}

T = TypeVar("T")


def _remembered(compute: Callable[[object], int]) -> Callable[[object], int]:
    def __hash__(self: object) -> int:
        hit = _MEMO.get(id(self))
        if hit is not None and hit[0] is self:
            return hit[1]
        value = compute(self)
        if len(_MEMO) >= LIMIT:
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # another thread got there first
                del _MEMO[next(iter(_MEMO))]
        _MEMO[id(self)] = (self, value)
        return value

    return __hash__


def cache_hash(cls: type[T]) -> type[T]:
    """Class decorator (outside ``@dataclass(frozen=True)``): memoise its generated hash."""
    cls.__hash__ = _remembered(cls.__hash__)  # type: ignore[assignment,method-assign]
    return cls
