"""A dense model's parallel.offload in the scenario file is a fixed dimension of sweep and compare
(clustersim.sweep.runner.scenario_space): every layout offloads as `clustersim run` does, and the
output says so (a line and the JSON field ``fixed_offload``); it was dropped silently."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from clustersim.api import SWEEP_EVALUATORS
from clustersim.scenario import scenario_from_dict
from clustersim.sweep.runner import sweep_spec
from clustersim.sweep.space import count_layouts, enumerate_layouts

ROOT = Path(__file__).resolve().parents[2]
RAW = {"framework": "deepspeed", "model": {"preset": "llama2-7b"}, "cluster": {"preset": "dgx-a100", "nodes": 1},
       "parallel": {"dp": 8, "micro_batch": 1, "global_batch": 64, "zero_stage": 2, "recompute": "full",
                    "offload": {"optimizer": True}},
       "training": {"dtype": "bf16"}}


def test_every_layout_of_the_sweep_offloads_as_the_scenario_does():
    sc = scenario_from_dict(RAW)
    spec = sweep_spec(sc, evaluators=SWEEP_EVALUATORS)
    listed = list(enumerate_layouts(sc.model, sc.cluster, sc.parallel, spec.space))
    assert listed and all(p.offload_optimizer for p in listed)
    assert all(p.zero_stage >= 1 for p in listed)          # DeepSpeed offloads through its ZeRO optimizer
    assert len(listed) == count_layouts(sc.model, sc.cluster, sc.parallel, spec.space)


def test_parameter_offload_keeps_the_sweep_on_zero3():
    raw = {**RAW, "parallel": {**RAW["parallel"], "zero_stage": 3, "offload": {"optimizer": True, "params": True}}}
    sc = scenario_from_dict(raw)
    spec = sweep_spec(sc, evaluators=SWEEP_EVALUATORS)
    listed = list(enumerate_layouts(sc.model, sc.cluster, sc.parallel, spec.space))
    assert listed and {p.zero_stage for p in listed} == {3}
    assert all(p.offload_params and p.offload_optimizer for p in listed)


def test_sweep_json_says_the_offload_is_held(tmp_path):
    path = tmp_path / "off.json"
    path.write_text(json.dumps(RAW))
    p = subprocess.run([sys.executable, "-m", "clustersim", "sweep", str(path), "--top", "2", "--json",
                        "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["fixed_offload"] == {"optimizer": True, "params": False, "activations": False}
    assert all(row["parallel"].get("offload") == {"optimizer": True} for row in data["top"])
    assert any("parallel.offload (optimizer) is held fixed" in line for line in data["verdict"])


def test_compare_keeps_the_offload_and_says_so(tmp_path):
    path = tmp_path / "off.json"
    path.write_text(json.dumps(RAW))
    p = subprocess.run([sys.executable, "-m", "clustersim", "compare", str(path), "--clusters", "dgx-a100",
                        "--tokens", "1B", "--json", "--no-progress", "--executor", "serial"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    row = json.loads(p.stdout)["rows"][0]
    assert row["fixed_offload"]["optimizer"] is True
    assert row["best_layout"].get("offload") == {"optimizer": True}
