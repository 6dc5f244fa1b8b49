"""The calibrated interval of a job its calibration's runs did not cover: a pipeline (pp > 1) on a
profile fitted to runs without one, and a GPU count below the runs' range (fixtures from a hunt's
reproductions, tests/validation/data/cut_logs)."""

from __future__ import annotations

import json
import shutil

# the hunt's fixtures and the CLI helpers of its calibration tests
from tests.validation.test_calibrate_log_hunt import DATA, _calibrate, _run


def _calibrate_three_pp1_runs(tmp_path, capsys) -> None:
    """The hunt's three pp=1 runs (48-192 GPUs) calibrated into tmp_path/hunt.yaml."""
    for f in ("gpt_1.7b_48gpu.yaml", "gpt_7.1b_96gpu.yaml", "gpt_16b_192gpu.yaml"):
        shutil.copy(DATA / f, tmp_path / f)
    code, _, err = _calibrate(tmp_path, capsys, "--run", f"{tmp_path / 'gpt_1.7b_48gpu.yaml'}=0.4143",
                              "--run", f"{tmp_path / 'gpt_7.1b_96gpu.yaml'}=0.8044",
                              "--run", f"{tmp_path / 'gpt_16b_192gpu.yaml'}=0.9937", "--cluster", "dgx-h100")
    assert code == 0, err


def test_pipelined_job_on_a_profile_fitted_without_a_pipeline_keeps_the_schedule_widening(tmp_path, capsys):
    """Three pp=1 runs; a pp=4 job was 'validated' with nothing widened (the uncalibrated model widens
    it for the schedule its runs did not measure)."""
    _calibrate_three_pp1_runs(tmp_path, capsys)
    job = str(tmp_path / "gpt_16b_192gpu.yaml")
    profile = ["--profile", str(tmp_path / "hunt.yaml"), "--set", "cluster.preset=hunt"]
    intervals = {}
    for pp, dp in ((1, 48), (4, 12)):
        code, out, err = _run(["run", job, *profile, "--set", f"parallel.pp={pp}", "--set", f"parallel.dp={dp}",
                               "--json"], capsys)
        assert code == 0, err
        intervals[pp] = json.loads(out)["interval"]
    assert intervals[1]["validated"] and intervals[1]["widened_for"] == []
    assert not intervals[4]["validated"]
    assert any("pipeline schedule 1f1b" in w for w in intervals[4]["widened_for"])
    lo1, hi1 = intervals[1]["step_time_s"]
    lo4, hi4 = intervals[4]["step_time_s"]
    assert hi4 / lo4 > hi1 / lo1


def test_below_the_calibrated_range_says_only_the_jitter_term_applies(tmp_path, capsys):
    """'8 GPUs outside the calibrated runs' 48-192' read as a widening; the band moved by 0.05%."""
    _calibrate_three_pp1_runs(tmp_path, capsys)
    code, out, err = _run(["run", str(tmp_path / "gpt_1.7b_48gpu.yaml"), "--profile", str(tmp_path / "hunt.yaml"),
                           "--set", "cluster.preset=hunt", "--set", "cluster.nodes=1", "--set", "parallel.dp=8",
                           "--set", "parallel.global_batch=16", "--json"], capsys)
    assert code == 0, err
    why = json.loads(out)["interval"]["widened_for"]
    assert len(why) == 1 and "below the calibrated runs' 48-192" in why[0] and "wait term only" in why[0]
