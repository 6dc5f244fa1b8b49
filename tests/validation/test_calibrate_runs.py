"""`clustersim calibrate` from what users have: runs described as scenarios with their measured
step times (--run, --runs CSV), a Megatron log without its arguments block (--config), TensorBoard
event files and CSV exports of step times; bad input is exit 2 naming what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from clustersim.calibrate.machine import simulate_s
from clustersim.cli import main
from clustersim.hardware.load import load_cluster
from validation.logs.formats import megatron_log

PLANTED = 0.8   # the machine computes at 0.8 of the model's speed


def _scenario(tp: int, layers: int, hidden: int) -> dict:
    return {"name": f"job tp{tp}", "model": {"layers": layers, "hidden": hidden, "heads": 16, "seq_len": 4096,
                                             "vocab": 32768},
            "cluster": {"preset": "dgx-h100", "nodes": 1},
            "parallel": {"tp": tp, "dp": 8 // tp, "global_batch": 32, "micro_batch": 4,
                         "sequence_parallel": tp > 1, "zero_stage": 1}}


SHAPES = ((1, 2, 1024), (2, 2, 2048), (4, 4, 2048))


def _run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """Three scenarios and their step times at compute_scale 0.8 (the planted machine)."""
    d = tmp_path_factory.mktemp("jobs")
    cluster = load_cluster("dgx-h100", 1)
    out = []
    for tp, layers, hidden in SHAPES:
        sc = _scenario(tp, layers, hidden)
        p = d / f"job_tp{tp}.yaml"
        p.write_text(yaml.safe_dump(sc))
        out.append((p, sc, simulate_s(sc, cluster, PLANTED)))
    return out


def test_run_options_find_the_planted_machine(jobs, tmp_path, capsys):
    out = tmp_path / "m.yaml"
    argv = ["calibrate", "--cluster", "dgx-h100", "--name", "runs-h100", "--out", str(out), "--json"]
    for p, _, t in jobs:
        argv += ["--run", f"{p}={t!r}"]
    code, stdout, err = _run(argv, capsys)
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["compute_scale"] == pytest.approx(PLANTED, rel=0.02)
    assert doc["leave_one_out"]["runs"] == 3 and doc["cover"] == ["dense 3D"]
    (factor,) = doc["factors"]
    assert factor["name"] == "compute_scale" and factor["before"] == 1.0
    assert factor["fitted_to"] == [p.name for p, _, _ in jobs]
    for r in doc["runs"]:
        assert r["error_before_pct"] < -10 and abs(r["error_calibrated_pct"]) < 2
    # run on the profile shows what calibration changed, in the report and in --json
    code, stdout, _ = _run(["run", str(jobs[0][0]), "--profile", str(out), "--set", "cluster.preset=runs-h100",
                            "--json"], capsys)
    doc = json.loads(stdout)
    assert code == 0 and doc["calibration"]["factors"][0]["name"] == "compute_scale"
    assert doc["calibration"]["covered"] is True and len(doc["calibration"]["per_run"]) == 3
    code, stdout, _ = _run(["run", str(jobs[0][0]), "--profile", str(out), "--set", "cluster.preset=runs-h100"],
                           capsys)
    assert code == 0 and "calibrated" in stdout and "compute_scale 1 -> 0.8" in stdout


def test_runs_csv_converts_tokens_and_mfu(jobs, tmp_path, capsys):
    """The same three runs, given as step time, tokens/s and MFU: the same calibration."""
    from clustersim.api import simulate
    from clustersim.scenario import scenario_from_dict
    rows = ["scenario,step_time_s,tokens_per_s,mfu"]
    for i, (p, sc, t) in enumerate(jobs):
        rep = simulate(scenario_from_dict(sc))
        tokens = rep.tokens_per_s * rep.step_time_s / t       # what that job would have logged at step t
        mfu = rep.mfu * rep.step_time_s / t
        cells = [f"{t!r}", "", ""] if i == 0 else (["", f"{tokens!r}", ""] if i == 1 else ["", "", f"{mfu * 100!r}%"])
        rows.append(",".join([p.name, *cells]))
    csv_path = jobs[0][0].parent / "runs.csv"
    csv_path.write_text("\n".join(rows) + "\n")
    code, stdout, err = _run(["calibrate", "--runs", str(csv_path), "--out", str(tmp_path / "c.yaml"), "--json"],
                             capsys)
    assert code == 0, err
    doc = json.loads(stdout)
    assert [r["measured_step_time_s"] for r in doc["runs"]] == pytest.approx([t for _, _, t in jobs], rel=1e-9)
    assert doc["compute_scale"] == pytest.approx(PLANTED, rel=0.02)


@pytest.mark.parametrize(("spec", "needle"), [
    ("{p}=0", "> 0"), ("{p}=-2.5", "> 0"), ("{p}=fast", "SECONDS a number"), ("{p}", "SCENARIO.yaml=SECONDS"),
    ("missing.yaml=5.58", "does not exist"), (".=5.58", "is a directory"),
    # a step the model cannot explain: the message names --run, not --log (it said --log)
    ("{p}=80000", "can explain"),
    # faster than the GPUs' peak allows (it was fitted, or refused only as 'cannot explain')
    ("{p}=0.00001", "MFU 100%"),
])
def test_bad_run_is_exit_2_naming_it(jobs, tmp_path, capsys, spec, needle):
    out = tmp_path / "never.yaml"
    code, _, err = _run(["calibrate", "--run", spec.format(p=jobs[0][0]), "--out", str(out)], capsys)
    assert code == 2 and "--run" in err and needle in err, err
    assert not out.exists()


def test_bad_csv_and_logs_are_exit_2(jobs, tmp_path, capsys):
    out = tmp_path / "never.yaml"
    no_value = tmp_path / "a.csv"
    no_value.write_text(f"scenario,seconds\n{jobs[0][0]},5.0\n")
    code, _, err = _run(["calibrate", "--runs", str(no_value), "--out", str(out)], capsys)
    assert code == 2 and "--runs" in err and "step_time_s" in err and "seconds" in err
    no_scenario = tmp_path / "b.csv"
    no_scenario.write_text("job,step_time_s\nx.yaml,5.0\n")
    code, _, err = _run(["calibrate", "--runs", str(no_scenario), "--out", str(out)], capsys)
    assert code == 2 and "`scenario` column" in err
    bad_mfu = tmp_path / "c.csv"
    bad_mfu.write_text(f"scenario,mfu\n{jobs[0][0]},41\n")
    code, _, err = _run(["calibrate", "--runs", str(bad_mfu), "--out", str(out)], capsys)
    assert code == 2 and "41%" in err
    no_lines = tmp_path / "args_only.log"
    no_lines.write_text("\n".join(megatron_log(_args(), 1.0).splitlines()[:60]))   # the block, no iteration
    code, _, err = _run(["calibrate", "--log", str(no_lines), "--cluster", "dgx-h100", "--out", str(out)], capsys)
    assert code == 2 and "iteration" in err, err
    steps_csv = tmp_path / "steps.csv"
    steps_csv.write_text("step,loss\n1,2.0\n")
    code, _, err = _run(["calibrate", "--log", str(steps_csv), "--config", str(jobs[0][0]), "--out", str(out)], capsys)
    assert code == 2 and "step_time_s" in err
    assert not out.exists()


def _args() -> dict:
    return {"num_layers": 2, "hidden_size": 1024, "num_attention_heads": 16, "seq_length": 2048,
            "max_position_embeddings": 2048, "padded_vocab_size": 32768, "tensor_model_parallel_size": 1,
            "world_size": 8, "data_parallel_size": 8, "global_batch_size": 32, "micro_batch_size": 2,
            "use_distributed_optimizer": True}


def _iteration_lines(step_s: float) -> str:
    return "\n".join(line for line in megatron_log(_args(), step_s, checkpoint_at=None).splitlines()
                     if "iteration" in line and "elapsed time per iteration" in line)


@pytest.mark.parametrize("steps, steady", [((1,), False), ((1, 2), False), ((1, 2, 3), False), ((1, 4), True)])
def test_step_times_of_warm_up_only_are_refused(jobs, tmp_path, capsys, steps, steady):
    """A CSV of step times needs a line past the warm-up (the first line, steps <= 3), as a log does;
    one row at step 1 was used as the steady step."""
    p, _, t = jobs[0]
    path = tmp_path / "steps.csv"
    path.write_text("step,step_time_s\n" + "".join(f"{s},{t * (5 if i == 0 else 1)!r}\n" for i, s in enumerate(steps)))
    code, stdout, err = _run(["calibrate", "--log", str(path), "--config", str(p), "--out",
                              str(tmp_path / "p.yaml"), "--json"], capsys)
    if steady:
        assert code == 0 and json.loads(stdout)["runs"][0]["measured_step_time_s"] == pytest.approx(t), err
    else:
        assert code == 2 and "error: --log: got 'steps.csv'" in err and "steady-state" in err, err


def test_megatron_log_without_arguments_block_takes_config(jobs, tmp_path, capsys):
    """A pasted excerpt (iteration lines only) is refused naming --config, and accepted with the job
    as a clustersim scenario or as Megatron-LM's command line."""
    _, sc, t = jobs[0]
    log = tmp_path / "excerpt.log"
    log.write_text(_iteration_lines(t))
    out = tmp_path / "m.yaml"
    code, _, err = _run(["calibrate", "--log", str(log), "--cluster", "dgx-h100", "--out", str(out)], capsys)
    assert code == 2 and "--config" in err and not out.exists()
    code, stdout, err = _run(["calibrate", "--log", str(log), "--config", str(jobs[0][0]), "--out", str(out),
                              "--json"], capsys)
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["runs"][0]["measured_step_time_s"] == pytest.approx(t, rel=0.02)
    assert any("arguments block" in n for n in doc["notes"]) or doc["runs"][0]["kind"] == "megatron-log"
    cmd = tmp_path / "launch.sh"
    cmd.write_text("torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --num-layers 2 --hidden-size 1024 "
                   "--num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 "
                   "--tokenizer-type NullTokenizer --vocab-size 32767 --make-vocab-size-divisible-by 1 "
                   "--micro-batch-size 2 --global-batch-size 32 --use-distributed-optimizer --bf16\n")
    cut = tmp_path / "cut.log"
    text = megatron_log(_args(), t, checkpoint_at=None)
    cut.write_text(text.replace("-------------------- end of arguments ---------------------", ""))
    code, stdout, err = _run(["calibrate", "--log", str(cut), "--config", str(cmd), "--cluster", "dgx-h100",
                              "--out", str(out), "--json"], capsys)
    assert code == 0, err
    assert json.loads(stdout)["runs"][0]["scenario"]["model"]["hidden"] == 1024


def test_tensorboard_and_csv_exports(jobs, tmp_path, capsys):
    """Megatron's `iteration-time` scalar, a run that logged only its loss (wall times), and a CSV
    export: each gives the step time; the job comes from --config."""
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    _, _, t = jobs[0]

    def write(folder: Path, tag: str, values: list[tuple[int, float, float]]) -> Path:
        folder.mkdir()
        w = EventFileWriter(str(folder))
        for step, wall, value in values:
            s = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
            w.add_event(event_pb2.Event(wall_time=wall, step=step, summary=s))
        w.close()
        return next(folder.glob("events.out.tfevents.*"))
    timed = write(tmp_path / "tb1", "iteration-time", [(i, 1000.0 + i * t, t * (3 if i == 1 else 1)) for i in
                                                       range(1, 40)])
    loss_only = write(tmp_path / "tb2", "lm loss", [(i, 1000.0 + i * t, 5.0 - 0.01 * i) for i in range(1, 40)])
    export = tmp_path / "run-.-tag-lm loss.csv"
    export.write_text("Wall time,Step,Value\n" + "\n".join(f"{1000.0 + i * t!r},{i},{5 - 0.01 * i}" for i in range(1, 40)))
    ms = tmp_path / "steps.csv"
    ms.write_text("step,step_time_ms\n" + "\n".join(f"{i},{t * 1e3!r}" for i in range(1, 40)))
    for path in (timed, loss_only, export, ms):
        code, stdout, err = _run(["calibrate", "--log", str(path), "--config", str(jobs[0][0]), "--out",
                                  str(tmp_path / "p.yaml"), "--json"], capsys)
        assert code == 0, (path, err)
        assert json.loads(stdout)["runs"][0]["measured_step_time_s"] == pytest.approx(t, rel=1e-6), path
    code, _, err = _run(["calibrate", "--log", str(timed), "--out", str(tmp_path / "p.yaml")], capsys)
    assert code == 2 and "--config" in err


def test_tensorboard_without_the_extra_names_it(tmp_path, monkeypatch, capsys):
    import builtins
    real = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name.startswith("tensorboard"):
            raise ImportError(name)
        return real(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(b"\x00" * 16)
    code, _, err = _run(["calibrate", "--log", str(path), "--out", str(tmp_path / "p.yaml")], capsys)
    assert code == 2 and "clustersim[tensorboard]" in err


def test_unknown_preset_names_profile_and_the_file(tmp_path, monkeypatch, capsys, jobs):
    """`run` with a calibrated cluster's name but no --profile: the message names --profile and,
    when calibrate wrote it where it writes by default, the file."""
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(["run", "--set", "cluster.preset=my-h100"], capsys)
    assert code == 2 and "--profile" in err and "my-h100" in err
    p, _, t = jobs[0]
    assert _run(["calibrate", "--run", f"{p}={t!r}", "--name", "my-h100"], capsys)[0] == 0
    assert (tmp_path / "my-h100.yaml").exists()
    code, _, err = _run(["run", "--set", "cluster.preset=my-h100"], capsys)
    assert code == 2 and "--profile my-h100.yaml" in err, err


def test_a_run_given_twice_is_refused(jobs, tmp_path, capsys):
    """The same run several times counted as independent evidence: `--log M --log M --log M` reported
    "leave-one-out: 3 runs, median |error| 0.0%" and narrowed the calibrated interval. A file given
    twice (by path, link or copy), a repeated --run and two equal rows of a --runs CSV are exit 2,
    naming the option and the repeated value; nothing is written."""
    (p1, _, t1), (p2, _, t2) = jobs[0], jobs[1]
    log = tmp_path / "steps.csv"
    log.write_text("step,step_time_s\n" + "".join(f"{i},{t1!r}\n" for i in range(1, 12)))
    copy = tmp_path / "copy.csv"
    copy.write_text(log.read_text())
    (tmp_path / "link.csv").symlink_to(log)
    rows = tmp_path / "runs.csv"
    rows.write_text(f"scenario,step_time_s\n{p1},{t1!r}\n{p2},{t2!r}\n{p1},{t1!r}\n")
    out = tmp_path / "p.yaml"
    for argv, option, value in [
        (["--log", str(log), "--config", str(p1), "--log", str(log), "--config", str(p1)], "--log", str(log)),
        (["--log", str(log), "--config", str(p1), "--log", str(copy), "--config", str(p1)], "--log", str(copy)),
        (["--log", str(log), "--config", str(p1), "--log", str(tmp_path / "link.csv"), "--config", str(p1)], "--log",
         str(tmp_path / "link.csv")),
        (["--run", f"{p1}={t1!r}", "--run", f"{p2}={t2!r}", "--run", f"{p1}={t1!r}"], "--run", p1.name),
        (["--runs", str(rows)], "--runs", f"runs.csv:4 {p1.name}"),
        (["--runs", str(rows), "--runs", str(rows)], "--runs", str(rows)),
    ]:
        code, _, err = _run(["calibrate", *argv, "--out", str(out)], capsys)
        assert code == 2 and f"error: {option}: got '{value}'" in err and "once" in err, (argv, err)
        assert not out.exists()
    # the same job measured at another step time is a rerun (test_reruns_of_one_job_are_one_run)
    code, _, err = _run(["calibrate", "--run", f"{p1}={t1!r}", "--run", f"{p1}={t1 * 1.02!r}", "--out", str(out)],
                        capsys)
    assert code == 0, err


def test_reruns_of_one_job_are_one_run(jobs, tmp_path, capsys):
    """Three reruns of one job at near step times counted as three runs: leave-one-out predicted
    each from the others (0.1%) and the interval was "validated" and narrower than from one run.
    Now they are one run at their median, with a note; with another job, leave-one-out has two."""
    (p1, _, t1), (p2, _, t2) = jobs[0], jobs[1]
    reruns = ["--run", f"{p1}={t1 * 1.001!r}", "--run", f"{p1}={t1 * 0.999!r}", "--run", f"{p1}={t1!r}"]
    code, stdout, err = _run(["calibrate", *reruns, "--out", str(tmp_path / "r.yaml"), "--json"], capsys)
    assert code == 0, err
    doc = json.loads(stdout)
    (run,) = doc["runs"]
    assert run["measured_step_time_s"] == pytest.approx(t1, rel=1e-12) and "median of 3" in run["source"]
    assert doc["leave_one_out"]["runs"] == 0 and any("3 measurements of one job" in n for n in doc["notes"])
    code, stdout, err = _run(["calibrate", *reruns, "--run", f"{p2}={t2!r}", "--out", str(tmp_path / "s.yaml"),
                              "--json"], capsys)
    assert code == 0, err
    assert json.loads(stdout)["leave_one_out"]["runs"] == 2


def test_a_log_of_another_gpu_than_the_cluster_is_refused(tmp_path, capsys):
    """A torchtitan log that says it ran on A100 was fitted to --cluster dgx-h100 (compute_scale
    0.61, no note), where an nccl-tests log of the same mismatch is refused; now the log is too."""
    from validation.logs.formats import torchtitan_log, torchtitan_toml
    args = ("TransformerModelArgs(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, vocab_size=128256, "
            "multiple_of=1024, ffn_dim_multiplier=1.3, norm_eps=1e-05, rope_theta=500000, max_seq_len=8192)")
    log, toml = tmp_path / "a100.log", tmp_path / "job.toml"
    log.write_text(torchtitan_log(model_args=args, mesh=(["dp_shard"], [8]), gpu="NVIDIA A100-SXM4-80GB", tps=2500))
    toml.write_text(torchtitan_toml(name="llama3", flavor="8B", local_batch=2, seq_len=8192))
    out = tmp_path / "m.yaml"
    code, _, err = _run(["calibrate", "--log", str(log), "--config", str(toml), "--cluster", "dgx-h100",
                         "--out", str(out)], capsys)
    assert code == 2 and "a100.log" in err and "A100-SXM4-80GB" in err and "--cluster dgx-a100" in err, err
    assert not out.exists()
    code, _, err = _run(["calibrate", "--log", str(log), "--config", str(toml), "--cluster", "dgx-a100",
                         "--out", str(out)], capsys)
    assert code == 0, err


def test_runs_csv_takes_milliseconds_and_refuses_two_measurements_in_a_row(jobs, tmp_path, capsys):
    """A step_time_ms column was refused (--log CSVs take it), and a row with both step_time_s and
    mfu silently used the first."""
    p, _, t = jobs[0]
    ms = tmp_path / "ms.csv"
    ms.write_text(f"scenario,step_time_ms\n{p},{t * 1e3!r}\n")
    code, stdout, err = _run(["calibrate", "--runs", str(ms), "--out", str(tmp_path / "m.yaml"), "--json"], capsys)
    assert code == 0, err
    assert json.loads(stdout)["runs"][0]["measured_step_time_s"] == pytest.approx(t, rel=1e-9)
    both = tmp_path / "both.csv"
    both.write_text(f"scenario,step_time_s,mfu\n{p},{t!r},20%\n")
    code, _, err = _run(["calibrate", "--runs", str(both), "--out", str(tmp_path / "b.yaml")], capsys)
    assert code == 2 and "one measurement per row" in err and "line 2" in err


def test_a_calibration_holds_for_its_own_gpu_only(jobs, tmp_path, capsys):
    """A calibrated preset run with `cluster.gpu` set to another GPU kept the calibration: the
    uncalibrated H100's step came with `covered: true`, compute_scale 0.8 in `calibration.factors`
    and the calibrated band, and on a B200 the "no measured run on b200 GPUs" widening was dropped.
    Now no fitted factor and no calibrated band apply on another GPU: the scenario is uncalibrated."""
    out = tmp_path / "m.yaml"
    argv = ["calibrate", "--cluster", "dgx-h100", "--name", "gpu-h100", "--out", str(out)]
    for p, _, t in jobs:
        argv += ["--run", f"{p}={t!r}"]
    assert _run(argv, capsys)[0] == 0
    p = str(jobs[0][0])
    for gpu in ("h100-sxm-80gb", "b200-sxm-180gb"):
        code, stdout, err = _run(["run", p, "--profile", str(out), "--set", "cluster.preset=gpu-h100", "--set",
                                  f"cluster.gpu={gpu}", "--json"], capsys)
        assert code == 0, err
        doc = json.loads(stdout)
        code, stdout, err = _run(["run", p, "--set", f"cluster.gpu={gpu}", "--json"], capsys)
        plain = json.loads(stdout)
        assert "calibration" not in doc
        assert doc["step_time_s"] == plain["step_time_s"] and doc["interval"] == plain["interval"]
    assert "no measured run on b200 GPUs" in doc["interval"]["widened_for"]
    # the calibrated GPU itself, named, keeps the calibration
    code, stdout, err = _run(["run", p, "--profile", str(out), "--set", "cluster.preset=gpu-h100", "--set",
                              "cluster.gpu=h100-sxm-80gb-gpu-h100", "--json"], capsys)
    assert code == 0 and json.loads(stdout)["calibration"]["covered"] is True, err


@pytest.mark.parametrize("how", ["set", "scenario"])
def test_a_run_on_other_hardware_than_the_preset_is_refused(jobs, tmp_path, capsys, how):
    """calibrate swapped in the preset's hardware and kept only the run's nodes and GPUs per node:
    `--set cluster.nics_per_node=1` was fitted with 8 NICs, a --run scenario on Ethernet as
    InfiniBand (the profile written then predicted 15 s for the measured 1.0 s). A run's cluster
    field that differs from the preset is exit 2 naming it; nothing is written."""
    p, sc, t = jobs[0]
    out = tmp_path / "never.yaml"
    if how == "set":
        argv = ["--run", f"{p}={t!r}", "--set", "cluster.nics_per_node=1"]
        field = "cluster.nics_per_node"
    else:
        eth = tmp_path / "eth.yaml"
        eth.write_text(yaml.safe_dump({**sc, "cluster": {**sc["cluster"], "scale_out": "eth-25g"}}))
        argv = ["--run", f"{eth}={t!r}"]
        field = "cluster.scale_out"
    code, _, err = _run(["calibrate", *argv, "--cluster", "dgx-h100", "--out", str(out)], capsys)
    assert code == 2 and f"error: {field}: got" in err and "dgx-h100's" in err and "one preset's hardware" in err, err
    assert not out.exists()
    # the preset's own value is no other hardware
    code, _, err = _run(["calibrate", "--run", f"{p}={t!r}", "--set", "cluster.nics_per_node=8", "--out", str(out)],
                        capsys)
    assert code == 0, err


def test_runs_csv_mfu_is_converted_on_the_cluster_option(jobs, tmp_path, capsys):
    """A --runs MFU was converted with the scenario's preset GPU, not --cluster's (which replaces
    the runs' cluster.preset): an A100 scenario's 40% on --cluster dgx-h100 became the A100's step."""
    p, sc, t = jobs[0]
    a100 = tmp_path / "a100.yaml"
    a100.write_text(yaml.safe_dump({**sc, "cluster": {**sc["cluster"], "preset": "dgx-a100"}}))
    steps = []
    for scenario in (p, a100):
        rows = tmp_path / "mfu.csv"
        rows.write_text(f"scenario,mfu\n{scenario},20%\n")
        code, stdout, err = _run(["calibrate", "--runs", str(rows), "--cluster", "dgx-h100", "--out",
                                  str(tmp_path / "m.yaml"), "--json"], capsys)
        assert code == 0, err
        steps.append(json.loads(stdout)["runs"][0]["measured_step_time_s"])
    assert steps[1] == pytest.approx(steps[0], rel=1e-12)


@pytest.fixture(scope="module")
def one_profile(jobs, tmp_path_factory):
    """A profile calibrated on one run of jobs[0], cluster preset `one-h100`."""
    out = tmp_path_factory.mktemp("one") / "one.yaml"
    p, _, t = jobs[0]
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", "--run", f"{p}={t!r}", "--name", "one-h100", "--out", str(out)])
    assert exc.value.code == 0
    return out


def test_a_profile_the_scenario_does_not_use_is_named(jobs, one_profile, capsys):
    """`run job.yaml --profile one.yaml` without `cluster.preset: one` applied nothing and said
    nothing (no calibration key, no note). Now exit 2 naming cluster.preset and the file's preset."""
    p = str(jobs[0][0])
    code, _, err = _run(["run", p, "--profile", str(one_profile), "--json"], capsys)
    assert code == 2 and "error: cluster.preset: got 'dgx-h100'" in err and "cluster.preset=one-h100" in err, err
    code, stdout, err = _run(["run", p, "--profile", str(one_profile), "--set", "cluster.preset=one-h100", "--json"],
                             capsys)
    assert code == 0 and "calibration" in json.loads(stdout), err


def test_a_profile_edited_after_calibrate_is_refused(jobs, one_profile, tmp_path, capsys):
    """compute_scale edited to 0.5 was applied while the calibration block still reported the fitted
    value and the fit's before and after (the measured run outside its own interval). Now exit 2
    naming the GPU's field and the value the calibration reports."""
    text = one_profile.read_text()
    fitted = yaml.safe_load(text)["clusters"]["one-h100"]["calibration"]["factors"][0]["value"]
    edited = tmp_path / "edited.yaml"
    edited.write_text(text.replace(f"compute_scale: {fitted}  #", "compute_scale: 0.5  #"))
    assert edited.read_text() != text
    code, _, err = _run(["run", str(jobs[0][0]), "--profile", str(edited), "--set", "cluster.preset=one-h100"], capsys)
    assert code == 2 and "gpus.h100-sxm-80gb-one-h100.compute_scale: got '0.5'" in err and f"{fitted:.6g}" in err, err


def test_profiles_defining_one_name_and_a_shipped_name_are_refused(jobs, one_profile, tmp_path, capsys):
    """Two profiles defining preset `calibrated`: the last won silently; `calibrate --name dgx-h100`
    wrote a profile that shadowed the shipped preset. Both are exit 2 naming the name."""
    p, _, t = jobs[0]
    other = tmp_path / "other" / "one.yaml"
    other.parent.mkdir()
    other.write_text(one_profile.read_text())
    code, _, err = _run(["run", str(p), "--profile", str(one_profile), "--profile", str(other), "--set",
                         "cluster.preset=one-h100"], capsys)
    assert code == 2 and "error: --profile" in err and "one-h100" in err and str(other) in err, err
    # the same file twice is one file
    code, _, err = _run(["run", str(p), "--profile", str(one_profile), "--profile", str(one_profile), "--set",
                         "cluster.preset=one-h100"], capsys)
    assert code == 0, err
    out = tmp_path / "never.yaml"
    code, _, err = _run(["calibrate", "--run", f"{p}={t!r}", "--name", "dgx-h100", "--out", str(out)], capsys)
    assert code == 2 and "error: --name: got 'dgx-h100'" in err and "shipped cluster preset" in err, err
    assert not out.exists()
