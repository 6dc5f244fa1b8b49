"""The command line's own words for a user's slips: "did you mean" for a misspelt name or key,
a tab in YAML named as such, errors that survive a worker process."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from clustersim.cli import main
from clustersim.errors import BudgetError, InputError, did_you_mean
from clustersim.inputs import load_yaml
from clustersim.scenario import apply_overrides, read_scenario_dict, scenario_from_dict


def _error(*overrides: str) -> InputError:
    with pytest.raises(InputError) as exc:
        scenario_from_dict(apply_overrides(read_scenario_dict(None), list(overrides)))
    return exc.value


@pytest.mark.parametrize(("override", "field", "meant"), [
    ("model.preset=llama3-7b", "model.preset", "llama3-8b"),
    ("cluster.preset=dgx-h10", "cluster.preset", "dgx-h100"),
    ("cluster.gpu=h100-sxm", "cluster.gpu", "h100-sxm-80gb"),
    ("cluster.scale_out=ib-nd", "cluster.scale_out", "ib-ndr"),
    ("framework=megatron", "framework", "megatron-core"),
    ("framework=TorchTitan", "framework", "torchtitan"),
    ("parallel.schedule=1f1", "parallel.schedule", "1f1b"),
    ("parallel.recompute=selectve", "parallel.recompute", "selective"),
])
def test_a_misspelt_name_gets_did_you_mean(override: str, field: str, meant: str) -> None:
    err = _error(override)
    assert err.field == field
    typed = override.split("=", 1)[1]
    assert str(err).startswith(f"{field}: got {typed!r} (did you mean ")
    assert repr(meant) in err.hint
    assert "allowed: " in str(err)  # the whole list still follows


@pytest.mark.parametrize(("override", "field", "meant"), [
    ("parallel.tpp=2", "parallel.tpp", "parallel.tp"),
    ("modle.preset=llama3-8b", "modle", "model"),
    ("cluster.gpus_per_nod=4", "cluster.gpus_per_nod", "cluster.gpus_per_node"),
    ("training.dtyp=bf16", "training.dtyp", "training.dtype"),
])
def test_a_misspelt_key_gets_did_you_mean_the_dotted_key(override: str, field: str, meant: str) -> None:
    err = _error(override)
    assert err.field == field
    assert str(err).startswith(f"{field}: got ")  # the format every InputError keeps
    assert f"(did you mean {meant}" in str(err)
    assert "unknown key; allowed keys:" in err.allowed


def test_nothing_close_no_suggestion() -> None:
    err = _error("model.preset=zzzzzz")
    assert err.hint == "" and "did you mean" not in str(err)
    assert did_you_mean("llama3-8b", ["llama3-8b", "llama3-70b"]) == ""  # an allowed value is no typo
    assert did_you_mean("x" * 5000, ["x"]) == ""  # a pasted blob is not compared


def test_the_suggestion_survives_a_worker_process() -> None:
    """A sweep or compare worker raises InputError in another process: pickled and rebuilt whole."""
    for err in (InputError("cluster.preset", "dgx-h10", ["dgx-h100", "dgx-a100"]),
                InputError("parallel.tpp", 2, "unknown key; allowed keys: tp, pp", choices=("tp", "pp"), key="tpp"),
                BudgetError("model.layers", 10**9, "at most 4,096 layers")):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err)
        assert (back.field, back.value, back.allowed, str(back)) == (err.field, err.value, err.allowed, str(err))


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return int(exc.value.code), capsys.readouterr().err


def test_unknown_command_says_which_was_meant(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _main(["lst"], capsys)
    assert code == 2
    assert "No such command 'lst'. Did you mean 'list'?" in err


@pytest.mark.parametrize(("text", "line", "column"), [
    ("name: x\nmodel:\n\tpreset: llama3-8b\n", 3, 1),           # a tab as indentation
    ("name: x\nparallel:\n  tp: 2\n  pp:\t2\n", 4, 6),           # a tab after the colon
    ("name: x\r\nmodel:\r\n  \tpreset: llama3-8b\r\n", 3, 3),   # Windows line ends
])
def test_a_tab_in_yaml_is_named(text: str, line: int, column: int) -> None:
    with pytest.raises(InputError) as exc:
        load_yaml(text, "SCENARIO", "s.yaml")
    assert exc.value.allowed.startswith("well-formed YAML: a tab character")
    assert f"at line {line}, column {column}" in exc.value.allowed


def test_other_yaml_errors_do_not_mention_tabs(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        load_yaml("model: {preset: llama3-8b\n", "SCENARIO", "s.yaml")
    assert "well-formed YAML" in exc.value.allowed and "tab" not in exc.value.allowed


def test_a_tab_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tab.yaml"
    path.write_text("name: x\nmodel:\n\tpreset: llama3-8b\n")
    code, err = _main(["run", str(path)], capsys)
    assert code == 2
    assert err.startswith("error: SCENARIO: ") and "a tab character at line 3, column 1" in err


@pytest.mark.parametrize(("override", "allowed"), [
    ("parallel.tp=abc", "a whole number"), ("parallel.tp=2.5", "a whole number"),
    ("parallel.sequence_parallel=maybe", "true or false"), ("name=[1]", "text"),
    ("model=3", "a mapping (KEY: VALUE) with keys preset, "), ("parallel.offload=x", "a mapping (KEY: VALUE) with keys optimizer, "),
    ("cluster.groups=3", "a list"),
    # a tuple-typed list field said "a valid tuple", pydantic's words
    ("parallel.recompute_modules=foo", "a list, such as [a, b]"),
])
def test_type_errors_in_the_command_lines_words(override: str, allowed: str) -> None:
    """No pydantic text ("Input should be a valid dictionary or instance of ModelSection")."""
    err = _error(override)
    assert err.allowed.startswith(allowed), err.allowed
    assert "Input should" not in str(err) and "Section" not in str(err) and "instance" not in str(err)


@pytest.mark.parametrize("argv", [["run"], ["list", "gpus"]])
def test_a_reader_that_closes_stdout_early_is_no_defect(argv):
    """`clustersim run | head -1` exited 1 ('a defect: please report it', docs/output.md) with nothing
    said: rich's handler of the closed pipe exits 1. It is now 141, as a shell reports SIGPIPE."""
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-m", "clustersim", *argv], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.close()   # the reader is gone before the first line
    _, err = p.communicate(timeout=300)
    assert p.returncode == 141, err
    assert b"Traceback" not in err


def test_a_readme_example_run_outside_a_checkout_says_where_the_scenarios_are(tmp_path, monkeypatch, capsys):
    """An installed user running the README's `clustersim sweep scenarios/...` from another folder
    was told only that the file does not exist."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["sweep", "scenarios/gpt3_175b_a100x1024.yaml"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "ship with the repository" in err and "clone" in err
