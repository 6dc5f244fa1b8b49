"""The data-parallel gradient bucket: one rule (frameworks.grad_bucket_params) that the plan's
bucketed reductions and ZeRO-2's bucket buffers in the memory model both read."""

from __future__ import annotations

import pytest

from clustersim.compute.layer import layer_params_per_gpu
from clustersim.memory.buffers import buffer_bytes
from clustersim.plan.dp_rules import bucket_params, grad_reduce_bytes
from clustersim.scenario import load_scenario

BASE = ["model.preset=megatron-1.7b", "cluster.preset=dgx-h100", "parallel.tp=1",
        "parallel.pp=1", "parallel.zero_stage=2"]


def _scenario(tmp_path, framework: str, dp: int, cp: int, extra: tuple[str, ...] = ()):
    path = tmp_path / "s.yaml"
    path.write_text(f"framework: {framework}\n")
    return load_scenario(path, BASE + [f"cluster.nodes={dp * cp // 8}", f"parallel.dp={dp}", f"parallel.cp={cp}",
                                       f"parallel.global_batch={dp * 4}", *extra])


@pytest.mark.parametrize(("framework", "dp", "cp", "extra", "want"), [
    ("megatron-core", 8, 1, (), 40_000_000),                 # max(40M, 1M x 8)
    ("megatron-core", 64, 2, (), 128_000_000),               # 1M x dp x cp: the context-parallel ranks count
    ("deepspeed", 64, 1, (), 500_000_000),                   # reduce_bucket_size
    ("torchtitan", 64, 1, ("parallel.zero_stage=0",), 25_000_000),   # DDP bucket_cap_mb=100
    ("deepspeed", 64, 1, ("parallel.dp_bucket_params=7000000",), 7_000_000),  # the scenario's own wins
])
def test_bucket_by_framework(tmp_path, framework, dp, cp, extra, want):
    assert bucket_params(_scenario(tmp_path, framework, dp, cp, extra)) == want


@pytest.mark.parametrize(("framework", "dp", "cp"), [("megatron-core", 64, 2), ("deepspeed", 64, 1)])
def test_zero2_buffers_hold_buckets_of_the_same_rule(tmp_path, framework, dp, cp):
    """Two buckets where the reduction overlaps the backward, one where it does not (DeepSpeed's
    default: buf_1 only with overlap_comm), each of the bucket rule's size."""
    sc = _scenario(tmp_path, framework, dp, cp)
    m, lay = sc.model, sc.parallel
    stage = layer_params_per_gpu(m, lay.tp, lay.ep) * m.layers
    held, _ = buffer_bytes(m, lay, sc.training.dtype, m.layers, True, True, sc.framework)
    z1 = _scenario(tmp_path, framework, dp, cp, ("parallel.zero_stage=1",))
    held_z1, _ = buffer_bytes(m, z1.parallel, sc.training.dtype, m.layers, True, True, sc.framework)
    buckets = 2 if lay.overlap_grad_reduce else 1
    assert buckets == (1 if framework == "deepspeed" else 2)
    assert held - held_z1 == pytest.approx(buckets * min(bucket_params(sc), stage) * grad_reduce_bytes(sc))
