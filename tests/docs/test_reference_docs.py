"""docs/scenario.md and docs/output.md against the code, so that the references cannot drift.

Conventions the docs keep (and these tests read):

* docs/scenario.md: each section of keys is a ``### `section.path` `` heading (``### Top level``
  for the top level, ``[]`` for the items of a list) followed by a table whose first column holds
  the key in backticks.
* docs/output.md: each command is a ``## `clustersim CMD` `` section whose option table lists
  every option in backticks; each JSON output is a ``### `CMD --json` `` table whose first column
  holds the key as a dotted path (``[]`` for the items of a list); in the ``run --json`` table the
  ``when`` column says ``always`` for the keys of every run.

The commands run in-process, once each, on shipped inputs (about ten seconds in all; a sweep and a
compare on the 8-GPU scenario, serial, under a second each).
"""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import click
import pytest
import yaml
from pydantic import BaseModel

from clustersim.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCENARIO_DOC = ROOT / "docs" / "scenario.md"
OUTPUT_DOC = ROOT / "docs" / "output.md"
MEGATRON_LOG = ROOT / "validation" / "logs" / "megatron_h100" / "gpt_1.7b_48gpu.log"

_KEY_CELL = re.compile(r"^\|\s*`([^`]+)`\s*\|")   # a row whose first cell is one backticked name
_ROW = re.compile(r"^\|\s*`")                       # a row whose first cell starts with one
_CODE = re.compile(r"`([^`]+)`")
_CELL_SEP = re.compile(r"(?<!\\)\|")                # a cell border; `\|` is a pipe inside a cell


# --- reading the docs ------------------------------------------------------------------------

def _section(text: str, heading: str) -> list[str]:
    """The lines under ``heading`` (exact line) up to the next heading of the same or a higher level."""
    lines = text.splitlines()
    assert heading in lines, f"docs/output.md has no heading {heading!r}"
    level = len(heading) - len(heading.lstrip("#"))
    start = lines.index(heading) + 1
    out = []
    for line in lines[start:]:
        hashes = len(line) - len(line.lstrip("#"))
        if line.startswith("#") and hashes <= level:
            break
        out.append(line)
    return out


def _table_rows(lines: list[str]) -> list[list[str]]:
    """Cells of the table rows whose first cell starts with a backticked name."""
    return [[c.strip() for c in _CELL_SEP.split(line.strip().strip("|"))] for line in lines if _ROW.match(line)]


def _scenario_doc_keys() -> set[str]:
    prefix: str | None = None
    keys = set()
    for line in SCENARIO_DOC.read_text().splitlines():
        if line.startswith("## "):
            prefix = None
        elif line.startswith("### "):
            name = _CODE.search(line)
            prefix = "" if line.strip() == "### Top level" else (name.group(1) if name else None)
        elif prefix is not None and (m := _KEY_CELL.match(line)):
            keys.add(f"{prefix}.{m.group(1)}" if prefix else m.group(1))
    return keys


def _json_doc_rows(command: str) -> dict[str, list[str]]:
    """Key -> its table row, of the ``### `COMMAND --json` `` section of docs/output.md."""
    rows = _table_rows(_section(OUTPUT_DOC.read_text(), f"### `{command} --json`"))
    return {_CODE.search(row[0]).group(1): row for row in rows}


def _doc_options(command: str) -> set[str]:
    """Options listed in the option table of the ``## `clustersim COMMAND` `` section."""
    lines = _section(OUTPUT_DOC.read_text(), f"## `clustersim {command}`")
    out = set()
    for row in _table_rows(lines):
        out |= {code.split()[0] for code in _CODE.findall(row[0]) if code.startswith("--")}
    return out


# --- reading the code ------------------------------------------------------------------------

def _submodels(annotation: typing.Any, in_list: bool = False) -> list[tuple[type[BaseModel], bool]]:
    """Section models inside a field's type (through Optional and list), with whether in a list."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, in_list)]
    found = []
    listed = in_list or typing.get_origin(annotation) in (list, tuple)
    for arg in typing.get_args(annotation):
        found += _submodels(arg, listed)
    return found


def _model_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    keys = set()
    for name, field in model.model_fields.items():
        path = prefix + name
        keys.add(path)
        for sub, in_list in _submodels(field.annotation):
            keys |= _model_keys(sub, path + ("[]." if in_list else "."))
    return keys


def _flatten(obj: typing.Any, prefix: str = "") -> set[str]:
    """Dotted paths of every key of a JSON value; a list of objects contributes ``name[].key``."""
    keys = set()
    if isinstance(obj, dict):
        for key, value in obj.items():
            keys.add(prefix + key)
            keys |= _flatten(value, prefix + key + ".")
    elif isinstance(obj, list):
        for item in obj:
            if isinstance(item, dict):
                keys |= _flatten(item, prefix[:-1] + "[].")
    return keys


def _cli_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> typing.Any:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    assert exc.value.code == 0, out.err
    return json.loads(out.out)


def _diff(what: str, code: set[str], doc: set[str]) -> str:
    return (f"{what}: in the code but not in the doc: {sorted(code - doc)}; "
            f"in the doc but not in the code: {sorted(doc - code)}")


# --- the tests -------------------------------------------------------------------------------

def test_scenario_doc_lists_exactly_the_scenario_keys() -> None:
    from clustersim.scenario import ScenarioFile

    code, doc = _model_keys(ScenarioFile), _scenario_doc_keys()
    assert code == doc, _diff("scenario keys (docs/scenario.md)", code, doc)


def test_scenario_doc_example_is_complete_and_valid() -> None:
    from clustersim.scenario import ScenarioFile, scenario_from_dict

    text = SCENARIO_DOC.read_text()
    example = yaml.safe_load(text.split("```yaml\n", 1)[1].split("```", 1)[0])
    assert set(example) == set(ScenarioFile.model_fields), "the example shows every top-level section"
    scenario_from_dict(example)  # raises InputError if the example no longer loads


@pytest.mark.parametrize("scenario", [None, *sorted(p.name for p in (ROOT / "scenarios").glob("*.yaml"))])
def test_run_json_keys_match_output_doc(scenario: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    """The embedded default and every shipped scenario (an MLA model's keys were checked on none)."""
    out = _cli_json(["run", *([str(ROOT / "scenarios" / scenario)] if scenario else []), "--json"], capsys)
    rows = _json_doc_rows("run")
    got, listed = _flatten(out), set(rows)
    always = {key for key, row in rows.items() if row[2] == "always"}
    assert got <= listed, f"keys of run --json that docs/output.md does not list: {sorted(got - listed)}"
    assert always <= got, f"listed as always present, missing from the run: {sorted(always - got)}"


def test_calibrated_run_json_keys_match_output_doc(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A run on a calibrated cluster adds `calibration` (the table omitted it): every key listed."""
    from clustersim.hardware.load import profiles_restored

    profile = tmp_path / "cal.yaml"
    _cli_json(["calibrate", "--log", str(MEGATRON_LOG), "--cluster", "dgx-h100", "--name", "doc-cal", "--out",
               str(profile), "--json"], capsys)
    with profiles_restored():
        out = _cli_json(["run", "--profile", str(profile), "--set", "cluster.preset=doc-cal", "--json"], capsys)
    rows = _json_doc_rows("run")
    got, listed = _flatten(out), set(rows)
    assert "calibration.covered" in got
    assert got <= listed, f"keys of run --json that docs/output.md does not list: {sorted(got - listed)}"
    calibration = {key for key in listed if key.startswith("calibration")}
    assert calibration <= got, f"listed but not in a calibrated run: {sorted(calibration - got)}"


def test_every_command_option_is_documented() -> None:
    import importlib

    from clustersim.cli import _COMMANDS

    for name, (module, attr) in _COMMANDS.items():
        command = getattr(importlib.import_module(module), attr)
        code = {opt for p in command.params if isinstance(p, click.Option)
                for opt in (*p.opts, *p.secondary_opts) if opt.startswith("--")}
        doc = _doc_options(name)
        assert code == doc, _diff(f"options of clustersim {name} (docs/output.md)", code, doc)


def test_collective_json_keys_match_output_doc(capsys: pytest.CaptureFixture[str]) -> None:
    out = _cli_json(["collective", "all_reduce", "--gpus", "16", "--size", "1GiB", "--json"], capsys)
    got, doc = _flatten(out), set(_json_doc_rows("collective"))
    assert got == doc, _diff("collective --json", got, doc)


def test_goodput_json_top_level_keys_match_output_doc(capsys: pytest.CaptureFixture[str]) -> None:
    out = _cli_json(["goodput", "--days", "30", "--engine", "analytical", "--trials", "20", "--json"], capsys)
    got, doc = set(out), set(_json_doc_rows("goodput"))
    assert got == doc, _diff("goodput --json", got, doc)


def _level(keys: typing.Iterable[str], prefix: str = "") -> set[str]:
    """The keys one level under ``prefix`` (``""``: the top level; ``"top[]."``: a list's rows)."""
    return {k for k in keys if k.startswith(prefix) and "." not in k[len(prefix):] and "[" not in k[len(prefix):]}


_SMALL_SWEEP = [str(ROOT / "scenarios" / "llama3_8b_h200x8.yaml"), "--no-progress", "--executor", "serial", "--json"]


def test_sweep_json_keys_match_output_doc(capsys: pytest.CaptureFixture[str]) -> None:
    """Top-level and ``top[]`` keys both ways (``fixed_offload`` was missing from the table)."""
    out = _cli_json(["sweep", *_SMALL_SWEEP, "--top", "2"], capsys)
    doc = set(_json_doc_rows("sweep"))
    assert set(out) == _level(doc), _diff("sweep --json", set(out), _level(doc))
    row = {f"top[].{k}" for r in out["top"] for k in r}
    assert row == _level(doc, "top[]."), _diff("sweep --json top[]", row, _level(doc, "top[]."))


def test_compare_json_keys_match_output_doc(capsys: pytest.CaptureFixture[str]) -> None:
    """Top-level and ``rows[]`` keys both ways (``rows[].fixed_offload`` was missing from the table)."""
    out = _cli_json(["compare", *_SMALL_SWEEP, "--clusters", "dgx-h100", "--gpus", "8", "--tokens", "1B"], capsys)
    doc = set(_json_doc_rows("compare"))
    assert set(out) == _level(doc), _diff("compare --json", set(out), _level(doc))
    row = {f"rows[].{k}" for r in out["rows"] for k in r}
    assert row == _level(doc, "rows[]."), _diff("compare --json rows[]", row, _level(doc, "rows[]."))


def test_import_json_keys_match_output_doc(capsys: pytest.CaptureFixture[str]) -> None:
    out = _cli_json(["import", "megatron-log", str(MEGATRON_LOG), "--cluster", "dgx-h100", "--json"], capsys)
    got = {k for k in _flatten(out) if not k.startswith("scenario.")}  # the scenario: docs/scenario.md
    doc = set(_json_doc_rows("import"))
    assert got == doc, _diff("import --json (a log)", got, doc)


@pytest.mark.parametrize("split", [["--set", "parallel.first_stage_layers=6", "--set", "parallel.last_stage_layers=6"],
                                   ["--set", "parallel.layers_per_stage=[6,10,10,6]"]])
def test_split_run_json_keys_match_output_doc(split: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """A run with a pipeline split adds `parallel.layers_per_stage` (docs/parallel.md promises it): listed."""
    out = _cli_json(["run", "--set", "model.preset=llama3-8b", "--set", "cluster.nodes=4", "--set", "parallel.tp=2",
                     "--set", "parallel.pp=4", "--set", "parallel.dp=4", *split, "--json"], capsys)
    assert out["parallel"]["layers_per_stage"] == [6, 10, 10, 6]
    got, listed = _flatten(out), set(_json_doc_rows("run"))
    assert got <= listed, f"keys of run --json that docs/output.md does not list: {sorted(got - listed)}"
