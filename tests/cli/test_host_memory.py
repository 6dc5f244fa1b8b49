"""Host RAM under offload (clustersim.report.StepReport.host_memory): what a node's GPUs offload
against the cluster profile's host_memory_GiB, in `run --json` (memory.host) and as a line of the
readable report, with a warning on stderr where it does not fit; it was never checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from clustersim import api, units
from clustersim.scenario import scenario_from_dict

ROOT = Path(__file__).resolve().parents[2]
BIG = {"name": "megatron-146b offload on 2 DGX A100", "framework": "deepspeed", "model": {"preset": "megatron-146b"},
       "cluster": {"preset": "dgx-a100", "nodes": 2},
       "parallel": {"dp": 16, "micro_batch": 1, "global_batch": 16, "zero_stage": 3, "recompute": "full",
                    "offload": {"optimizer": True, "params": True}},
       "training": {"dtype": "bf16"}}


def test_the_node_host_memory_is_checked():
    report = api.estimate(scenario_from_dict(BIG))
    host = report.host_memory
    assert host is not None
    assert host["bytes_per_node"] == 8 * host["bytes_per_gpu"] > 1024 * units.GiB
    assert host["capacity_bytes_per_node"] == 1024 * units.GiB
    assert host["verdict"] == "does-not-fit"
    assert report.to_json()["memory"]["host"] == host
    # 2 TB DGX H100 hosts hold it
    h100 = api.estimate(scenario_from_dict({**BIG, "cluster": {"preset": "dgx-h100", "nodes": 2}}))
    assert h100.host_memory["verdict"] == "fits"


def test_no_offload_no_host_check():
    raw = {**BIG, "model": {"preset": "llama2-7b"}, "parallel": {**BIG["parallel"], "offload": {}}}
    report = api.estimate(scenario_from_dict(raw))
    assert report.host_memory is None and "host" not in report.to_json()["memory"]


def test_run_says_so(tmp_path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(BIG))
    p = subprocess.run([sys.executable, "-m", "clustersim", "run", str(path), "--engine", "analytical"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "host memory" in p.stdout and "DOES NOT FIT" in p.stdout
    assert "warning: host memory:" in p.stderr and "1,024 GiB host memory" in p.stderr
