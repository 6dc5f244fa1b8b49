"""Constraints on a sweep: ``--fix KEY=VALUE``, ``--max KEY=VALUE`` and ``--set`` on a searched
dimension (docs/sweep.md, "Constraints").

A constraint narrows the ``SearchSpace`` (clustersim.sweep.space), so the enumeration itself
skips what it excludes: the screen never prices an excluded layout and a constrained sweep is
faster. ``--set`` on a searched dimension is a ``--fix``: the sweep varies that field, so
setting it in the template alone would change nothing (it used to be silently ignored).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from clustersim.errors import InputError
from clustersim.parallel.layout import RECOMPUTE, SCHEDULES, ZERO_STAGES
from clustersim.sweep.space import LIMITED, SearchSpace
from clustersim.workload.model_spec import ModelSpec

# the scenario keys of the searched dimensions -> the layout key's field
SEARCHED = {
    "parallel.tp": "tp", "parallel.pp": "pp", "parallel.dp": "dp", "parallel.cp": "cp", "parallel.ep": "ep",
    "parallel.expert_tp": "expert_tp", "parallel.micro_batch": "micro_batch", "parallel.zero_stage": "zero_stage",
    "parallel.recompute": "recompute", "parallel.sequence_parallel": "sequence_parallel",
    "parallel.schedule": "schedule", "parallel.virtual_stages": "virtual_stages",
    "parallel.offload.optimizer": "offload_optimizer",
}
_NAMES = {field: key for key, field in SEARCHED.items()}
_INTEGER = (*LIMITED, "zero_stage")
_BOOLS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


@dataclass(frozen=True, slots=True)
class Constraints:
    """Searched fields held at a value (``fixed``) or bounded above (``maxima``), by layout-key
    field name (``SEARCHED``'s values)."""

    fixed: tuple[tuple[str, object], ...] = ()
    maxima: tuple[tuple[str, int], ...] = ()
    only_validated: bool = False
    # per fixed field, the option that set it ("--set" or "--fix"; absent: "--fix"), for ``named``
    origins: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.fixed or self.maxima or self.only_validated)

    def describe(self) -> str:
        """``cp=1, tp<=8, validated regimes only``."""
        parts = [f"{f}={_show(v)}" for f, v in self.fixed] + [f"{f}<={v}" for f, v in self.maxima]
        return ", ".join(parts + (["validated regimes only"] if self.only_validated else []))

    def named(self) -> tuple[str, object]:
        """The field and value an error about these constraints names (exit 2): one constraint by its
        option and key and its value (``("--set parallel.cp", 3)``: `sweep --set parallel.cp=3` had
        been blamed on ``--fix``, and `compare` on ``--clusters``), several by their options and
        ``describe()`` (``("--set/--max", "cp=3, tp<=8")``)."""
        origin = dict(self.origins)
        items = [(f, v, origin.get(f, "--fix")) for f, v in self.fixed] + [(f, v, "--max") for f, v in self.maxima]
        if len(items) == 1 and not self.only_validated:
            field, value, option = items[0]
            return f"{option} {_NAMES[field]}", value
        options = dict.fromkeys([o for _, _, o in items] + (["--only-validated"] if self.only_validated else []))
        return "/".join(options), self.describe()

    def to_json(self) -> dict[str, object]:
        """``{"fix": {"parallel.cp": 1}, "max": {"parallel.tp": 8}, "only_validated": false}``."""
        return {"fix": {_NAMES[f]: v for f, v in self.fixed}, "max": {_NAMES[f]: v for f, v in self.maxima},
                "only_validated": self.only_validated}

    def allows(self, p: dict[str, object]) -> bool:
        """Whether a layout (``runner.parallel_dict``) satisfies the fixed values and maxima."""
        def value(field: str) -> object:
            if field == "offload_optimizer":
                return isinstance(p.get("offload"), dict)
            if field == "expert_tp":
                return p.get("expert_tp") or p["tp"]
            return p[field]

        return (all(value(f) == v for f, v in self.fixed)
                and all(int(value(f)) <= m for f, m in self.maxima))  # type: ignore[call-overload]

    def apply(self, space: SearchSpace, model: ModelSpec) -> SearchSpace:
        """``space`` narrowed to these constraints (not yet ``only_validated``: that needs the
        scenario, clustersim.sweep.objective.validated_space)."""
        limits = list(space.limits)
        for field, value in self.fixed:
            if field in LIMITED:
                limits.append((field, int(value), int(value)))  # type: ignore[call-overload]
            elif field == "zero_stage":
                space = replace(space, zero_stages=tuple(z for z in space.zero_stages if z == value))
            elif field == "recompute":
                space = replace(space, recompute=(str(value),))
            elif field == "schedule":
                space = replace(space, schedules=(str(value),))
            elif field == "sequence_parallel":
                space = replace(space, sequence_parallel=(bool(value),))
            elif field == "offload_optimizer":
                space = replace(space, offload=(bool(value),))
        for field, most in self.maxima:
            if field == "zero_stage":
                space = replace(space, zero_stages=tuple(z for z in space.zero_stages if z <= most))
            else:
                limits.append((field, 1, most))
        return replace(space, limits=tuple(limits))


def _show(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _field(key: str, option: str, item: str) -> str:
    name = key.strip()
    full = name if name.startswith("parallel.") else f"parallel.{name}"
    if full == "parallel.offload_optimizer":
        full = "parallel.offload.optimizer"
    if full in SEARCHED:
        return SEARCHED[full]
    bare = [k.removeprefix("parallel.") for k in SEARCHED]
    typed = full.removeprefix("parallel.")
    close = [b for b in bare if typed and b.startswith(typed)] or difflib.get_close_matches(typed, bare, n=1,
                                                                                           cutoff=0.5)
    hint = f" (did you mean parallel.{close[0]}?)" if close else ""
    raise InputError(option, item, f"a searched dimension{hint}: {', '.join(SEARCHED)}")


def _value(field: str, text: str, option: str, item: str, model: ModelSpec) -> object:
    raw = text.strip()
    if field in _INTEGER:
        try:
            value = int(raw)
        except ValueError:
            value = -1
        if field == "zero_stage":
            if value not in ZERO_STAGES:
                raise InputError(option, item, f"a ZeRO stage: {', '.join(map(str, ZERO_STAGES))}")
        elif value < 1:
            raise InputError(option, item, f"a positive integer for {_NAMES[field]}")
        if not model.is_moe and field in ("ep", "expert_tp") and (field == "expert_tp" or value != 1):
            raise InputError(option, item, f"{_NAMES[field]} only for MoE models ({model.name} is dense: ep is 1)")
        return value
    if field in ("sequence_parallel", "offload_optimizer"):
        if raw.lower() not in _BOOLS:
            raise InputError(option, item, f"true or false for {_NAMES[field]}")
        value = _BOOLS[raw.lower()]
        # true on a dense model holds every layout at optimizer offload (clustersim.sweep.space.offload_options)
        return value
    # a dense model's sweep searches gpipe / 1f1b / interleaved by itself; fixing the schedule to a
    # zero-bubble or DualPipe one (--fix or --set) searches that one (clustersim.sweep.space.asked_for)
    allowed = RECOMPUTE if field == "recompute" else SCHEDULES
    if raw not in allowed:
        close = difflib.get_close_matches(raw, list(allowed), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        what = "a recompute policy" if field == "recompute" else "a schedule"
        raise InputError(option, item, f"{what}{hint}: {', '.join(allowed)}")
    return raw


def _split(item: str, option: str) -> tuple[str, str]:
    if "=" not in item:
        raise InputError(option, item, "KEY=VALUE with KEY a searched dimension such as parallel.cp=1")
    key, value = item.split("=", 1)
    return key, value


def searched_overrides(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """``--set`` items split into those on a searched dimension (``--fix``es) and the rest."""
    fixes, rest = [], []
    for item in overrides:
        key = item.split("=", 1)[0].strip() if "=" in item else ""
        full = key if key.startswith("parallel.") else ""
        (fixes if full in SEARCHED or full == "parallel.offload_optimizer" else rest).append(item)
    return fixes, rest


def parse_constraints(model: ModelSpec, fix: Sequence[str] = (), maxima: Sequence[str] = (),
                      sets: Sequence[str] = (), only_validated: bool = False) -> Constraints:
    """``--fix``, ``--max`` and the ``--set`` items on searched dimensions (``searched_overrides``):
    InputError (exit 2) naming the option, the item and what is allowed."""
    fixed: dict[str, tuple[object, str, str]] = {}
    for option, items in (("--set", sets), ("--fix", fix)):
        for item in items:
            key, text = _split(item, option)
            field = _field(key, option, item)
            value = _value(field, text, option, item, model)
            if field in fixed and fixed[field][0] != value:
                other = fixed[field]
                raise InputError(option, item, f"one value per dimension: {other[1]} {other[2]} fixes it already")
            fixed[field] = (value, option, item)
    most: dict[str, tuple[int, str]] = {}
    for item in maxima:
        key, text = _split(item, "--max")
        field = _field(key, "--max", item)
        if field not in _INTEGER:
            raise InputError("--max", item, f"an integer dimension: {', '.join(_NAMES[f] for f in _INTEGER)}")
        value = int(_value(field, text, "--max", item, model))  # type: ignore[call-overload]
        most[field] = (min(value, most[field][0]) if field in most else value, item)
    for field, (value, option, item) in fixed.items():
        if field in most and int(value) > most[field][0]:  # type: ignore[call-overload]
            raise InputError(option, item, f"a value within --max {most[field][1]}")
    return Constraints(tuple((f, v[0]) for f, v in fixed.items()), tuple((f, v[0]) for f, v in most.items()),
                       only_validated, tuple((f, v[1]) for f, v in fixed.items()))
