"""`clustersim sweep` and `clustersim compare` on the command line: JSON shape, files, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--set", "model.preset=megatron-1.7b", "--set", "cluster.preset=dgx-a100", "--set", "cluster.nodes=1",
         "--set", "parallel.tp=2", "--set", "parallel.pp=2", "--set", "parallel.dp=2",
         "--set", "parallel.global_batch=16"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clustersim", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_sweep_json_out_and_plot(tmp_path):
    out, png = tmp_path / "all.csv", tmp_path / "front.png"
    p = run("sweep", *SMALL, "--executor", "serial", "--top", "3", "--rerank", "2", "--json", "--out", str(out),
            "--plot", str(png))
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert set(data) >= {"evaluated", "feasible", "top"}
    assert len(data["top"]) == 3
    for row in data["top"]:
        assert set(row) >= {"parallel", "step_time_s", "tokens_per_s", "mfu", "peak_bytes_per_gpu"}
        assert row["parallel"]["tp"] * row["parallel"]["pp"] * row["parallel"]["dp"] * row["parallel"]["cp"] == 8
    df = pd.read_csv(out)
    assert len(df) == data["evaluated"]
    assert int(df["fits"].sum()) == data["feasible"]
    assert png.stat().st_size > 1000


@pytest.mark.parametrize("args,field", [
    (["sweep", *SMALL, "--gpus", "12"], "--gpus"),                     # not a node multiple nor a divisor
    (["sweep", "--set", "model.preset=gpt3-175b", "--set", "cluster.preset=dgx-a100", "--set", "cluster.nodes=1",
      "--set", "parallel.tp=8", "--set", "parallel.pp=1", "--set", "parallel.dp=1",
      "--set", "parallel.global_batch=8", "--executor", "serial"], "--gpus"),  # never fits
    (["sweep", *SMALL, "--out", "x.txt"], "--out"),
    (["sweep", *SMALL, "--scheduler", "tcp://localhost:1"], "--scheduler"),
    (["compare", *SMALL, "--clusters", "dgx-a100,nope"], "cluster.preset"),
    (["compare", *SMALL, "--clusters", "dgx-a100", "--price-per-gpu-hour", "cheap"], "--price-per-gpu-hour"),
    (["compare", *SMALL, "--clusters", "dgx-a100", "--tokens", "lots"], "--tokens"),
])
def test_bad_input_exits_2(args, field):
    p = run(*args)
    assert p.returncode == 2, p.stderr
    assert field in p.stderr


def test_compare_json():
    p = run("compare", *SMALL, "--clusters", "dgx-a100,dgx-h100", "--tokens", "1B", "--workers", "1",
            "--price-per-gpu-hour", "dgx-a100=1,dgx-h100=2", "--json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["rows"]
    assert [r["cluster"] for r in rows] == ["dgx-a100", "dgx-h100"]
    for r in rows:
        # time = tokens / tokens_per_s; GPU-hours = gpus * time / 3600; cost = GPU-hours * price
        assert r["time_to_train_s"] == pytest.approx(1e9 / r["tokens_per_s"])
        assert r["gpu_hours"] == pytest.approx(r["gpus"] * r["time_to_train_s"] / 3600)
        assert r["cost_usd"] == pytest.approx(r["gpu_hours"] * r["price_per_gpu_hour_usd"])
    assert [r["price_per_gpu_hour_usd"] for r in rows] == [1.0, 2.0]
