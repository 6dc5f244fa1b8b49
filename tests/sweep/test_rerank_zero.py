"""`--rerank 0` still ships the event engine's #1 (docs/output.md: rows are re-timed in rounds
until #1 is): with no row asked for up front (no plain 3D row under --fix cp=2, the scenario's own
layout outside the constraint) #1 was the closed form's, 6.17668 s against run's 6.17685 s."""

from __future__ import annotations

import json

from tests.conftest import cli


def test_rerank_zero_still_simulates_the_best_row():
    scenario = "scenarios/llama3_8b_h200x8.yaml"
    p = cli("sweep", scenario, "--fix", "cp=2", "--top", "2", "--rerank", "0", "--json", "--no-progress")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    best = data["top"][0]
    assert data["simulated"] >= 1
    assert best["engine"] == "simulate"
    sets = [a for k, v in best["parallel"].items() for a in ("--set", f"parallel.{k}={str(v).lower()}")]
    run = cli("run", scenario, *sets, "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["step_time_s"] == best["step_time_s"]
