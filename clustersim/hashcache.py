"""Hashes of the big frozen specs, computed once per object and kept in the object.

The pure cost functions are memoised with ``functools.lru_cache`` on the scenario (``comm_plan``,
``build_step_work``, ``dp_plan`` ...), and a frozen dataclass hashes all of its fields, the
nested specs included, on every call: in a sweep that was about a fifth of the compiled units'
time. A spec class that derives from ``HashMemo`` and is decorated with ``cache_hash`` computes
its generated hash once and keeps it in a slot of its own (not a dataclass field: equality,
``replace``, ``fields`` and pickling do not see it, so a copy sent to a worker process hashes
anew with that process's string hashing). The values are the generated hash's own, so every
dict and cache orders and finds exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class HashMemo:
    """Base of a frozen spec whose hash ``cache_hash`` keeps: one slot for it."""

    __slots__ = ("_hash_memo",)


def _remembered(compute: Callable[[object], int]) -> Callable[[object], int]:
    def __hash__(self: object) -> int:
        try:
            return self._hash_memo  # type: ignore[attr-defined]
        except AttributeError:
            value = compute(self)
            object.__setattr__(self, "_hash_memo", value)  # the dataclass is frozen; the slot is ours
            return value

    return __hash__


def cache_hash(cls: type[T]) -> type[T]:
    """Class decorator (outside ``@dataclass(frozen=True, slots=True)``, on a ``HashMemo``
    subclass): compute the generated hash once per object."""
    if not issubclass(cls, HashMemo):
        raise TypeError(f"{cls.__name__}: cache_hash needs a HashMemo subclass (a slot for the hash)")
    cls.__hash__ = _remembered(cls.__hash__)  # type: ignore[assignment,method-assign]
    return cls
