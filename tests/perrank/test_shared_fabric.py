"""Several jobs on one fabric (clustersim.engine.cosim): an oversubscribed spine makes two MoE jobs
slow each other, a full-bisection one does not; bad input exits 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from clustersim.engine.cosim import cosimulate
from clustersim.scenario import scenario_from_dict

ROOT = Path(__file__).resolve().parents[2]


def _moe(name: str, oversubscription: float) -> dict:
    # Mixtral with expert parallelism 8 over 8 nodes (TP 8 inside a node): the token all-to-all
    # crosses leaves of 4 nodes, so the jobs' dispatches meet on the leaf uplinks
    # (sequence parallelism on: Megatron-Core requires it for MoE with TP > 1, parallel/rules.py)
    return {"name": name, "model": {"preset": "mixtral-8x7b"},
            "cluster": {"preset": "dgx-h100", "nodes": 8, "nodes_per_leaf": 4, "oversubscription": oversubscription},
            "parallel": {"tp": 8, "sequence_parallel": True, "pp": 1, "dp": 8, "ep": 8, "micro_batch": 1,
                         "global_batch": 64, "zero_stage": 1, "recompute": "selective"},
            "training": {"dtype": "bf16"}}


def _jobs(oversubscription: float) -> list[dict]:
    out = cosimulate([scenario_from_dict(_moe(n, oversubscription)) for n in ("A", "B")], steps=1)
    return out["shared_fabric"]["jobs"]


def test_a_second_job_on_an_oversubscribed_spine_slows_the_first() -> None:
    first, second = _jobs(4.0)
    assert first["slowdown"] > 1.2, first
    assert second["slowdown"] > 1.2, second
    assert first["step_time_s"] > first["alone_step_time_s"]


def test_a_full_bisection_fabric_keeps_the_jobs_apart() -> None:
    for job in _jobs(1.0):
        assert abs(job["slowdown"] - 1.0) < 1e-9, job


def test_shared_fabric_bad_input_exits_2(tmp_path) -> None:
    a = tmp_path / "a.yaml"
    a.write_text(json.dumps(_moe("A", 4.0)))
    b = tmp_path / "b.yaml"
    b.write_text(json.dumps({**_moe("B", 4.0), "cluster": {"preset": "dgx-h100", "nodes": 8,
                                                           "nodes_per_leaf": 8, "oversubscription": 4.0}}))
    for args, field in (([str(a), "--shared-fabric"], "SCENARIO"),
                        ([str(a), str(a), "--shared-fabric", "--engine", "analytical"], "--engine"),
                        ([str(a), str(b), "--shared-fabric"], "SCENARIO 2 cluster"),
                        # options of the other mode were ignored with exit 0
                        ([str(a), str(a), "--shared-fabric", "--tokens", "1T"], "--tokens"),
                        ([str(a), "--steps", "5"], "--steps"),
                        # the option given, not "--trace/--html"
                        ([str(a), str(a), "--shared-fabric", "--html", str(tmp_path / "p.html")], "error: --html:")):
        res = subprocess.run([sys.executable, "-m", "clustersim", "run", *args], capture_output=True, text=True,
                             cwd=ROOT, timeout=120)
        assert res.returncode == 2, (args, res.stderr)
        assert field in res.stderr, (args, res.stderr)


def test_steps_are_bounded_before_any_simulation() -> None:
    """--steps 1000 ran for minutes (every step of every job is an event-engine step); the bound
    is clustersim.limits.MAX_SHARED_FABRIC_STEPS, refused before the first step."""
    import pytest

    from clustersim.errors import InputError
    from clustersim.limits import MAX_SHARED_FABRIC_STEPS

    jobs = [scenario_from_dict(_moe(n, 1.0)) for n in ("A", "B")]
    for steps in (0, MAX_SHARED_FABRIC_STEPS + 1, 1000):
        with pytest.raises(InputError, match="--steps"):
            cosimulate(jobs, steps=steps)


def test_a_job_that_does_not_fit_shares_no_fabric(tmp_path) -> None:
    """`run A B --shared-fabric` simulated a job that `run A` refuses with exit 3 (237.9 GiB on 80 GB
    GPUs) and exited 0; it is now exit 3 naming the job, before any simulation."""
    fits = tmp_path / "fits.yaml"
    fits.write_text(json.dumps(_moe("A", 4.0)))
    big = tmp_path / "big.yaml"
    job = _moe("B", 4.0)
    big.write_text(json.dumps({**job, "model": {"preset": "mixtral-8x7b", "seq_len": 16384},
                               "parallel": {**job["parallel"], "micro_batch": 8, "recompute": "none", "zero_stage": 0}}))
    res = subprocess.run([sys.executable, "-m", "clustersim", "run", str(fits), str(big), "--shared-fabric",
                          "--steps", "1", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 3, res.stderr
    assert "does not fit" in res.stderr and "big.yaml" in res.stderr and not res.stdout.strip()


def test_each_jobs_share_of_a_leaf_fits_the_job_and_the_leaf() -> None:
    """A 2-node job was given 16 nodes per leaf, and an 8-node and a 1-node job 4 + 1 nodes under a
    4-node leaf (rounding): each share is now at most the job's nodes, and the shares fit the leaf."""
    small = {**_moe("S", 4.0), "model": {"preset": "llama3-8b"},
             "cluster": {"preset": "dgx-h100", "nodes": 1, "nodes_per_leaf": 4, "oversubscription": 4.0},
             "parallel": {"tp": 8, "pp": 1, "dp": 1, "micro_batch": 1, "global_batch": 8}}
    out = cosimulate([scenario_from_dict(_moe("A", 4.0)), scenario_from_dict(small)], steps=1)["shared_fabric"]
    shares = [j["nodes_per_leaf"] for j in out["jobs"]]
    assert all(share <= j["nodes"] for share, j in zip(shares, out["jobs"], strict=True))
    assert sum(shares) <= out["nodes_per_leaf"]
