"""The notebook API's arguments checked as the command line checks its options: InputError naming
the parameter, never a traceback (ZeroDivisionError for gpus=0, IndexError for no clusters, a
path to `estimate` as AttributeError) and never a value the command refuses (negative prices, top 0)."""

from __future__ import annotations

import math

import pytest

from clustersim import api
from clustersim.errors import InputError

S = "scenarios/llama3_8b_h200x8.yaml"


def test_estimate_and_simulate_take_a_scenario_file_as_sweep_does() -> None:
    assert api.estimate(S).step_time_s == api.estimate(api.load_scenario(S)).step_time_s
    with pytest.raises(InputError) as err:
        api.simulate(5)  # type: ignore[arg-type]
    assert err.value.field == "scenario"


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"gpus": 0}, "gpus"), ({"gpus": "8"}, "gpus"), ({"top": 0}, "top"), ({"top": 2000}, "top"), ({"top": "5"}, "top"),
    ({"rerank": -1}, "rerank"), ({"workers": 0}, "workers"), ({"only_validated": "no"}, "only_validated"),
    ({"fix": 5}, "fix"),
])
def test_sweep_arguments(kwargs, field) -> None:
    with pytest.raises(InputError) as err:
        api.sweep(S, executor="serial", **kwargs)
    assert err.value.field == field


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"clusters": []}, "clusters"), ({"clusters": ["hgx-h200", "hgx-h200"]}, "clusters"),
    ({"clusters": ["dgx-h1000"]}, "clusters"), ({"prices": -1}, "prices"), ({"prices": math.nan}, "prices"),
    ({"prices": {"dgx-h100": 1.0}}, "prices"), ({"prices": "2"}, "prices"), ({"rerank": 0}, "rerank"),
    ({"nodes": 0}, "nodes"),
])
def test_compare_frame_arguments(kwargs, field) -> None:
    args = {"clusters": ["hgx-h200"], **kwargs}
    with pytest.raises(InputError) as err:
        api.compare_frame(S, executor="serial", **args)
    assert err.value.field == field


def test_one_string_is_one_constraint_not_its_characters() -> None:
    """``fix="parallel.cp=1"`` was read character by character ("--fix: got 'p'")."""
    one = api.sweep(S, fix="parallel.cp=1", at_most="parallel.tp=1", top=2, executor="serial").top(2)
    listed = api.sweep(S, fix=["parallel.cp=1"], at_most=["parallel.tp=1"], top=2, executor="serial").top(2)
    assert one == listed and all(r["parallel"]["cp"] == 1 and r["parallel"]["tp"] == 1 for r in one)


def test_an_integer_beyond_the_int_to_text_limit_is_named_by_its_size() -> None:
    with pytest.raises(InputError) as err:
        api.scenario_from_dict({"model": {"preset": "llama3-8b"}, "parallel": {"global_batch": 10**5000}})
    assert "an integer of 16,610 bits" in str(err.value)


def test_a_scenario_changed_in_code_meets_the_layout_rules() -> None:
    """dataclasses.replace(micro_batch=3) under global_batch 64 (dp 4) ran 60 samples a step and
    reported the tokens/s and MFU of 64, 6.7% too high, where the loader refuses the layout."""
    from dataclasses import replace

    from clustersim import api
    from clustersim.errors import InputError
    sc = api.load_scenario(None)
    bad = replace(sc, parallel=replace(sc.parallel, micro_batch=3))
    for call in (api.estimate, api.simulate):
        try:
            call(bad)
        except InputError as exc:
            assert "global_batch" in exc.allowed
        else:
            raise AssertionError(f"{call.__name__} took a layout the loader refuses")


def test_bad_arguments_to_the_public_calls_are_named() -> None:
    """These were bare TypeError / AttributeError / ValueError tracebacks, or (to_json(-1)) a
    negative energy: the API checks its arguments as the command line's options are."""
    import numpy as np
    import pytest

    from clustersim import api
    from clustersim.errors import InputError
    report = api.estimate(None)
    sc = api.load_scenario(None)
    cases = [(lambda: api.report_html(report, scenario=sc), "scenario"), (lambda: api.report_html(None), "report"),
             (lambda: report.to_json("1T"), "tokens"), (lambda: report.to_json(-1), "tokens"),
             (lambda: report.to_json(True), "tokens"), (lambda: api.load_scenario(None, [3]), "overrides"),
             (lambda: api.load_scenario(None, "parallel.tp=2"), "overrides"),
             (lambda: api.estimate(None, cache="x"), "cache")]
    for call, field in cases:
        with pytest.raises(InputError) as err:
            call()
        assert err.value.field == field
    # numpy's integers, as a DataFrame gives them, are whole numbers
    assert api.sweep(None, gpus=np.int64(16), top=np.int64(1), rerank=1).top(1)


def test_the_notebook_view_of_a_job_that_does_not_fit_has_no_critical_path() -> None:
    from clustersim import api
    report = api.estimate(api.load_scenario(None, ["parallel.micro_batch=16", "parallel.recompute=none"]))
    assert not report.memory.fits
    html = report._repr_html_()
    assert "No critical path" in html and ">compute<" not in html


def test_api_sweep_reads_a_file_as_a_template_as_the_command_line(tmp_path) -> None:
    """A file stating dp 8 on 16 GPUs sweeps from the command line (its layout a template) and
    was refused by api.sweep ('tp(1) * pp(1) * cp(1) * dp(8) = 8')."""
    from clustersim import api
    f = tmp_path / "s.yaml"
    f.write_text("model: {preset: llama3-8b}\ncluster: {preset: dgx-h100, nodes: 2}\n"
                 "parallel: {tp: 1, pp: 1, dp: 8, micro_batch: 1, global_batch: 64}\n")
    assert api.sweep(f, top=1, rerank=1, executor="serial").top(1)
