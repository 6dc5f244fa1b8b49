"""`clustersim calibrate --log`: a planted machine is found again, every run is predicted by a fit
without it, and the evidence travels in the profile to ClusterSpec.calibration."""

import json

import pytest

from clustersim.calibrate.machine import Run, fit_scale, simulate_s
from clustersim.cli import main
from clustersim.hardware.load import load_cluster
from clustersim.importers import finish, import_text
from validation.logs.formats import megatron_log

PLANTED = 0.8   # the machine computes at 0.8 of the model's speed


def _args(tp: int, layers: int, hidden: int) -> dict:
    return {"num_layers": layers, "hidden_size": hidden, "num_attention_heads": 16, "seq_length": 4096,
            "max_position_embeddings": 4096, "padded_vocab_size": 32768, "tensor_model_parallel_size": tp,
            "world_size": 8, "data_parallel_size": 8 // tp, "global_batch_size": 32, "micro_batch_size": 4,
            "sequence_parallel": tp > 1, "use_distributed_optimizer": True}


def _run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """Three Megatron-LM logs whose step times are the simulator's at compute_scale 0.8."""
    d = tmp_path_factory.mktemp("logs")
    cluster = load_cluster("dgx-h100", 1)
    paths = []
    for i, (tp, layers, hidden) in enumerate(((1, 2, 1024), (2, 2, 2048), (4, 4, 2048))):
        res = finish(import_text("megatron-log", megatron_log(_args(tp, layers, hidden), 1.0), "x", cluster="dgx-h100"),
                     [])
        step = simulate_s(res.scenario, cluster, PLANTED)
        p = d / f"run{i}.log"
        p.write_text(megatron_log(_args(tp, layers, hidden), step, checkpoint_at=None))
        paths.append(p)
    return paths


def test_planted_scale_found_and_evidence_written(logs, tmp_path, capsys):
    out = tmp_path / "machine.yaml"
    argv = ["calibrate", "--cluster", "dgx-h100", "--name", "my-h100", "--out", str(out), "--json"]
    for p in logs:
        argv += ["--log", str(p)]
    code, stdout, _ = _run(argv, capsys)
    assert code == 0
    doc = json.loads(stdout)
    assert doc["compute_scale"] == pytest.approx(PLANTED, rel=0.02)
    for r in doc["runs"]:
        assert r["error_before_pct"] < -10                    # the model alone is too fast here
        assert abs(r["loo_error_pct"]) < 2                    # each run from the other two
        assert abs(r["error_calibrated_pct"]) < 2             # the profile as written
    assert doc["leave_one_out"]["runs"] == 3
    from clustersim.calibrate.profile import profile_in_env
    with profile_in_env(out):
        c = load_cluster("my-h100", 1)
    ev = c.calibration
    assert ev is not None and ev.runs == 3 and len(ev.loo_rel_errors) == 3 and ev.date == "2024-07-10"
    assert [round(e * 100, 1) for e in ev.loo_rel_errors] == [round(r["loo_error_pct"], 1) for r in doc["runs"]]
    assert c.gpu.compute_scale == pytest.approx(doc["compute_scale"], rel=1e-5)
    assert c.gpu.name.startswith("h100-sxm-80gb")  # the compute model knows the generation by this name
    code, stdout, _ = _run(["run", "--profile", str(out), "--set", "cluster.preset=my-h100", "--set", "cluster.nodes=1",
                            "--set", "parallel.tp=8", "--set", "parallel.pp=1", "--set", "parallel.dp=1", "--json"],
                           capsys)
    assert code == 0 and json.loads(stdout)["step_time_s"] > 0


def test_one_run_is_predicted_before_calibration():
    """With no other run, the leave-one-out fit has nothing to learn from: scale 1."""
    r = Run("a", "megatron-log", {}, 2.0, grid_s=tuple(1.0 / k for k in (0.4, 0.5, 0.625, 0.8, 1.0, 1.25, 1.6, 2.0,
                                                                          2.5)))
    assert fit_scale([]) == 1.0
    assert fit_scale([r]) == pytest.approx(0.5, rel=1e-3)


def test_evidence_is_validated(tmp_path, monkeypatch):
    from clustersim.errors import InputError
    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters:\n  x:\n    gpu: h100-sxm-80gb\n    gpus_per_node: 8\n    scale_up: nvlink4-nvswitch\n"
                   "    scale_out: ib-ndr\n    calibration: {runs: 2, loo_rel_errors: [0.1, -1.5]}\n")
    monkeypatch.setenv("CLUSTERSIM_PROFILES", str(bad))
    with pytest.raises(InputError) as exc:
        load_cluster("x", 1)
    assert "loo_rel_errors" in exc.value.field


def test_log_of_another_tool_and_config_count(logs, tmp_path, capsys):
    other = tmp_path / "nccl.log"
    other.write_text("# nThread 1 nGpus 8\n        1024   256  float  sum  -1  12.1  0.08  0.15  0  12.0  0.08  0.15  0\n")
    out = tmp_path / "never.yaml"
    code, _, err = _run(["calibrate", "--log", str(other), "--cluster", "dgx-h100", "--out", str(out)], capsys)
    assert code == 2 and "training log" in err and not out.exists()
    code, _, err = _run(["calibrate", "--log", str(logs[0]), "--log", str(logs[1]), "--config", "-",
                         "--cluster", "dgx-h100", "--out", str(out)], capsys)
    assert code == 2 and "--config" in err and not out.exists()


def test_interval_uses_the_evidence(logs, tmp_path, capsys):
    """A scenario on the calibrated cluster gets its interval from the leave-one-out errors."""
    out = tmp_path / "m.yaml"
    argv = ["calibrate", "--cluster", "dgx-h100", "--name", "ev-h100", "--out", str(out)]
    for p in logs:
        argv += ["--log", str(p)]
    assert _run(argv, capsys)[0] == 0
    from clustersim.calibrate.profile import profile_in_env
    from clustersim.scenario import scenario_from_dict
    from clustersim.uncertainty.step import step_interval
    data = {"model": {"preset": "llama3-8b"}, "cluster": {"preset": "ev-h100", "nodes": 1},
            "parallel": {"tp": 8, "global_batch": 8}}
    with profile_in_env(out):
        sc = scenario_from_dict(data)
    assert sc.cluster.calibration.step_time_rel_errors == sc.cluster.calibration.loo_rel_errors
    calibrated = step_interval(sc)
    generic = step_interval(scenario_from_dict({**data, "cluster": {"preset": "dgx-h100", "nodes": 1}}))
    assert calibrated.evidence_runs == 3
    assert (calibrated.lo_factor, calibrated.hi_factor) != (generic.lo_factor, generic.hi_factor)


def test_a_step_faster_than_the_gpus_peak_allows_is_refused(tmp_path, capsys):
    """A measured step shorter than the model's FLOPs at the dense peak (MFU over 100%) was fitted
    to compute_scale 2.4, and `run` with the profile then printed MFU 120%; now it is exit 2 naming
    the run, its MFU and the step at the peak, and no profile is written."""
    from clustersim.report import step_at_peak_s
    from clustersim.scenario import scenario_from_dict
    args = _args(2, 4, 4096)
    res = finish(import_text("megatron-log", megatron_log(args, 1.0), "x", cluster="dgx-h100"), [])
    floor_s = step_at_peak_s(scenario_from_dict(res.scenario))
    fast = tmp_path / "fast.log"
    fast.write_text(megatron_log(args, floor_s / 1.2, checkpoint_at=None))
    out = tmp_path / "m.yaml"
    code, _, err = _run(["calibrate", "--log", str(fast), "--cluster", "dgx-h100", "--name", "m", "--out", str(out)],
                        capsys)
    assert code == 2 and "fast.log" in err and "MFU 100%" in err and "this step is MFU 120%" in err
    assert not out.exists()
    ok = tmp_path / "ok.log"   # the same job at MFU 95% calibrates
    ok.write_text(megatron_log(args, floor_s / 0.95, checkpoint_at=None))
    code, _, _ = _run(["calibrate", "--log", str(ok), "--cluster", "dgx-h100", "--name", "m", "--out", str(out)],
                      capsys)
    assert code == 0 and out.exists()


def test_a_bad_step_line_names_its_file_and_option(logs, tmp_path, capsys):
    """`calibrate --log a --log nan.log --log b` said "error: megatron-log: got 'step 60: nan s'":
    neither the file nor the option. Now both."""
    text = logs[0].read_text()
    line = next(ln for ln in text.splitlines() if "elapsed time per iteration (ms):" in ln and "iteration       20/" in ln)
    ms = line.split("elapsed time per iteration (ms):")[1].split("|")[0]
    bad = tmp_path / "nan71.log"
    bad.write_text(text.replace(line, line.replace(ms, " nan ")))
    out = tmp_path / "never.yaml"
    code, _, err = _run(["calibrate", "--log", str(logs[1]), "--log", str(bad), "--log", str(logs[2]), "--cluster",
                         "dgx-h100", "--out", str(out)], capsys)
    assert code == 2 and "error: --log (megatron-log): got 'nan71.log step 20: nan s'" in err, err
    assert not out.exists()


def test_nodes_that_contradict_the_logs_world_size_name_the_option(logs, tmp_path, capsys):
    """`--nodes 24` on a log of world size 96 blamed the log ("cluster.nodes(24) ... the value the
    megatron-log importer read from gpt_7.1b_96gpu.log"). Now exit 2 naming --nodes."""
    out = tmp_path / "never.yaml"
    code, _, err = _run(["calibrate", "--log", str(logs[0]), "--cluster", "dgx-h100", "--nodes", "3", "--out",
                         str(out)], capsys)
    assert code == 2 and "error: --nodes: got 3" in err and "world size 8" in err and "importer read" not in err, err
    code, _, err = _run(["calibrate", "--log", str(logs[0]), "--cluster", "dgx-h100", "--nodes", "1", "--out",
                         str(out)], capsys)
    assert code == 0, err
