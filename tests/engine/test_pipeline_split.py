"""The frameworks' pipeline splits through the step models: the engine and the closed form run the
resolved split, memory and timing follow each stage's layers, the CLI names bad settings."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from clustersim.api import estimate, simulate
from clustersim.errors import InputError
from clustersim.plan.stage_work import build_step_work
from clustersim.scenario import scenario_from_dict

ROOT = Path(__file__).resolve().parents[2]


def scenario(**parallel) -> dict:
    """Llama 3 8B on 4 DGX H100 at 4,096 tokens (shorter sequences leave a TP8 layer host-bound: the
    split would not show), TP8 inside a node and one pipeline stage per node: nothing contends
    (TP on NVLink, one p2p transfer per NIC direction), so the event engine equals its closed form."""
    base = {"tp": 8, "pp": 4, "micro_batch": 1, "global_batch": 16, "schedule": "1f1b"}
    base.update(parallel)
    if base.get("virtual_stages", 1) > 1:
        base["schedule"] = "interleaved-1f1b"
    return {"model": {"preset": "llama3-8b", "seq_len": 4096}, "cluster": {"preset": "dgx-h100", "nodes": 4},
            "parallel": base}


SPLITS = [
    ({"first_stage_layers": 6, "last_stage_layers": 6}, (6, 10, 10, 6)),
    ({"last_stage_layers": 5}, (9, 9, 9, 5)),
    ({"account_for_embedding": True, "account_for_loss": True}, (8, 9, 8, 7)),
    ({"account_for_embedding": 2, "account_for_loss": 3}, (8, 9, 9, 6)),       # torchtitan weights: 37 = 10+9+9+9, less 2 and 3
    ({"virtual_stages": 2, "first_stage_layers": 4, "last_stage_layers": 4}, (2, 6, 6, 2, 2, 6, 6, 2)),
    ({"virtual_stages": 2, "account_for_embedding": True, "account_for_loss": True}, (4, 5, 4, 4, 4, 4, 4, 3)),
    ({"virtual_stages": 2, "pipeline_layout": "Ettt|(tttt|)*6,tttttL"}, (3, 4, 4, 4, 4, 4, 4, 5)),
]


@pytest.mark.parametrize("par, counts", SPLITS)
def test_engine_and_closed_form_run_the_split(par, counts) -> None:
    sc = scenario_from_dict(scenario(**par))
    assert sc.parallel.layers_per_stage == counts
    work = build_step_work(sc)
    assert tuple(st.num_layers for st in work.stages) == counts
    # the first model stage carries the embedding, the last the output layer and loss: one unit more each
    assert len(work.stages[0].forward) == counts[0] + 1 and len(work.stages[-1].forward) == counts[-1] + 1
    event, closed = simulate(sc), estimate(sc)
    assert math.isclose(event.step_time_s, closed.step_time_s, rel_tol=1e-9)


def test_memory_per_stage_follows_the_split() -> None:
    even = simulate(scenario_from_dict(scenario()))
    heavy_last = simulate(scenario_from_dict(scenario(first_stage_layers=2, last_stage_layers=14)))
    w = [m.weights for m in heavy_last.memory_by_stage]
    w0 = [m.weights for m in even.memory_by_stage]
    # rank 0 holds 2 layers instead of 8, the last 14 instead of 8: weights follow (the middle ranks keep 8)
    assert w[0] < w0[0] and w[-1] > w0[-1] and w[1] == w0[1]
    assert heavy_last.memory.stage == 3


def test_timing_follows_the_split() -> None:
    even = scenario_from_dict(scenario())
    heavy = scenario_from_dict(scenario(first_stage_layers=2, last_stage_layers=14))
    balanced = scenario_from_dict(scenario(account_for_embedding=True, account_for_loss=True))
    # the pipeline runs at its slowest stage: 14 layers + the output layer on one stage is slower
    assert simulate(heavy).step_time_s > simulate(even).step_time_s
    assert estimate(heavy).step_time_s > estimate(even).step_time_s
    # taking a layer off the last stage (which also runs the 128K-vocabulary output layer) helps
    assert simulate(balanced).step_time_s < simulate(even).step_time_s


def test_more_stages_than_layers_with_empty_stages() -> None:
    data = scenario(pp=8, virtual_stages=4, global_batch=16, pipeline_layout="Et|(t|)*29|L")
    data["cluster"]["nodes"] = 8
    data["model"]["layers"] = 30
    sc = scenario_from_dict(data)
    assert sc.parallel.layers_per_stage == (1,) * 30 + (0, 0)
    event, closed = simulate(sc), estimate(sc)
    assert event.step_time_s > 0 and event.step_time_s >= closed.step_time_s * (1 - 1e-9)
    # the even split refuses the same job: 32 stages for 30 layers
    # an empty stage forwards at once: its p2p may meet the next transfer on a link (event engine only)
    data["parallel"].pop("pipeline_layout")
    with pytest.raises(InputError) as err:
        scenario_from_dict(data)
    assert err.value.field == "parallel.pp"


@pytest.mark.parametrize("setting, field", [
    ("parallel.first_stage_layers=7", "parallel.first_stage_layers"),       # 25 middle layers over 3 ranks
    ("parallel.first_stage_layers=0", "parallel.first_stage_layers"),
    ("parallel.account_for_loss=-1", "parallel.account_for_loss"),
    ("parallel.account_for_loss=99", "parallel.account_for_loss"),
    ("parallel.pipeline_layout=Et|tttt|L", "parallel.pipeline_layout"),
    ("parallel.pipeline_layout=[1,2]", "parallel.pipeline_layout"),
])
def test_cli_names_bad_split_settings(tmp_path, setting, field) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(scenario()))
    p = subprocess.run([sys.executable, "-m", "clustersim", "run", str(path), "--set", setting],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 2, p.stderr
    assert field in p.stderr and "allowed" in p.stderr and "Traceback" not in p.stderr


def test_cli_json_and_report_show_the_split(tmp_path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(scenario(first_stage_layers=6, last_stage_layers=6)))
    p = subprocess.run([sys.executable, "-m", "clustersim", "run", str(path), "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["parallel"]["layers_per_stage"] == [6, 10, 10, 6]
    p = subprocess.run([sys.executable, "-m", "clustersim", "run", str(path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert "layers per stage [6, 10, 10, 6]" in p.stdout


def test_sweep_drops_the_template_split() -> None:
    from clustersim.api import SWEEP_EVALUATORS
    from clustersim.parallel.split import split_is_set
    from clustersim.sweep.runner import sweep_spec

    sc = scenario_from_dict(scenario(first_stage_layers=6, last_stage_layers=6))
    base = sweep_spec(sc, evaluators=SWEEP_EVALUATORS).scenario.parallel
    assert not split_is_set(base) and base.layers_per_stage == ()
