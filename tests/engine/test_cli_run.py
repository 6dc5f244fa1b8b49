"""`clustersim run` end to end: JSON contract, exit codes, determinism, trace file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "clustersim", "run", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def test_default_scenario_json_has_the_contract_keys() -> None:
    p = run("--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    for key in ("step_time_s", "tokens_per_s", "model_flops_per_step", "tflops_per_gpu", "mfu", "memory", "breakdown"):
        assert key in out
    for key in ("peak_bytes_per_gpu", "capacity_bytes_per_gpu", "fits"):
        assert key in out["memory"]
    for key in ("compute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm", "bubble"):
        assert key in out["breakdown"]
    assert abs(sum(out["breakdown"].values()) - out["step_time_s"]) <= 0.01 * out["step_time_s"]


def test_two_runs_are_byte_identical(tmp_path: Path) -> None:
    a, b = run("scenarios/llama2_70b_a100x64.yaml", "--json"), run("scenarios/llama2_70b_a100x64.yaml", "--json")
    assert a.returncode == 0 and a.stdout == b.stdout
    t1, t2 = tmp_path / "a.json", tmp_path / "b.json"
    run("scenarios/llama3_8b_h200x8.yaml", "--trace", str(t1))
    run("scenarios/llama3_8b_h200x8.yaml", "--trace", str(t2))
    assert t1.read_bytes() == t2.read_bytes()
    assert json.loads(t1.read_text())["traceEvents"]


def test_gpt3_on_eight_a100_without_model_parallelism_does_not_fit() -> None:
    p = run("--set", "model.preset=gpt3-175b", "--set", "cluster.preset=dgx-a100", "--set", "cluster.nodes=1",
            "--set", "parallel.tp=1", "--set", "parallel.pp=1", "--set", "parallel.dp=8",
            "--set", "parallel.global_batch=8", "--set", "parallel.sequence_parallel=false", "--json")
    assert p.returncode == 3, p.stderr
    assert json.loads(p.stdout)["memory"]["fits"] is False


def test_bad_input_exits_2_with_the_field_named() -> None:
    for args, field in ((["--set", "parallel.tp=3"], "parallel"), (["--set", "model.foo=1"], "model.foo"),
                        (["--set", "parallel.pp=-2"], "parallel.pp"), (["no_such_file.yaml"], "SCENARIO"),
                        (["--set", "parallel.micro_batch=5"], "parallel.micro_batch")):
        p = run(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert field in p.stderr and "Traceback" not in p.stderr


def test_bad_memory_fields_exit_2_naming_the_field() -> None:
    for args, field in ((["--set", "framework=jax"], "framework"),
                        (["--set", "parallel.recompute_every=0"], "parallel.recompute_every"),
                        (["--set", "parallel.recompute_every=99"], "parallel.recompute_every"),
                        (["--set", "parallel.recompute=full", "--set", "parallel.recompute_method=block",
                          "--set", "parallel.recompute_num_layers=40"], "parallel.recompute_num_layers")):
        p = run(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert field in p.stderr and "allowed" in p.stderr and "Traceback" not in p.stderr


def test_tight_runs_exit_0_and_report_the_verdict() -> None:
    """The issue's torchtitan Llama 2 13B run: tight, not 'does not fit' (exit 0, fits true)."""
    p = run("scenarios/llama2_13b_a100x64_torchtitan.yaml", "--json")
    assert p.returncode == 0, p.stderr
    mem = json.loads(p.stdout)["memory"]
    assert mem["fits"] is True and mem["verdict"] in ("fits", "tight")
    assert mem["peak_bytes_per_gpu"] == mem["reserved_peak_bytes"] >= mem["allocated_peak_bytes"]
    lo, hi = mem["interval"]
    assert lo <= mem["peak_bytes_per_gpu"] <= hi


def test_trace_of_overlapped_moe_all_to_alls_has_a_pair_thread(tmp_path: Path) -> None:
    """The event engine records the overlapped MoE all-to-alls on the pair's communication stream
    ("pair"); the trace writer knew only compute/dp/pp/rs and stopped with a ValueError after the
    work (the shipped DeepSeek-V3 scenario could not be traced)."""
    t = tmp_path / "moe.json"
    p = run("scenarios/mixtral_8x7b_h100x64.yaml", "--set", "parallel.overlap_moe_expert_parallel_comm=true",
            "--trace", str(t))
    assert p.returncode == 0, p.stderr
    events = json.loads(t.read_text())["traceEvents"]
    pair = {e["tid"] for e in events if e["ph"] == "M" and e["name"] == "thread_name" and e["args"]["name"] == "pair"}
    assert pair and any(e["ph"] == "X" and e["tid"] in pair and e["cat"] == "ep_comm" for e in events)


def test_trace_and_html_to_one_file_exit_2(tmp_path: Path) -> None:
    """`--trace x.html --html x.html` wrote one over the other with exit 0."""
    p = run("--trace", str(tmp_path / "x.html"), "--html", str(tmp_path / "x.html"))
    assert p.returncode == 2 and "--trace" in p.stderr and "other than --html's" in p.stderr, p.stderr
    assert not (tmp_path / "x.html").exists()


def test_trace_events_of_a_track_nest(tmp_path: Path) -> None:
    """ts and dur were rounded apart, so 17% of the events ended 1 ns after the next one on their
    track began (Perfetto draws only events that nest). Checked in exact decimals."""
    from decimal import Decimal
    t = tmp_path / "t.json"
    assert run("--trace", str(t)).returncode == 0
    lanes: dict = {}
    for e in json.loads(t.read_text(), parse_float=Decimal)["traceEvents"]:
        if e["ph"] == "X":
            lanes.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    assert lanes
    for spans in lanes.values():
        ends: list = []
        for start, end in sorted(spans, key=lambda x: (x[0], -x[1])):
            while ends and ends[-1] <= start:
                ends.pop()
            assert not ends or end <= ends[-1], (start, end, ends[-1])
            ends.append(end)


def test_ctrl_c_after_the_trace_says_which_file_is_whole(tmp_path: Path, monkeypatch, capsys) -> None:
    """Ctrl-C between the trace and the page exited 130 with 'interrupted' alone: the trace was
    complete and kept, the page not written, and nothing said so."""
    import pytest

    import clustersim.html.run_page as page
    from clustersim.cli import main

    def interrupted(*args: object, **kwargs: object) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(page, "run_page", interrupted)
    trace, html = tmp_path / "t.json", tmp_path / "p.html"
    with pytest.raises(SystemExit) as exc:
        main(["run", "--trace", str(trace), "--html", str(html)])
    assert exc.value.code == 130
    err = capsys.readouterr().err
    assert f"{html} not written" in err and f"{trace} written in full" in err
    assert trace.exists() and not html.exists()
