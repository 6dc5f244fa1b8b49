"""A job that does not fit (exit 3): the readable report shows no time, rate or MFU as if the job
had run, `--json` keeps every contract key, and stderr names a `clustersim sweep` command line
that runs as printed."""

from __future__ import annotations

import json
import shlex

import pytest

from clustersim.api import SWEEP_EVALUATORS
from clustersim.cli import main
from clustersim.cli.does_not_fit import sweep_command
from clustersim.scenario import apply_overrides, read_scenario_dict, scenario_from_dict
from clustersim.sweep.runner import sweep_spec

# GPT-3 175B on one DGX A100 without model parallelism: far over 80 GB per GPU
GPT3_ON_8 = ["--set", "model.preset=gpt3-175b", "--set", "cluster.preset=dgx-a100", "--set", "cluster.nodes=1",
             "--set", "parallel.tp=1", "--set", "parallel.pp=1", "--set", "parallel.dp=8",
             "--set", "parallel.global_batch=8", "--set", "parallel.sequence_parallel=false"]
# Llama-3-70B's shipped scenario (tp8 pp4 dp16 on 64 nodes) squeezed onto 2 nodes
SQUEEZED = ["scenarios/llama3_70b_h100x512.yaml", "--set", "cluster.nodes=2", "--set", "parallel.dp=1",
            "--set", "parallel.pp=2", "--set", "parallel.virtual_stages=1", "--set", "parallel.schedule=1f1b"]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return int(exc.value.code), out.out, out.err


def _suggested(err: str) -> list[str]:
    line = next(line for line in err.splitlines() if "clustersim sweep" in line)
    if "`clustersim sweep" in line:   # named as the sweep that finds no layout (exits 2)
        return shlex.split(line.split("`")[1])
    return shlex.split(line[line.index("clustersim sweep"):])


def _check_runs_as_printed(words: list[str], gpus: int) -> None:
    """The suggested sweep builds its spec (the scenario checks pass) on the same GPU count."""
    assert words[:2] == ["clustersim", "sweep"]
    args = words[2:]
    path = args.pop(0) if args and not args[0].startswith("--") else None
    sets, size = [], None
    while args:
        flag, value = args.pop(0), args.pop(0)
        if flag == "--set":
            sets.append(value)
        else:
            assert flag == "--gpus"
            size = int(value)
    spec = sweep_spec(scenario_from_dict(apply_overrides(read_scenario_dict(path), sets)), size,
                      evaluators=SWEEP_EVALUATORS)
    assert spec.scenario.cluster.num_gpus == gpus
    assert not any(s.startswith(("parallel.tp=", "parallel.pp=", "parallel.dp=", "cluster.nodes=")) for s in sets)


@pytest.mark.parametrize(("argv", "gpus"), [(GPT3_ON_8, 8), (SQUEEZED, 16)])
def test_readable_report_shows_no_rates_and_suggests_a_sweep(argv, gpus, capsys) -> None:
    code, out, err = _run(["run", "--engine", "analytical", *argv], capsys)
    assert code == 3
    for shown_as_achieved in ("MFU", "tokens/s", "TFLOP/s", "critical path", "kWh"):
        assert shown_as_achieved not in out, out
    assert "does not fit in GPU memory" in out and "DOES NOT FIT" in out
    assert "reserved peak" in out and "optimizer states" in out  # the memory is what the user needs now
    assert err.startswith("error: does not fit: ")
    _check_runs_as_printed(_suggested(err), gpus)
    if argv is GPT3_ON_8:   # no layout of GPT-3 175B fits 8 A100: the sweep is named as one that finds none
        assert "no sweep of this job on these 8 GPUs helps" in err and "to find the layouts" not in err, err
    else:
        assert "to find the layouts that fit on these 16 GPUs, run: clustersim sweep" in err, err


def test_no_sweep_is_promised_where_no_layout_fits(capsys) -> None:
    """`run`'s hint suggested `clustersim sweep ... --gpus 8`, which exits 2 (the smallest of its
    layouts needs 151.3 GiB per GPU): the hint now checks with the sweep's own screen first."""
    argv = ["run", "--engine", "analytical", "scenarios/llama3_70b_h800x256.yaml", "--set", "cluster.nodes=1",
            "--set", "parallel.pp=1", "--set", "parallel.dp=2", "--set", "parallel.virtual_stages=1",
            "--set", "parallel.schedule=1f1b"]
    code, _, err = _run(argv, capsys)
    assert code == 3
    assert "to find the layouts that fit" not in err, err
    assert "`clustersim sweep scenarios/llama3_70b_h800x256.yaml --gpus 8` exits 2" in err, err
    assert "the smallest needs 151.3 GiB per GPU, the GPU has 79.6 GiB" in err, err
    code, _, err = _run(["sweep", "scenarios/llama3_70b_h800x256.yaml", "--gpus", "8", "--no-progress"], capsys)
    assert code == 2 and "the smallest needs 151.3 GiB per GPU" in err, err


def test_json_keeps_every_contract_key(capsys) -> None:
    code, out, err = _run(["run", "--engine", "analytical", "--json", *GPT3_ON_8], capsys)
    assert code == 3
    rj = json.loads(out)
    for key in ("step_time_s", "tokens_per_s", "model_flops_per_step", "tflops_per_gpu", "mfu", "interval",
                "breakdown"):
        assert key in rj
    mem = rj["memory"]
    assert mem["fits"] is False and mem["verdict"] == "does-not-fit"
    for key in ("peak_bytes_per_gpu", "capacity_bytes_per_gpu", "allocated_peak_bytes", "reserved_peak_bytes",
                "interval"):
        assert key in mem
    assert "clustersim sweep" in err


def test_goodput_of_a_job_that_cannot_start(capsys) -> None:
    code, out, err = _run(["goodput", "--days", "1", "--engine", "analytical", *GPT3_ON_8], capsys)
    assert code == 3
    assert "%" not in out and "does not fit in GPU memory" in out  # no goodput, no interruptions
    _check_runs_as_printed(_suggested(err), 8)


def test_command_keeps_what_the_sweep_does_not_search() -> None:
    cmd = sweep_command("s.yaml", ["parallel.tp=4", "training.dtype=fp8", "parallel.global_batch=64"], 64)
    # s.yaml does not exist: the file cannot be checked, so the user's own overrides stay as typed
    assert cmd == "clustersim sweep s.yaml --set parallel.tp=4 --set training.dtype=fp8 --set parallel.global_batch=64"
    cmd = sweep_command(None, ["parallel.tp=4", "parallel.global_batch=64", "model.preset=llama3-70b"], 16,
                        ["my profile.yaml"])
    assert cmd == ("clustersim sweep --set parallel.global_batch=64 --set model.preset=llama3-70b "
                   "--profile 'my profile.yaml'")


def test_no_sweep_is_suggested_for_a_scenario_the_sweep_refuses(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    """On a mixed cluster or with faults the second line named `clustersim sweep ...`, which
    refuses both (exit 2). It now says what to change instead, naming why the sweep does not apply."""
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text(json.dumps({
        "name": "mixed-mem", "model": {"preset": "llama3-70b"},
        "cluster": {"groups": [{"preset": "dgx-h100", "nodes": 4}, {"preset": "dgx-a100-40gb", "nodes": 4}],
                    "nodes_per_leaf": 32},
        "parallel": {"tp": 8, "pp": 2, "dp": 4, "micro_batch": 1, "global_batch": 64, "zero_stage": 1,
                     "recompute": "full", "sequence_parallel": True, "layers_per_stage": [30, 50]}}))
    code, _, err = _run(["run", str(mixed), "--engine", "analytical"], capsys)
    assert code == 3, err
    assert "does not fit" in err and "run: clustersim sweep" not in err, err
    assert "refuses cluster.groups" in err and "parallel.layers_per_stage" in err, err
    code, _, err = _run(["run", *GPT3_ON_8, "--set", "faults.slow_gpus=[{rank: 1, speed: 0.5}]",
                         "--engine", "analytical"], capsys)
    assert code == 3, err
    assert "run: clustersim sweep" not in err and "refuses a scenario with faults" in err, err
