"""Several jobs on one fabric (clustersim.engine.cosim): an oversubscribed spine makes two MoE jobs
slow each other, a full-bisection one does not; bad input exits 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clustersim.engine.cosim import cosimulate
from clustersim.scenario import scenario_from_dict

ROOT = Path(__file__).resolve().parents[2]


def _moe(name: str, oversubscription: float) -> dict:
    # Mixtral with expert parallelism 8 over 8 nodes (TP 8 inside a node): the token all-to-all
    # crosses leaves of 4 nodes, so the jobs' dispatches meet on the leaf uplinks
    # (sequence parallelism on: Megatron-Core requires it for MoE with TP > 1, parallel/rules.py);
    # micro-batches of 2 sequences: at 1 a TP-8 layer's host time (clustersim.compute.host) covers
    # much of its GPU time and the fabric's share of the step shrinks (slowdown 1.18 there, 1.24 here)
    return {"name": name, "model": {"preset": "mixtral-8x7b"},
            "cluster": {"preset": "dgx-h100", "nodes": 8, "nodes_per_leaf": 4, "oversubscription": oversubscription},
            "parallel": {"tp": 8, "sequence_parallel": True, "pp": 1, "dp": 8, "ep": 8, "micro_batch": 2,
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


def _dense(name: str, nodes_per_leaf: int, oversubscription: float) -> dict:
    # Llama 3 8B, TP 8 inside a node, data-parallel rings over 4 nodes
    return {"name": name, "model": {"preset": "llama3-8b"},
            "cluster": {"preset": "dgx-h100", "nodes": 4, "nodes_per_leaf": nodes_per_leaf,
                        "oversubscription": oversubscription},
            "parallel": {"tp": 8, "pp": 1, "dp": 4, "micro_batch": 1, "global_batch": 16, "zero_stage": 1,
                         "overlap_grad_reduce": False}}


def _shared_and_run_alone(job: dict) -> tuple[list[dict], float]:
    from clustersim.api import simulate

    sc = [scenario_from_dict({**job, "name": n}) for n in ("A", "B")]
    return cosimulate(sc, steps=1)["shared_fabric"]["jobs"], simulate(sc[0]).step_time_s


def test_dense_jobs_keep_the_oversubscription_a_job_alone_pays() -> None:
    """Rings crossed the spine for free on a shared fabric: two Llama 3 8B jobs (DP rings over 4
    nodes) on leaves of 1 node at 8:1 took 0.635 s each, the full-bisection answer, while `run` of
    one of them alone charges the ring 1/8 of its NIC rate (docs/network.md: a ring's one crossing
    hop per leaf, ports.leaf_uplink_share) and takes 1.264 s. Sharing a spine never makes a job
    faster than it is alone; with leaves of 2 nodes at 4:1 the two jobs' rings meet on the
    uplinks of leaves that hold a node of each, and each is slower than alone."""
    jobs, alone = _shared_and_run_alone(_dense("dense", 1, 8.0))
    for job in jobs:   # 1-node leaves: each node has its own uplinks, so no contention either
        assert job["step_time_s"] >= alone * (1 - 1e-9), (job, alone)
        assert job["alone_step_time_s"] == pytest.approx(alone, rel=1e-9)
    jobs, alone = _shared_and_run_alone(_dense("dense2", 2, 4.0))
    for job in jobs:
        assert job["alone_step_time_s"] == pytest.approx(alone, rel=1e-9), (job, alone)
        assert job["step_time_s"] > 1.2 * alone, (job, alone)


@pytest.mark.parametrize("pp", [1, 2])
def test_moe_jobs_sharing_a_spine_are_no_faster_than_alone(pp: int) -> None:
    """Mixtral, EP 8 across nodes, 4-node leaves at 4:1, each job half of every leaf. With pp 2 the
    jobs came out faster shared (0.722 s) than `run` alone (0.750 s): a cross-leaf transfer of a
    stage charged f x L / pp to one averaged leaf while f took all L of the job's nodes in the
    leaf as the stage's EP peers. Leaves now hold their own stages (clustersim.engine.cosim
    `_leaf_kinds`), each stage's transfer charging f x its nodes there."""
    from clustersim.api import simulate

    job = _moe("M", 4.0)
    job = {**job, "cluster": {**job["cluster"], "nodes": 8 * pp},
           "parallel": {**job["parallel"], "pp": pp}}
    sc = [scenario_from_dict({**job, "name": n}) for n in ("A", "B")]
    alone = simulate(sc[0]).step_time_s
    for row in cosimulate(sc, steps=1)["shared_fabric"]["jobs"]:
        assert row["step_time_s"] >= alone, (row, alone)


def test_cross_leaf_phases_count_the_phases_of_one_step() -> None:
    """`cross_leaf_phases` counted distinct cached phase objects: 1 for Mixtral, whose 32 MoE layers
    share one all-to-all plan. It counts, as docs/output.md says, the collective phases of one
    step whose traffic crosses leaves: per micro-batch and MoE layer the forward dispatch and
    combine and their two backward all-to-alls, plus the data-parallel collectives (rings over 8
    nodes, 2 of them per leaf)."""
    from clustersim.engine.cosim import make_job

    sc = scenario_from_dict(_moe("A", 4.0))
    jobs = cosimulate([sc, scenario_from_dict(_moe("B", 4.0))], steps=1)["shared_fabric"]["jobs"]
    plan = make_job(sc, 16, 4).plan
    dp = plan.dp
    tables = [dp.grad_buckets, dp.after_backward, dp.param_gathers, dp.after_optimizer]
    dp_phases = sum(1 for table in tables for items in table.values() for _, p in items for ph in p.phases
                    if ph.tier == "scale_out" and p.shape.num_nodes > 2)
    micro_batches = sc.parallel.num_micro_batches   # 64 sequences over dp 8 in micro-batches of 2
    assert dp_phases > 0
    assert jobs[0]["cross_leaf_phases"] == 32 * 4 * micro_batches + dp_phases


def test_jobs_with_other_nics_are_refused_naming_both() -> None:
    """A 400G InfiniBand job and a 100G Ethernet one were run together: the leaves' uplinks and
    every job's demand on them are counted in NICs, so the 100G job's transfers were charged as
    400G ones. Refused (exit 2), naming the field and both jobs' NICs."""
    from clustersim.errors import InputError

    eth = _moe("B", 4.0)
    eth = {**eth, "cluster": {**eth["cluster"], "scale_out": "eth-100g"}}
    with pytest.raises(InputError) as err:
        cosimulate([scenario_from_dict(_moe("A", 4.0)), scenario_from_dict(eth)], steps=1)
    text = str(err.value)
    assert "SCENARIO 2 cluster.scale_out" in text and "eth-100g" in text and "ib-ndr" in text, text


def _two_stage_dense(name: str) -> dict:
    # Llama 3 8B, TP 8 inside a node, PP 2 over 6 nodes: each stage's data-parallel rings span 3
    # nodes, which leaves of 2 nodes per job (2 jobs on leaves of 4) do not divide
    return {"name": name, "model": {"preset": "llama3-8b"},
            "cluster": {"preset": "dgx-h100", "nodes": 6, "nodes_per_leaf": 4, "oversubscription": 4.0},
            "parallel": {"tp": 8, "pp": 2, "dp": 3, "micro_batch": 1, "global_batch": 24, "zero_stage": 1,
                         "overlap_grad_reduce": False}}


def test_a_leaf_holding_two_stages_carries_both_stages_crossings() -> None:
    """A leaf holding the last node of stage 0 and the first of stage 1 was charged f x 1 per stage
    with f = 1 / 2 (a ring's one crossing hop over a whole leaf of 2 of the job's nodes), 1 node-NIC
    in all, as if it held one stage's ring; each stage's ring crosses that leaf once, 2 node-NICs.
    Shared, the two jobs took 0.719 s (0.686 s alone); now 0.763 s (0.691 s alone)."""
    from clustersim.engine.cosim import _leaf_kinds, _plans, make_job

    sc = scenario_from_dict(_two_stage_dense("A"))
    job = make_job(sc, 12, 4)
    assert job.nodes_per_leaf == 2
    assert job.leaves == (((0, 2.0),), ((0, 1.0), (1, 1.0)), ((1, 2.0),))
    _, (stage_kinds,) = _leaf_kinds([job], 4, 4.0)
    demand: dict[int, float] = {}
    for rk in job.plan.ranks:
        rings = [p for p in _plans(rk, job.plan) if p.op == "reduce_scatter" and p.shape.num_nodes == 3]
        assert rings
        for kind, w in job.uplink_weights(rings[0].phases[0], stage_kinds[rk.pp_rank]):
            demand[kind] = demand.get(kind, 0.0) + w
    # leaves of stage 0 only, of both stages, of stage 1 only: one crossing hop per stage there
    assert sorted(demand.values()) == pytest.approx([1.0, 1.0, 2.0])
    rows = cosimulate([sc, scenario_from_dict(_two_stage_dense("B"))], steps=1)["shared_fabric"]["jobs"]
    for row in rows:
        assert row["step_time_s"] > 0.75 and row["step_time_s"] >= row["alone_step_time_s"], row
