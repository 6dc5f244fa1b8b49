"""The base of every section of the scenario file (pydantic): unknown keys are errors, instances
are frozen, and a number field refuses true / false.

pydantic's lax mode reads ``true`` as 1 wherever an int is expected (bool is a subclass of int in
Python), so ``layers: true`` or ``--set parallel.tp=true`` ran as 1: a mistake taken as a value.
Strict mode would also refuse what a YAML user writes on purpose (a list where a tuple is kept),
so only this one coercion is refused, for every field whose type does not name bool.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator


def _names(annotation: Any, wanted: tuple[type, ...]) -> bool:
    """Whether ``annotation`` is, or is a union holding, one of ``wanted`` (Any holds every type)."""
    if annotation is Any or annotation in wanted:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return any(type(a) in wanted for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return any(_names(a, wanted) for a in typing.get_args(annotation))
    return False


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False, frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name is not None:
            annotation = cls.model_fields[info.field_name].annotation
            if _names(annotation, (int, float)) and not _names(annotation, (bool,)):
                raise ValueError("a number, not true or false")
        return value
