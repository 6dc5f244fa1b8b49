"""`clustersim calibrate --log` on what a hunt found (fixtures in data/cut_logs, from its reproductions):
a log cut mid-number, Megatron-DeepSpeed's seconds, --set values that contradict the log's job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.validation.test_validation_cli import _run  # the CLI run helper of the calibrate tests

DATA = Path(__file__).parent / "data" / "cut_logs"


def _calibrate(tmp_path, capsys, *argv):
    code, out, err = _run(["calibrate", *argv, "--name", "hunt", "--out", str(tmp_path / "hunt.yaml"), "--json"],
                          capsys)
    return code, (json.loads(out) if code == 0 else None), err


def test_megatron_log_cut_mid_number_leaves_the_cut_line_out(tmp_path, capsys):
    """The last line stops at `elapsed time per iteration (ms): 80` (of 799.x): it was read as 0.08 s
    and averaged into a measured 0.4395 s (compute_scale 1.797); the steady step is 0.8 s."""
    assert not (DATA / "megatron_killed.log").read_text().endswith("\n")
    code, d, err = _calibrate(tmp_path, capsys, "--log", str(DATA / "megatron_killed.log"), "--cluster", "dgx-h100")
    assert code == 0, err
    assert d["runs"][0]["measured_step_time_s"] == pytest.approx(0.7991, abs=1e-3)
    assert any("megatron_killed.log" in n and "no line break" in n for n in d["notes"])


def test_torchtitan_log_cut_mid_number_leaves_the_cut_line_out(tmp_path, capsys):
    """`tps: 5,74` (of 5,740) gave 15.68 s against 2.8 s steady."""
    code, d, err = _calibrate(tmp_path, capsys, "--log", str(DATA / "torchtitan_killed.log"), "--config",
                              str(DATA / "torchtitan_job.toml"))
    assert code == 0, err
    assert d["runs"][0]["measured_step_time_s"] == pytest.approx(2.815, rel=1e-3)
    assert any("torchtitan_killed.log" in n and "no line break" in n for n in d["notes"])


def test_a_cut_field_is_not_a_step_line_even_with_a_line_break(tmp_path):
    """Megatron closes the field with ' |' (training_log): a line cut inside the number is no step."""
    from clustersim.importers.megatron_log import iteration_times
    text = (DATA / "megatron_killed.log").read_text() + "\n"
    assert [it for it, _, _ in iteration_times(text)] == [1, 10]


def test_megatron_deepspeed_seconds_are_read_as_seconds(tmp_path, capsys):
    """bigscience-workshop/Megatron-DeepSpeed megatron/training.py training_log prints
    `elapsed time per iteration (s): {:.2f} |`: refused before (exit 2)."""
    code, d, err = _calibrate(tmp_path, capsys, "--log", str(DATA / "megatron_deepspeed_seconds.log"),
                              "--cluster", "dgx-h100")
    assert code == 0, err
    assert d["runs"][0]["measured_step_time_s"] == pytest.approx(0.81, abs=0.01)


@pytest.mark.parametrize(("sets", "named", "allowed"), [
    (["model.preset=llama3-8b"], "--set model.preset", "the imported file describes its model"),
    (["model.layers=40"], "--set model.layers", "30, the value megatron_96gpu.log states"),
    (["cluster.nodes=24", "parallel.dp=96"], "--set cluster.nodes", "12, or leave --set cluster.nodes out"),
    (["parallel.global_batch=384"], "--set parallel.global_batch", "192, the value megatron_96gpu.log states"),
    (["parallel.dp=96"], "--set parallel.dp", "a layout of the world size 96"),
])
def test_a_set_that_contradicts_the_log_is_refused(sets, named, allowed, tmp_path, capsys):
    """Accepted before: a model neither source describes, compute_scale 0.4654 (24 nodes) and 1.868
    (global batch 384) fitted to the log's 0.8 s."""
    argv = ["--log", str(DATA / "megatron_96gpu.log"), "--cluster", "dgx-h100"]
    for s in sets:
        argv += ["--set", s]
    code, _, err = _calibrate(tmp_path, capsys, *argv)
    assert code == 2
    assert f"error: {named}:" in err and allowed in err


def test_set_tp_is_named_as_the_source_not_the_log(tmp_path, capsys):
    """tp 3 came from --set; the message said 'the value the megatron-log importer read from a.log'. A --set
    that agrees with the log stays allowed (the log states its micro-batch, micro_batch_size 1: a --set of
    another is refused, test_calibrate_cover_hunt.py)."""
    code, _, err = _calibrate(tmp_path, capsys, "--log", str(DATA / "megatron_96gpu.log"), "--cluster", "dgx-h100",
                              "--set", "parallel.tp=2", "--set", "parallel.dp=48", "--set", "cluster.nodes=12",
                              "--set", "parallel.micro_batch=1")
    assert code == 0, err
    code, _, err = _calibrate(tmp_path, capsys, "--log", str(DATA / "megatron_96gpu.log"), "--cluster", "dgx-h100",
                              "--set", "parallel.tp=3")
    assert code == 2 and "--set parallel.tp" in err and "importer read" not in err
    code, _, err = _run(["import", "megatron-log", str(DATA / "megatron_96gpu.log"), "--cluster", "dgx-h100",
                         "--set", "parallel.tp=3"], capsys)
    assert code == 2 and "from --set parallel.tp=3" in err and "importer read" not in err
