"""The base of every section of the scenario file (pydantic): unknown keys are errors, instances
are frozen, a number field refuses true / false and quoted numbers, a flag refuses anything but
true / false.

pydantic's lax mode reads ``true`` as 1 wherever an int is expected (bool is a subclass of int in
Python), so ``layers: true`` or ``--set parallel.tp=true`` ran as 1: a mistake taken as a value.
Strict mode would also refuse what a YAML user writes on purpose (a list where a tuple is kept),
so only these coercions are refused: a bool for a number, a string for a number ("2"), and a
string or number for a flag ("y", "on", 1), each where the field's type does not name the other.
"""

from __future__ import annotations

import re
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


def _list_of(annotation: Any, wanted: tuple[type, ...]) -> bool:
    """Whether ``annotation`` is, or is a union holding, a list or tuple of one of ``wanted``."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_list_of(a, wanted) for a in typing.get_args(annotation))
    if origin in (list, tuple):
        return any(_names(a, wanted) and not _names(a, (bool,)) for a in typing.get_args(annotation) if a is not ...)
    return False


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def yaml_float(text: str) -> str | None:
    """``text`` in exponent notation as YAML 1.1 reads it as a number (``1e400`` -> ``1.0e+400``,
    ``6.4e1`` -> ``6.4e+1``), or None when ``text`` is not in exponent notation."""
    m = re.fullmatch(r"\s*([+-]?)(\d+\.?\d*|\.\d+)[eE]([+-]?)(\d+)\s*", text)
    if m is None:
        return None
    sign, mantissa, exp_sign, exponent = m.groups()
    if "." not in mantissa:
        mantissa += ".0"
    elif mantissa.startswith("."):
        mantissa = "0" + mantissa
    return f"{sign}{mantissa}e{exp_sign or '+'}{exponent}"


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False, frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name is None:
            return value
        annotation = cls.model_fields[info.field_name].annotation
        if isinstance(value, bool):
            if _names(annotation, (int, float)) and not _names(annotation, (bool,)):
                raise ValueError("a number, not true or false")
        elif isinstance(value, (list, tuple)) and any(isinstance(v, bool) for v in value) \
                and _list_of(annotation, (int, float)):
            # a list of counts (parallel.layers_per_stage) read true as 1
            raise ValueError("numbers, not true or false")
        elif isinstance(value, (str, int, float)) and annotation is not Any and _names(annotation, (bool,)) \
                and not _names(annotation, (str, int, float)):
            # lax mode reads "y", "on", "1" and 1 as true: a flag is true or false
            raise ValueError("true or false")
        elif isinstance(value, str) and _names(annotation, (int, float)) and not _names(annotation, (str,)) \
                and _numeric(value):
            # lax mode reads "2" as 2: a quoted number is a mistake taken as a value (other text
            # gets pydantic's own message: "a whole number" ...)
            written = yaml_float(value)
            if written is not None:
                # YAML 1.1 (PyYAML) reads exponent notation as a number only with a dot in the mantissa
                # and a sign in the exponent (6.4e1 and 1e+4 are text)
                raise ValueError(f"a number, not a string: YAML reads {value.strip()} as text; write "
                                 f"{written} or the plain number")
            raise ValueError("a number, not a string")
        return value
