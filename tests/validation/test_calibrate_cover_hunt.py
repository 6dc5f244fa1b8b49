"""`clustersim calibrate` and the runs on its profile, on what a hunt of the calibration path found:
a band whose low end went past the GPUs' peak, configs and --set values that contradict the log,
messages naming options calibrate does not have, logs of one name (docs/calibration.md,
docs/uncertainty.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from clustersim.report import step_at_peak_s
from clustersim.scenario import read_scenario_dict, scenario_from_dict
from tests.validation.test_validation_cli import _run  # the CLI run helper of the calibrate tests

DATA = Path(__file__).parent / "data" / "cut_logs"
LOG = DATA / "megatron_96gpu.log"


@pytest.fixture(scope="module")
def job71(tmp_path_factory) -> Path:
    from clustersim.cli import main
    out = tmp_path_factory.mktemp("job") / "job71.yaml"
    with pytest.raises(SystemExit) as exc:
        main(["import", "megatron-log", str(LOG), "--cluster", "dgx-h100", "--out", str(out)])
    assert exc.value.code == 0
    return out


def test_the_low_end_stops_at_the_floor_calibrate_refuses_below(job71, tmp_path, capsys):
    """Calibrated on a run 9 s long (the fit stops at the edge of its range and the band widens x5 to
    hold it), `run` printed MFU 4.2-110.6% (step low 0.3408 s) while calibrate refuses a measured
    0.2 s as faster than the model's FLOPs at the dense peak (0.3769 s). The low end now stops at
    that floor (report.step_at_peak_s)."""
    code, _, err = _run(["calibrate", "--run", f"{job71}=0.2", "--name", "fast", "--out", str(tmp_path / "f.yaml")],
                        capsys)
    assert code == 2 and "at the dense" in err
    profile = tmp_path / "e9.yaml"
    code, _, err = _run(["calibrate", "--run", f"{job71}=9", "--name", "e9", "--out", str(profile)], capsys)
    assert code == 0, err
    code, out, err = _run(["run", str(job71), "--profile", str(profile), "--set", "cluster.preset=e9", "--json"],
                          capsys)
    assert code == 0, err
    d = json.loads(out)
    floor_s = step_at_peak_s(scenario_from_dict(read_scenario_dict(str(job71))))
    assert d["interval"]["step_time_s"][0] == pytest.approx(floor_s, rel=1e-9)
    assert d["interval"]["mfu"][1] == pytest.approx(1.0, rel=1e-9)
    assert d["interval"]["step_time_s"][1] >= 9.0                     # still holds the run it was fitted to


ROOT = Path(__file__).resolve().parents[2]
TT = ROOT / "validation" / "logs" / "torchtitan_h100" / "llama3_8b_fsdp_8gpu"


def _calibrate(tmp_path, capsys, *argv):
    return _run(["calibrate", *argv, "--name", "hunt", "--out", str(tmp_path / "hunt.yaml")], capsys)


def _config(tmp_path, **par) -> Path:
    p = tmp_path / "job.yaml"
    layout = {"tp": 2, "pp": 1, "micro_batch": 1, "global_batch": 192, "zero_stage": 1, **par}
    p.write_text(yaml.safe_dump({"model": {"preset": "llama3-8b", "seq_len": 4096},
                                 "cluster": {"preset": "dgx-h100", "nodes": 12}, "parallel": layout,
                                 "training": {"dtype": "bf16"}}))
    return p


def test_a_config_without_dp_is_checked_against_the_world_size(job71, tmp_path, capsys):
    """A 24-node config that does not state dp (192 GPUs) was fitted to the 96-GPU log (rc 0): its
    GPU count is now the one the loader resolves."""
    data = yaml.safe_load(job71.read_text())
    del data["parallel"]["dp"]
    cfg = tmp_path / "job192.yaml"
    cfg.write_text(yaml.safe_dump({**data, "cluster": {"preset": "dgx-h100", "nodes": 24}}))
    code, _, err = _calibrate(tmp_path, capsys, "--log", str(LOG), "--config", str(cfg), "--cluster", "dgx-h100")
    assert code == 2 and "error: --config:" in err and "world size 96" in err and "runs 192 GPUs" in err, err
    cfg.write_text(yaml.safe_dump({**data, "cluster": {"preset": "dgx-h100", "nodes": 12}}))
    code, _, err = _calibrate(tmp_path, capsys, "--log", str(LOG), "--config", str(cfg), "--cluster", "dgx-h100")
    assert code == 0, err


def test_a_config_of_another_model_is_refused_as_set_model_preset_is(tmp_path, capsys):
    """A llama3-8b config beside the 7.1B GPT log was fitted silently; `--set model.preset=llama3-8b`
    on the same log was exit 2 listing the fields that differ: both now take that one check."""
    cfg = _config(tmp_path, dp=48)
    code, _, err = _calibrate(tmp_path, capsys, "--log", str(LOG), "--config", str(cfg), "--cluster", "dgx-h100")
    assert code == 2 and "error: --config:" in err and "differs in model.layers" in err, err
    code, _, err2 = _calibrate(tmp_path, capsys, "--log", str(LOG), "--cluster", "dgx-h100",
                               "--set", "model.preset=llama3-8b")
    assert code == 2 and "error: --set model.preset:" in err2
    assert err.split("differs in ")[1].split(")")[0] == err2.split("differs in ")[1].split(")")[0]


def test_a_torchtitan_config_of_another_flavor_is_refused(tmp_path, capsys):
    """The 8B log with the config's flavor edited to 70B: rc 0 before."""
    toml = tmp_path / "x.toml"
    toml.write_text(TT.with_suffix(".toml").read_text().replace('flavor = "8B"', 'flavor = "70B"'))
    assert 'flavor = "70B"' in toml.read_text()
    code, _, err = _calibrate(tmp_path, capsys, "--log", str(TT.with_suffix(".log")), "--config", str(toml))
    assert code == 2 and "error: --config: got 'x.toml'" in err and "differs in model.layers" in err, err
    code, _, err = _calibrate(tmp_path, capsys, "--log", str(TT.with_suffix(".log")), "--config",
                              str(TT.with_suffix(".toml")))
    assert code == 0, err


@pytest.mark.parametrize(("item", "field"), [
    ("parallel.micro_batch=2", "parallel.micro_batch"), ("parallel.recompute=full", "parallel.recompute"),
    ("parallel.zero_stage=0", "parallel.zero_stage"), ("training.dtype=fp16", "training.dtype"),
    ("parallel.sequence_parallel=false", "parallel.sequence_parallel"),
])
def test_a_set_of_any_field_the_log_states_is_refused(item, field, tmp_path, capsys):
    """docs/calibration.md: a --set that changes what the log states is exit 2; only the model, the
    global batch and the world size were checked, the rest fitted silently."""
    code, _, err = _calibrate(tmp_path, capsys, "--log", str(LOG), "--cluster", "dgx-h100", "--set", item)
    assert code == 2 and f"error: --set {field}:" in err and "the value megatron_96gpu.log states" in err, err


def test_a_set_tp_dp_of_the_same_world_is_refused_too(tmp_path, capsys):
    code, _, err = _calibrate(tmp_path, capsys, "--log", str(LOG), "--cluster", "dgx-h100",
                              "--set", "parallel.tp=4", "--set", "parallel.dp=24")
    assert code == 2 and "error: --set parallel.tp:" in err and "2, the value megatron_96gpu.log states" in err, err


def test_calibrate_names_its_own_options_for_a_missing_model(tmp_path, capsys):
    """A DeepSpeed config describes no model: calibrate's message said `--model PRESET` /
    `--hf-config`, options only `clustersim import` has."""
    log = ROOT / "validation" / "logs" / "a100_sc21" / "gpt3_175b_zero3_384gpu"
    code, _, err = _calibrate(tmp_path, capsys, "--log", str(log.with_suffix(".log")), "--config",
                              str(log.with_suffix(".json")), "--cluster", "dgx-a100")
    assert code == 2 and "error: --set model.preset:" in err and "--set model.preset=PRESET" in err, err
    assert "--model PRESET" not in err and "--hf-config" not in err
    code, _, err = _run(["import", "deepspeed-log", str(log.with_suffix(".log")), "--config",
                         str(log.with_suffix(".json")), "--cluster", "dgx-a100"], capsys)
    assert code == 2 and "error: --model:" in err and "--model PRESET" in err


def test_two_logs_of_one_file_name_are_told_apart(tmp_path, capsys):
    """`fitted_to: ["train.log", "train.log"]`: two --log files of one name could not be told apart
    in the report and the profile; each is now named by the end of its path that differs."""
    megatron = ROOT / "validation" / "logs" / "megatron_h100"
    for d, log in (("a", "gpt_7.1b_96gpu.log"), ("b", "gpt_1.7b_48gpu.log")):
        (tmp_path / d).mkdir()
        (tmp_path / d / "train.log").write_text((megatron / log).read_text())
    out = tmp_path / "ab.yaml"
    code, stdout, err = _run(["calibrate", "--log", str(tmp_path / "a" / "train.log"), "--log",
                              str(tmp_path / "b" / "train.log"), "--cluster", "dgx-h100", "--name", "ab", "--out",
                              str(out), "--json"], capsys)
    assert code == 0, err
    d = json.loads(stdout)
    assert [r["source"] for r in d["runs"]] == ["a/train.log", "b/train.log"]
    assert d["factors"][0]["fitted_to"] == ["a/train.log", "b/train.log"]
    assert [r["name"] for r in d["calibration"]["per_run"]] == ["a/train.log", "b/train.log"]
    assert '"a/train.log"' in out.read_text() and '"b/train.log"' in out.read_text()
