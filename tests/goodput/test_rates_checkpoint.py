"""Failure classes (component counts, Llama 3 Table 5) and checkpoint sizes and times."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from clustersim.api import estimate
from clustersim.errors import InputError
from clustersim.goodput.checkpoint import checkpoint_cost
from clustersim.goodput.config import goodput_spec
from clustersim.goodput.rates import (
    DEFAULT_MTBF_H,
    DEFAULT_PLANNED_INTERVAL_H,
    LLAMA3_SWITCHES,
    component_counts,
    failure_classes,
)
from clustersim.hardware.load import load_cluster
from clustersim.network.topology import build_topology
from clustersim.scenario import load_scenario

LLAMA = "scenarios/llama3_405b_h100x16384.yaml"


@pytest.mark.parametrize("nodes", [1, 4, 40, 70])
def test_component_counts_match_the_topology_graph(nodes: int) -> None:
    cluster = load_cluster("dgx-h100", nodes)
    kinds: dict[str, int] = {}
    for _, data in build_topology(cluster).nodes(data=True):
        kinds[data["kind"]] = kinds.get(data["kind"], 0) + 1
    counts = component_counts(cluster)
    assert counts["gpu"] == kinds["gpu"] and counts["node"] == kinds["nvswitch"] == nodes
    if nodes == 1:  # a one-node job never leaves NVLink
        assert counts["nic"] == counts["switch"] == 0
    else:
        assert counts["nic"] == kinds["nic"]
        assert counts["switch"] == kinds["leaf"] + kinds.get("spine", 0)


def test_llama3_cluster_reproduces_table_5() -> None:
    """2,048 DGX H100 over 54 days: the class counts of Table 5 (268 GPU, 46 host, 7 NIC, 35
    switch/cable, 63 software; 419 in all) and 47 planned interruptions."""
    cluster = load_cluster("dgx-h100", 2048)
    assert component_counts(cluster)["switch"] == LLAMA3_SWITCHES == 544
    hours = 54 * 24
    got = {c.name: c.count * hours / c.mtbf_h for c in failure_classes(cluster, DEFAULT_MTBF_H)}
    assert got == pytest.approx({"gpu": 268, "node": 46, "nic": 7, "switch": 35, "software": 63})
    assert sum(got.values()) == pytest.approx(419)
    assert hours / DEFAULT_PLANNED_INTERVAL_H == pytest.approx(47)


@pytest.fixture(scope="module")
def llama():
    return estimate(load_scenario(LLAMA))


def test_llama3_checkpoint_by_hand(llama) -> None:
    """405.9B parameters x (2 bytes bf16 + 12 bytes Adam) = 5.68 TB; written at Tectonic's
    2 TB/s: 2.84 s. Per GPU (fully parallel save, ZeRO-1 over dp 128): its stage's weights / 128
    + its optimizer shard, within the paper's 1 MB - 4 GB per GPU (Llama 3 paper, 3.3.1)."""
    sc = llama.scenario
    c = checkpoint_cost(sc, llama.memory_by_stage, goodput_spec(None))
    params = sc.model.total_params()
    assert c.size_bytes == params * 14
    assert c.size_bytes == pytest.approx(5.68e12, rel=0.01)
    assert c.write_s == pytest.approx(c.size_bytes / 2e12)
    assert 1e6 < c.per_gpu_bytes < 4e9
    # the shares of all GPUs add up to the checkpoint (stages differ by a layer and embeddings)
    assert c.per_gpu_bytes * sc.cluster.num_gpus == pytest.approx(c.size_bytes, rel=0.15)
    # sync blocks for the copy and the write; async only for the copy; the write is the lag
    assert c.blocking_s == c.snapshot_s + c.write_s and c.lag_s == 0
    a = checkpoint_cost(sc, llama.memory_by_stage, dataclasses.replace(goodput_spec(None), checkpoint="async"))
    assert a.blocking_s == a.snapshot_s == c.snapshot_s and a.lag_s == c.write_s
    # every rank reads its whole state (Megatron's default) unless the load is fully parallel
    assert c.read_bytes > 10 * c.size_bytes
    par = checkpoint_cost(sc, llama.memory_by_stage, dataclasses.replace(goodput_spec(None), parallel_load=True))
    assert par.read_bytes == c.size_bytes and par.load_s < c.load_s


def test_per_node_bandwidth_limits_the_write(llama) -> None:
    spec = dataclasses.replace(goodput_spec(None), node_storage_bw_bytes_per_s=0.1e9)
    c = checkpoint_cost(llama.scenario, llama.memory_by_stage, spec)
    assert c.write_s == pytest.approx(c.per_gpu_bytes * 8 / 0.1e9)


def test_async_snapshot_must_fit_in_host_memory(llama) -> None:
    sc = llama.scenario
    small = dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, host_memory_bytes=2**20))
    spec = dataclasses.replace(goodput_spec(None), checkpoint="async")
    with pytest.raises(InputError, match="goodput.checkpoint"):
        checkpoint_cost(small, llama.memory_by_stage, spec)
    checkpoint_cost(small, llama.memory_by_stage, goodput_spec(None))  # sync needs no host copy


@pytest.mark.parametrize("change,field", [
    ({"mtbf_h": (("gpu", 0.0), *tuple(goodput_spec(None).mtbf_h[1:]))}, "goodput.mtbf_h.gpu"),
    ({"mtbf_h": tuple(goodput_spec(None).mtbf_h[1:])}, "goodput.mtbf_h"),
    ({"storage_write_bw_bytes_per_s": -1.0}, "goodput.storage_write_bw_GBps"),
    ({"detect_s": float("nan")}, "goodput.detect_s"),
    ({"checkpoint": "lazy"}, "goodput.checkpoint"),
])
def test_spec_built_in_code_is_checked(change: dict, field: str) -> None:
    with pytest.raises(InputError, match=field):
        dataclasses.replace(goodput_spec(None), **change)


GB200 = ["cluster.preset=gb200-nvl72", "cluster.nodes=4", "model.preset=llama3-8b", "parallel.tp=1", "parallel.pp=1",
         "parallel.dp=16", "parallel.zero_stage=1", "parallel.global_batch=64", "parallel.sequence_parallel=false"]


def test_the_snapshot_default_is_the_host_link_as_documented() -> None:
    """The snapshot copies over ClusterSpec.host_memory_link (GB200: NVLink-C2C, 450 GB/s x 0.9);
    the docs and `goodput --help` said "the cluster's PCIe"."""
    from clustersim.cli.goodput_cmd import goodput
    est = estimate(load_scenario(None, GB200))
    c = checkpoint_cost(est.scenario, est.memory_by_stage, goodput_spec(None))
    assert est.scenario.cluster.host_memory_link.name == "nvlink-c2c"
    assert c.snapshot_s == pytest.approx(c.per_gpu_bytes / (450e9 * 0.9))
    root = Path(__file__).resolve().parents[2]
    texts = [(root / "docs" / d).read_text() for d in ("goodput.md", "output.md", "scenario.md")]
    texts += [f"--snapshot: {p.help}" for p in goodput.params if p.name == "snapshot"]
    for text in texts:
        lines = [line for line in text.splitlines() if "snapshot" in line.lower() or "Snapshot" in line]
        assert lines and not any("the cluster's PCIe" in line for line in lines), lines


@pytest.mark.parametrize("offload", ["optimizer", "params"])
def test_offloaded_states_are_saved_but_not_snapshotted(offload: str) -> None:
    """Optimizer offload (and ZeRO-3 parameter offload) keep states in host memory; the GPU-resident
    optimizer_states / weights are then 0, and the checkpoint's per-GPU bytes, write and read left
    them out (llama3-8b: write 112.4 s at 1 GB/s per node fell to 16.1 s). They are saved all the
    same; only the snapshot (GPU to host) skips what is already on the host."""
    sets = [*GB200, "parallel.zero_stage=3"]
    spec = dataclasses.replace(goodput_spec(None), node_storage_bw_bytes_per_s=1e9)
    on_gpu = estimate(load_scenario(None, sets))
    held = estimate(load_scenario(None, [*sets, f"parallel.offload.{offload}=true"]))
    a = checkpoint_cost(on_gpu.scenario, on_gpu.memory_by_stage, spec)
    b = checkpoint_cost(held.scenario, held.memory_by_stage, spec)
    assert b.per_gpu_bytes == pytest.approx(a.per_gpu_bytes, rel=1e-9)
    assert b.write_s == pytest.approx(a.write_s) and b.read_bytes == pytest.approx(a.read_bytes)
    assert b.snapshot_s < a.snapshot_s
