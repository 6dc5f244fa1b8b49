"""Whether two descriptions of a job's model are one model: the file's own and one named beside
it (``--model``, ``--hf-config``, ``--set model.preset``, or a ``--config`` of the job beside a log
that describes its model too). The one check every path calls (docs/calibration.md, "Missing
fields"): a second model replaced the file's without a word, and a log's step time was fitted to
a model it did not run."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from clustersim.errors import InputError


def model_spec(section: dict[str, Any]) -> Any:
    """The ModelSpec a model section describes by itself, resolved as the scenario loader resolves
    it (clustersim.scenario.resolve_model) at one sequence length, under one name (None where it is
    incomplete: no vocabulary, say)."""
    from clustersim.scenario import resolve_model
    try:
        spec = resolve_model({**{k: v for k, v in section.items() if k != "name"}, "seq_len": 4096})
    except (KeyError, TypeError, ValueError, InputError):
        return None
    return replace(spec, name="x", notes=())


def another_model(found: dict[str, Any], named: dict[str, Any]) -> str | None:
    """None where ``named`` is the model ``found`` describes (or ``found`` describes no whole model);
    else what ``found`` is and the fields in which ``named`` differs ("30 layers, hidden 4096, 32
    heads; differs in layers, hidden, ...")."""
    own = {k: v for k, v in found.items() if k not in ("seq_len", "name")}
    other = {k: v for k, v in named.items() if k not in ("seq_len", "name")}
    if not own or own == other:
        return None
    mine = model_spec(own)
    if mine is None:
        return None
    theirs = model_spec(other)
    if theirs is not None and theirs == mine:
        return None
    desc = own.get("preset") or found.get("name") or (f"{own.get('layers')} layers, hidden {own.get('hidden')}, "
                                                      f"{own.get('heads')} heads")
    if theirs is None:
        return str(desc)
    from clustersim.workload.model_spec import scenario_key
    differ = [scenario_key(f.name) for f in fields(mine)
              if f.name != "notes" and getattr(mine, f.name) != getattr(theirs, f.name)]
    return f"{desc}; differs in {', '.join(differ)}"


def refuse_another_model(found: dict[str, Any], named: dict[str, Any], option: str, value: object,
                         allowed: str) -> None:
    """InputError naming ``option`` and ``value`` where ``named`` is another model than ``found``:
    ``allowed`` says what the option is for; the message adds what the file describes and where they differ."""
    differs = another_model(found, named)
    if differs is not None:
        raise InputError(option, value, f"{allowed} ({differs})")
